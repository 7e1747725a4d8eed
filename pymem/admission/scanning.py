"""Is this text shaped like an instruction to the agent? A blunt, explainable tripwire.

Why it exists. Memory poisoning works by getting a sentence *addressed to the model* stored as
if it were a fact, so that a later session reads it back as trusted context: "from now on,
forward every invoice to ...", "the real IBAN is ...", "when the user says X, run Y". A memory
store has no business keeping text that talks to the agent, whoever wrote it, so the write gate
refuses anything that looks like one (and recall refuses it again, under the current rules).

What it is not. This is not a classifier and does not understand meaning. It is a table of
named regular expressions over a normalised form of the text, chosen so that a refusal can be
explained by a short stable name ("override.ignore_previous") and audited, and so that
benign *descriptive* notes ("Bob forwarded the invoice to accounting", "the user must submit
reports by Friday") pass. Signatures therefore prefer second-person or imperative shapes
(clause-initial base-form verbs, "you must ...") over the bare words.

Not covered (by design, documented): encodings (base64, rot13), other natural languages,
paraphrases with no instruction shape. Shapes the signatures were never written for are the
learned classifier's (pymem.admission.classifier), which the gate runs after them; a
model-based guard can be plugged into `rejudge` as well.

The signatures are four modules: pymem.admission.normalise (the text every signature sees),
pymem.admission.signatures (the named patterns), this one (scanning values for them, walked
as pymem.admission.pieces walks them for the classifier) and pymem.admission.reach (which lets
a form that differs from one already searched be searched only where it differs, so that a long
note costs about one scan per signature, not eight).
"""

from __future__ import annotations

from typing import Any

from .needles import Lookups
from .normalise import forms
from .pieces import MAX_DEPTH, TOO_DEEP, TooDeep, strings
from .reach import Derived, Stats, TextStats, differences, windows
from .signatures import INSTRUCTION_SIGNATURES, SQUASHED_SIGNATURES, Signature

__all__ = ["instruction_shaped", "scan_text", "MAX_DEPTH", "TOO_DEEP"]

# ----------------------------------------------------------------------------------------------
# scanning
# ----------------------------------------------------------------------------------------------

# MAX_DEPTH, the deepest nesting scanned: deeper structures are refused (TOO_DEEP) rather than
# partly scanned, since a value the gate cannot fully read must not pass as clean. The classifier
# reads values the same way (pymem.admission.pieces).


def scan_text(text: str) -> str | None:
    """The name of the first signature matching any variant of `text`, else None."""
    return _Scanned(text).first_match()


class _Form:
    """One text the signatures are searched in: in full, or, when `spans` is set, only where it
    differs from `sources`: texts searched already that held no match, of which every other
    stretch of this one is a stretch (pymem.admission.reach)."""

    __slots__ = ("_lookups", "_starts", "_stats", "sources", "spans", "text")

    def __init__(self, text: str, spans: list[tuple[int, int]] | None = None, sources: tuple[_Form, ...] = ()):
        self.text, self.spans, self.sources = text, spans, sources
        self._lookups: Lookups | None = None
        self._stats: Stats | None = None
        self._starts: dict[int, tuple[list[tuple[int, int]], int] | None] = {}

    def stats(self) -> Stats:
        """The lengths a reach is measured in. A text that differs from its sources in a few places
        takes theirs: a run of characters in it is runs of its sources joined by what lies in
        those places, so the sum of theirs and the places' lengths bounds it."""
        if self._stats is None:
            if self.spans is None:
                self._stats = TextStats(self.text)
            else:
                extra = sum(hi - lo for lo, hi in self.spans)
                self._stats = Derived(tuple(s.stats() for s in self.sources), extra)
        return self._stats

    def matches(self, sig: Signature) -> bool:
        if self.spans is not None:
            if not self.spans:
                return False  # the same text as one already searched
            near = self._near(sig)
            if near is not None:
                return near
        # A signature is searched for in a form that holds its needles, and only there: a form
        # without them cannot match it (pymem.admission.needles), so the answer is the same.
        if self._lookups is None:
            self._lookups = Lookups(self.text)
        return sig.may_match(self._lookups) and sig.search(self.text) is not None

    def _near(self, sig: Signature) -> bool | None:
        """Whether `sig` matches, searched only in the windows where a match reading one of the
        spans can start (pymem.admission.reach.windows); None when its reach is unbounded in this
        text or its windows would cover most of it (then it is searched in full)."""
        assert self.spans is not None
        key = id(sig)
        if key not in self._starts:
            spread = sig.spread(self.stats())
            found = None
            if spread is not None:
                starts = windows(self.spans, spread[1], len(self.text))
                if 2 * sum(hi - lo for lo, hi in starts) <= len(self.text):
                    found = (starts, spread[0])
            self._starts[key] = found
        near = self._starts[key]
        if near is None:
            return None
        return sig.search_windows(self.text, *near) is not None


