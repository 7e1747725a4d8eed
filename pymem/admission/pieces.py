"""Cutting a note into the pieces that are judged on their own.

A payload hidden in the middle of a résumé, an e-mail or a JSON record is a small part of a long,
ordinary text; judged only as a whole it is diluted by everything around it. So a note is judged
as a whole *and* piece by piece: the strings of a structured value (keys and values), the fields
of a JSON text, the lines of a text, the value of each `key: value` / `key=value` line, the cells
of a `|`-separated line, the sentences of each of those, and what follows a lead-in
("... make sure to do the following: <instruction>").
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from .normalise import normalize

__all__ = ["MAX_DEPTH", "TOO_DEEP", "TooDeep", "strings", "pieces"]

#: Deepest nesting read. Deeper structures are refused by the caller rather than partly read.
MAX_DEPTH = 64
#: The name a value nested deeper than MAX_DEPTH is refused under (signatures and classifier alike).
TOO_DEEP = "structure.too_deep"

#: Pieces shorter than this carry no instruction worth judging on its own.
MIN_PIECE = 12
#: At most this many pieces of one note are judged, in reading order (beyond it, the note is
#: judged as a whole only: `Judgement.pieces_judged` tells).
MAX_PIECES = 400

_SENTENCE = re.compile(r"(?<=[.!?;])\s+(?=\S)")
_FIELD = re.compile(r"^\s*[\"']?([\w .\-/#()]{1,40}?)[\"']?\s*(?::|=|->|=>)\s+(.+)$")
# Where a lead-in ends and what it introduces begins: "... do the following: <instruction>".
_LEAD_IN = re.compile(r":\s+|\s+-{1,2}\s+|\*{3}\s*")
_CELL = re.compile(r"\s*(?:\||\t|;\s{2,}|\s{3,})\s*")


class TooDeep(Exception):
    """The value nests deeper than MAX_DEPTH."""


def strings(value: Any, depth: int = 0, seen: set[int] | None = None) -> Iterator[str]:
    """Every string in `value` (dict keys included), depth first; bytes decoded as UTF-8."""
    if seen is None:
        seen = set()
    if depth > MAX_DEPTH:
        raise TooDeep
    if isinstance(value, str):
        yield value
    elif isinstance(value, (bytes, bytearray, memoryview)):
        yield bytes(value).decode("utf-8", errors="replace")
    elif isinstance(value, dict) or (hasattr(value, "items") and callable(value.items)):
        if id(value) in seen:
            return
        seen.add(id(value))
        for k, v in value.items():
            yield from strings(k, depth + 1, seen)
            yield from strings(v, depth + 1, seen)
    elif isinstance(value, (list, tuple, set, frozenset)):
        if id(value) in seen:
            return
        seen.add(id(value))
        items = sorted(value, key=repr) if isinstance(value, (set, frozenset)) else value
        for v in items:
            yield from strings(v, depth + 1, seen)


def _json_strings(text: str) -> list[str] | None:
    """The strings of a text that is a JSON object or array, else None."""
    head = text.lstrip()[:1]
    if head not in ("{", "["):
        return None
    try:
        parsed = json.loads(text)
    except (ValueError, RecursionError):
        return None
    try:
        return list(strings(parsed, 1))
    except TooDeep:
        raise
    except RecursionError:
        raise TooDeep from None


def _units(text: str) -> Iterator[str]:
    """Lines, then a line's field value and cells, then sentences, then what follows a lead-in."""
    for line in text.split("\n"):
        line = line.strip()
        if len(line) < MIN_PIECE:
            continue
        parts = [line]
        m = _FIELD.match(line)
        if m and len(m.group(2)) >= MIN_PIECE:
            parts.append(m.group(2))
        cells = [c for c in _CELL.split(line) if len(c) >= MIN_PIECE]
        if len(cells) > 1:
            parts.extend(cells)
            for c in cells:
                cm = _FIELD.match(c)
                if cm and len(cm.group(2)) >= MIN_PIECE:
                    parts.append(cm.group(2))
        for part in parts:
            yield part
            sentences = [s for s in _SENTENCE.split(part) if len(s) >= MIN_PIECE]
            if len(sentences) > 1:
                yield from sentences
            for sentence in sentences:
                clauses = _LEAD_IN.split(sentence)
                if len(clauses) > 1:
                    yield from (c for c in clauses[1:] if len(c) >= MIN_PIECE)


def pieces(text: str) -> list[str]:
    """The distinct pieces of one normalised string, the string itself excluded.

    A JSON text contributes its strings (each then cut further); any other text its lines,
    fields, cells and sentences. At most MAX_PIECES pieces are returned, in reading order."""
    out: list[str] = []
    seen = {text}
    sources = _json_strings(text)
    if sources is not None:
        for s in sources:
            s = normalize(s)
            if len(s) >= MIN_PIECE and s not in seen:
                seen.add(s)
                out.append(s)
        sources = [s for s in out]
    else:
        sources = [text]
    for s in sources:
        for unit in _units(s):
            if unit not in seen:
                seen.add(unit)
                out.append(unit)
                if len(out) >= MAX_PIECES:
                    return out
    return out
