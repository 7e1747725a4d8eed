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
paraphrases with no instruction shape. Those belong to a model-based guard, which `rejudge`
accepts as a pluggable `guard`.

The detector is three modules: pymem.admission.normalise (the text every signature sees),
pymem.admission.signatures (the named patterns) and this one (scanning values for them).
"""

from __future__ import annotations

from typing import Any, Iterator

from .normalise import variants
from .signatures import INSTRUCTION_SIGNATURES, SQUASHED_SIGNATURES

__all__ = ["instruction_shaped", "scan_text", "MAX_DEPTH", "TOO_DEEP"]

# ----------------------------------------------------------------------------------------------
# scanning
# ----------------------------------------------------------------------------------------------

#: Deepest nesting scanned. Deeper structures are refused rather than partly scanned: a value
#: the gate cannot fully read must not pass as clean.
MAX_DEPTH = 64
TOO_DEEP = "structure.too_deep"


def scan_text(text: str) -> str | None:
    """The name of the first signature matching any variant of `text`, else None."""
    if not text:
        return None
    forms, squashed = variants(text)
    for sig in INSTRUCTION_SIGNATURES:
        for form in forms:
            if sig.search(form):
                return sig.name
    for sig in SQUASHED_SIGNATURES:
        if sig.search(squashed):
            return sig.name
    return None


def _strings(value: Any, depth: int, seen: set[int]) -> Iterator[str]:
    if depth > MAX_DEPTH:
        raise _TooDeep
    if isinstance(value, str):
        yield value
    elif isinstance(value, (bytes, bytearray, memoryview)):
        yield bytes(value).decode("utf-8", errors="replace")
    elif isinstance(value, dict) or hasattr(value, "items") and callable(value.items):
        if id(value) in seen:
            return
        seen.add(id(value))
        for k, v in value.items():
            yield from _strings(k, depth + 1, seen)
            yield from _strings(v, depth + 1, seen)
    elif isinstance(value, (list, tuple, set, frozenset)):
        if id(value) in seen:
            return
        seen.add(id(value))
        items = sorted(value, key=repr) if isinstance(value, (set, frozenset)) else value
        for v in items:
            yield from _strings(v, depth + 1, seen)


class _TooDeep(Exception):
    pass


def instruction_shaped(value: Any) -> str | None:
    """The name of the instruction signature `value` matches, or None.

    `value` may be a string or any nesting of dicts (keys included), lists, tuples and sets of
    strings; other scalars are ignored. Each string is scanned alone, then all of them joined by
    newlines, so a payload split across fields is still seen. Structures nested deeper than
    `MAX_DEPTH` return "structure.too_deep".
    """
    try:
        parts = list(_strings(value, 0, set()))
    except _TooDeep:
        return TOO_DEEP
    except RecursionError:
        return TOO_DEEP
    for part in parts:
        found = scan_text(part)
        if found:
            return found
    if len(parts) > 1:
        return scan_text("\n".join(parts))
    return None