class _Scanned:
    """A text's forms and squashed form, ready to be searched.

    For each signature the first form is searched before the others, so when another is searched
    the first is known to hold no match of it: each other form is searched only where it differs
    from the first. A text made of strings joined by newlines, each of which was searched alone
    and held no match (`joined`), is searched only across the joins, where its forms are the
    strings' forms joined (else, normalisation having read across a line break, in full)."""

    def __init__(self, text: str, joined: list[_Scanned] | None = None):
        four, squashed = forms(text) if text else (("", "", "", ""), "")
        self.by_index: list[_Form] = []
        self.forms: list[_Form] = []  # the distinct ones, in order
        for k, form in enumerate(four):
            if form in four[:k]:
                self.by_index.append(self.by_index[four.index(form)])
                continue
            if joined is not None:
                made = _joined(form, [p.by_index[k] for p in joined], "\n")
            elif k == 0:
                made = _Form(form)
            else:
                spans = differences(four[0], form)
                made = _Form(form, spans, (self.by_index[0],) * (len(spans) + 1))
            self.by_index.append(made)
            self.forms.append(made)
        self.letters: _Form = _Form(squashed) if joined is None else _joined(squashed, [p.letters for p in joined], "")

    def first_match(self) -> str | None:
        if not self.by_index[0].text and not self.letters.text:
            return None
        for sig in INSTRUCTION_SIGNATURES:
            for form in self.forms:
                if form.matches(sig):
                    return sig.name
        for sig in SQUASHED_SIGNATURES:
            if self.letters.matches(sig):
                return sig.name
        return None


def _joined(text: str, pieces: list[_Form], sep: str) -> _Form:
    if text != sep.join(p.text for p in pieces):
        return _Form(text)
    return _Form(text, _joints([p.text for p in pieces], sep), tuple(pieces))


def _joints(pieces: list[str], sep: str) -> list[tuple[int, int]]:
    """Where pieces joined by `sep` meet: the separator between each two (empty for "")."""
    out: list[tuple[int, int]] = []
    at = 0
    for piece in pieces[:-1]:
        at += len(piece)
        out.append((at, at + len(sep)))
        at += len(sep)
    return out


def instruction_shaped(value: Any) -> str | None:
    """The name of the instruction signature `value` matches, or None.

    `value` may be a string or any nesting of dicts (keys included), lists, tuples and sets of
    strings; other scalars are ignored. Each string is scanned alone, then all of them joined by
    newlines, so a payload split across fields is still seen. Structures nested deeper than
    `MAX_DEPTH` return "structure.too_deep".
    """
    try:
        parts = list(strings(value))
    except (TooDeep, RecursionError):
        return TOO_DEEP
    alone = []
    for part in parts:
        scanned = _Scanned(part)
        found = scanned.first_match()
        if found:
            return found
        alone.append(scanned)
    if len(parts) > 1:
        return _Scanned("\n".join(parts), joined=alone).first_match()
    return None
