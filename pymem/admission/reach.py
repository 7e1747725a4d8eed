r"""How far a pattern's match can reach, and where two near-identical texts differ.

Why it exists. The write gate searches every signature in up to four normalised forms of a note,
then in the note's strings joined together (pymem.admission.scanning). The forms of an ordinary
note are the same text but for a few places (an e-mail address whose "@" the leetspeak form reads
as "a", a hyphenated word the compact form joins), and the joined strings are the strings already
searched, one after another. Searching each of them in full made a 64 KiB note cost up to eight
full scans per signature. This module lets the scanner search a text only where it differs from
texts already searched in full, and still find every match the full search would:

- `reach(pattern)` bounds, from the pattern's own parse tree, how many characters one attempt to
  match it can read on either side of where it starts: a literal, a class or an anchor one
  character, a bounded repetition its bound times its body, a lookaround its body. A repetition
  with no upper bound is bounded by the text: by the longest run of the characters its body can
  consume, measured as the text's longest run of whitespace (for `\s+`), its longest
  whitespace-free token, its longest stretch without a sentence end, its longest line, or else the
  runs of those very characters, whichever holds them all. Only a back-reference has no bound.
- `differences(reference, text)` lists the places where `text` differs from `reference`, as
  spans of `text`; outside them the two are the same characters, in the same order.
- `windows(spans, bound, length)` is where a match that reads a span can start.

A match in `text` whose reads stay outside every span reads exactly what a match at the same place
of `reference` reads, so it is a match there too. When `reference` was searched in full and held
no match, every match of `text` therefore starts within its reach of a span, and searching those
windows is the same as searching the whole text. The lengths a reach is measured in need not be
measured again in such a text: a run in it is runs of the reference joined by what the spans hold
(`Derived`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from re import _constants as C  # type: ignore[attr-defined]  # re's private parser modules: not in typeshed
from re import _parser  # type: ignore[attr-defined]  # (as above)
from typing import Any

__all__ = ["Reach", "TextStats", "Derived", "Stats", "reach", "differences", "windows", "UNBOUNDED"]

#: The variables a reach is measured in: the text's longest run of whitespace, its longest
#: whitespace-free token, its longest stretch without a sentence end (".", "!", "?"), its longest
#: line, or the longest run of the characters one element matches (named by its expression).
_TOKEN, _CLAUSE, _LINE, _SPACE = "token", "clause", "line", "space"


@dataclass(frozen=True, slots=True)
class Reach:
    """At most `const` + the sum of `terms` (coefficient × the text's length of that variable)
    characters read by one match attempt, on each side of where it starts; `bounded` False when
    nothing bounds it."""

    const: int = 0
    terms: tuple[tuple[str, int], ...] = ()
    bounded: bool = True

    def __add__(self, other: Reach) -> Reach:
        return self._merge(other, lambda a, b: a + b, self.const + other.const)

    def times(self, k: int) -> Reach:
        return Reach(self.const * k, tuple((v, c * k) for v, c in self.terms), self.bounded)

    def widest(self, other: Reach) -> Reach:
        """At least as much as either (coefficient by coefficient: the variables are not negative)."""
        return self._merge(other, max, max(self.const, other.const))

    def _merge(self, other: Reach, how: Callable[[int, int], int], const: int) -> Reach:
        mine, theirs = dict(self.terms), dict(other.terms)
        terms = tuple(sorted((v, how(mine.get(v, 0), theirs.get(v, 0))) for v in mine.keys() | theirs.keys()))
        return Reach(const, terms, self.bounded and other.bounded)

    def within(self, stats: TextStats | Derived) -> int | None:
        """The bound in characters for a text, or None when there is none."""
        if not self.bounded:
            return None
        return self.const + sum(c * stats.length(v) for v, c in self.terms)


UNBOUNDED = Reach(bounded=False)
_ONE = Reach(const=1)
_NOTHING = Reach()


class TextStats:
    """The lengths a reach is measured in, for one text, each computed when first needed."""

    __slots__ = ("_lengths", "text")

    def __init__(self, text: str):
        self.text = text
        self._lengths: dict[str, int] = {}

    def length(self, variable: str) -> int:
        found = self._lengths.get(variable)
        if found is None:
            if variable == _SPACE:
                found = 1 if _SPACE_PAIR.search(self.text) is None else max(map(len, _SPACES.findall(self.text)))
            elif variable == _TOKEN:
                found = max(map(len, self.text.split()), default=0)
            elif variable == _CLAUSE:
                found = max(map(len, _SENTENCE_ENDS.split(self.text)), default=0)
            elif variable == _LINE:
                # Any character but "\n" may sit inside a line as a pattern sees it (`.` and `[^\n]`
                # match "\r" too), so lines are cut at "\n" alone.
                found = max(map(len, self.text.split("\n")), default=0)
            else:
                found = _longest_run(variable, self.text)
            self._lengths[variable] = found
        return found


class Derived:
    """The lengths of a text made of stretches of `sources` and `extra` other characters: a run
    of characters in it is at most runs of the sources and all of those others, so the sum of
    theirs and `extra` bounds each length (a source may be listed twice: a text that differs from
    another in a few places holds runs of it on both sides of a place)."""

    __slots__ = ("_lengths", "extra", "sources")

    def __init__(self, sources: tuple[Stats, ...], extra: int):
        self.sources, self.extra = sources, extra
        self._lengths: dict[str, int] = {}

    def length(self, variable: str) -> int:
        found = self._lengths.get(variable)
        if found is None:
            found = self._lengths[variable] = self.extra + sum(s.length(variable) for s in self.sources)
        return found


Stats = TextStats | Derived


def _longest_run(element: str, text: str) -> int:
    """At least the longest run of what `element` matches in `text`: a small bound when no run
    reaches it (one search, in C, instead of listing every run), else the exact length."""
    for guess in (16, 128):
        if re.search(f"(?:{element}){{{guess}}}", text) is None:
            return guess
    return max(map(len, re.findall(f"(?:{element})+", text)), default=0)


_SENTENCE_ENDS = re.compile(r"[.!?]")
_SPACE_PAIR = re.compile(r"\s\s")
_SPACES = re.compile(r"\s+")
#: Every character `\s` matches in a str pattern (str.isspace(); none lies above U+3000).
_WHITESPACE = tuple(c for c in map(chr, range(0x3100)) if c.isspace())
_SINGLE = (C.LITERAL, C.NOT_LITERAL, C.ANY, C.IN)
_REPEATS = (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT)


def reach(pattern: re.Pattern[str]) -> Reach:
    """How many characters one attempt to match `pattern` can read on either side of its start
    (the same bound serves both sides: what it consumes and looks ahead at, and what it looks
    behind at)."""
    if not isinstance(pattern.pattern, str):
        return UNBOUNDED
    return _sequence(_parser.parse(pattern.pattern, pattern.flags), pattern.flags)


def _sequence(items: Any, flags: int) -> Reach:
    total = _NOTHING
    for op, av in items:
        total = total + _item(op, av, flags)
        if not total.bounded:
            return UNBOUNDED
    return total


def _item(op: Any, av: Any, flags: int) -> Reach:
    if op in _SINGLE:
        return _ONE
    if op is C.AT:
        return _ONE  # an anchor or word boundary looks at the character beside it
    if op is C.SUBPATTERN:
        return _sequence(av[3], flags | av[1])
    if op is C.ATOMIC_GROUP:
        return _sequence(av, flags)
    if op in (C.ASSERT, C.ASSERT_NOT):
        return _sequence(av[1], flags)  # a lookaround reads its body's width beyond the match
    if op is C.BRANCH:
        out = _NOTHING
        for branch in av[1]:
            out = out.widest(_sequence(branch, flags))
        return out
    if op in _REPEATS:
        _low, high, body = av
        if high != C.MAXREPEAT:
            return _sequence(body, flags).times(high)
        if len(body) == 1 and body[0][0] in _SINGLE:
            return _run(body, flags)
        # Any number of a longer body: what all its repetitions consume is one run of the
        # characters its elements match; past it, one more repetition may read ahead.
        elements = _elements(body)
        if not elements:
            return UNBOUNDED
        if all(_only_whitespace(e) for e in elements):
            return Reach(1, ((_SPACE, 1),)) + _sequence(body, flags)
        return _run_of(_union(elements), flags) + _sequence(body, flags)
    return UNBOUNDED  # a back-reference, a conditional group ...: nothing bounds it


def _run(body: Any, flags: int) -> Reach:
    """An unbounded repetition of one single-character element: bounded by the longest run of
    the characters it matches (plus the one character after the run that ends it)."""
    if _only_whitespace(body[0]):
        return Reach(1, ((_SPACE, 1),))
    return _run_of(_unparse(body), flags)


@functools.cache
def _run_of(element: str, flags: int) -> Reach:
    """The longest run of what `element` (an expression for one character) matches, measured by
    the cheapest variable that holds every such run: a whitespace-free token, a stretch without
    sentence ends, a line, or else the runs of the element itself."""
    single = re.compile(element, flags)
    if not any(single.fullmatch(c) for c in _WHITESPACE):
        return Reach(1, ((_TOKEN, 1),))
    if not any(single.fullmatch(c) for c in ".!?"):
        return Reach(1, ((_CLAUSE, 1),))
    if not single.fullmatch("\n"):
        return Reach(1, ((_LINE, 1),))
    if flags & re.IGNORECASE:
        return UNBOUNDED  # its runs would have to be measured under its flags
    return Reach(1, ((element, 1),))


def _only_whitespace(element: tuple[Any, Any]) -> bool:
    """Whether a single-character element matches whitespace and nothing else (read from the
    parse tree: a whitespace literal, `\\s`, or a class of those)."""
    op, av = element
    if op is C.LITERAL:
        return chr(av).isspace()
    if op is not C.IN:
        return False
    return all(
        (item is C.LITERAL and chr(value).isspace())
        or (item is C.CATEGORY and value is C.CATEGORY_SPACE)
        or (item is C.RANGE and all(chr(c).isspace() for c in range(value[0], value[1] + 1)))
        for item, value in av
    )


def _elements(items: Any) -> list[tuple[Any, Any]]:
    """The single-character elements a sequence can consume (not those of its lookarounds,
    which consume nothing)."""
    out: list[tuple[Any, Any]] = []
    for op, av in items:
        if op in _SINGLE:
            out.append((op, av))
        elif op is C.SUBPATTERN:
            out += _elements(av[3])
        elif op is C.ATOMIC_GROUP:
            out += _elements(av)
        elif op is C.BRANCH:
            for branch in av[1]:
                out += _elements(branch)
        elif op in _REPEATS:
            out += _elements(av[2])
    return out


def _union(elements: list[tuple[Any, Any]]) -> str:
    """One expression for a character any of `elements` matches: a single class where they are
    literals and classes that are not negated (fast to search), else an alternation."""
    plain = [e for e in elements if e[0] is C.LITERAL or (e[0] is C.IN and all(i is not C.NEGATE for i, _ in e[1]))]
    if len(plain) == len(elements):
        items = sorted({_class_item(C.LITERAL, av) if op is C.LITERAL else _class_item(i, v)
                        for op, av in elements for i, v in ([(op, av)] if op is C.LITERAL else av)})
        return "[" + "".join(items) + "]"
    return "|".join(sorted({_unparse([e]) for e in elements}))


def _unparse(body: Any) -> str:
    """A regular expression for one single-character element of a parse tree."""
    op, av = body[0]
    if op is C.LITERAL:
        return re.escape(chr(av))
    if op is C.NOT_LITERAL:
        return "[^" + re.escape(chr(av)) + "]"
    if op is C.ANY:
        return "."
    return "[" + "".join(_class_item(o, a) for o, a in av) + "]"


_CATEGORIES = {
    C.CATEGORY_DIGIT: r"\d", C.CATEGORY_NOT_DIGIT: r"\D", C.CATEGORY_SPACE: r"\s", C.CATEGORY_NOT_SPACE: r"\S",
    C.CATEGORY_WORD: r"\w", C.CATEGORY_NOT_WORD: r"\W",
}


def _class_item(op: Any, av: Any) -> str:
    if op is C.NEGATE:
        return "^"
    if op is C.LITERAL:
        return re.escape(chr(av))
    if op is C.RANGE:
        return re.escape(chr(av[0])) + "-" + re.escape(chr(av[1]))
    if op is C.CATEGORY:
        return _CATEGORIES[av]
    raise ValueError(f"unexpected class element {op}")


def differences(reference: str, text: str) -> list[tuple[int, int]]:
    """The spans of `text` that differ from `reference` (empty when they are equal).

    The common prefix and suffix are the same; between them, two texts of the same length are
    compared block by block and only the blocks that differ are kept; texts of different lengths
    are compared word by word (split at single spaces) when they have as many words, else the
    whole middle is one span."""
    if reference == text:
        return []
    n, m = len(reference), len(text)
    head = _common_prefix(reference, text)
    tail = _common_suffix(reference, text, min(n, m) - head)
    if n == m:
        return _blocks(reference, text, head, m - tail)
    ref_words, words = reference.split(" "), text.split(" ")
    if len(ref_words) != len(words):
        return [(head, m - tail)]
    spans: list[tuple[int, int]] = []
    at = 0
    for a, b in zip(ref_words, words, strict=True):
        if a != b:
            spans.append((at, at + len(b)))
        at += len(b) + 1
    return spans


_BLOCK = 256


def _blocks(reference: str, text: str, lo: int, hi: int) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    for start in range(lo, hi, _BLOCK):
        end = min(hi, start + _BLOCK)
        if reference[start:end] != text[start:end]:
            if spans and spans[-1][1] == start:
                spans[-1] = (spans[-1][0], end)
            else:
                spans.append((start, end))
    return spans


def _common_prefix(a: str, b: str) -> int:
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:  # the longest prefix on which they agree, by halving (each comparison is in C)
        mid = (lo + hi + 1) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _common_suffix(a: str, b: str, limit: int) -> int:
    lo, hi = 0, limit
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[len(a) - mid : len(a) - lo] == b[len(b) - mid : len(b) - lo]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def windows(spans: list[tuple[int, int]], bound: int, length: int) -> list[tuple[int, int]]:
    """Where a match that reads within a span can start: within `bound` characters of it, merged.
    A match starting at s reads no further than `bound` on either side of s, so to read inside
    [a, b) it must start in (a - bound, b + bound)."""
    out: list[tuple[int, int]] = []
    for a, b in spans:
        # One more character either side: a span may be empty (characters deleted between two
        # others), and a match that reads both of its neighbours reads across it.
        lo, hi = max(0, a - bound - 1), min(length, b + bound + 1)
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out
