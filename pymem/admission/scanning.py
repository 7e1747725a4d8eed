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

The signatures are three modules: pymem.admission.normalise (the text every signature sees),
pymem.admission.signatures (the named patterns) and this one (scanning values for them, walked
as pymem.admission.pieces walks them for the classifier).
"""

from __future__ import annotations

from typing import Any

from .needles import Lookups
from .normalise import variants
from .pieces import MAX_DEPTH, TOO_DEEP, TooDeep, strings
from .signatures import INSTRUCTION_SIGNATURES, SQUASHED_SIGNATURES

__all__ = ["instruction_shaped", "scan_text", "MAX_DEPTH", "TOO_DEEP"]

# ----------------------------------------------------------------------------------------------
# scanning
# ----------------------------------------------------------------------------------------------

# MAX_DEPTH, the deepest nesting scanned: deeper structures are refused (TOO_DEEP) rather than
# partly scanned, since a value the gate cannot fully read must not pass as clean. The classifier
# reads values the same way (pymem.admission.pieces).


def scan_text(text: str) -> str | None:
    """The name of the first signature matching any variant of `text`, else None."""
    if not text:
        return None
    forms, squashed = variants(text)
    # A signature is searched for in every form that holds its needles, and only there: a form
    # without them cannot match it (pymem.admission.needles), so the answer is the same.
    looked = [(form, Lookups(form)) for form in forms]
    for sig in INSTRUCTION_SIGNATURES:
        for form, lookups in looked:
            if sig.may_match(lookups) and sig.search(form):
                return sig.name
    lookups = Lookups(squashed)
    for sig in SQUASHED_SIGNATURES:
        if sig.may_match(lookups) and sig.search(squashed):
            return sig.name
    return None


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
    for part in parts:
        found = scan_text(part)
        if found:
            return found
    if len(parts) > 1:
        return scan_text("\n".join(parts))
    return None
