r"""What a regular expression cannot match without: a cheap test before the expensive one.

Why it exists. The write gate runs every instruction signature over several normalised forms of a
note, and Python's `re` crawls through a long text at a few MB/s per signature; `str.__contains__`
looks for a fixed string far faster. Most signatures cannot match without a few words ("ignore",
"override", "from now on" ...), and an ordinary note holds none of them. So each signature (and
each structural signal) carries its *needs*: what every match of its pattern contains. A form
that lacks them cannot match, and the expression is not run on it; every other form is searched
in full, so nothing is scanned less: the needles decide only where the search would certainly
find nothing.

How they are derived. From the pattern's own parse tree (the standard library's regex parser),
never written by hand, so they cannot drift from the pattern. A requirement is a string, All of
several requirements, or Any of several:

- a sequence requires all of what its parts require; adjacent parts with few spellings (literal
  characters, small character classes such as `\s` or `[.,;]`, groups and alternations of them)
  are spelled out together ("act\s+as" requires "act as", "act\nas" ... whole), up to a few
  hundred spellings; zero-width assertions consume nothing and keep their neighbours adjacent,
  and a word boundary `\b` is kept in the spelling as a marker (BOUNDARY) that Lookups checks;
- a group, an atomic group or a repetition with a minimum of one or more requires what its body
  requires (a repeated body with few spellings joins what precedes it and what follows it); a
  repetition that may be empty requires nothing;
- an alternation requires Any of what its branches require (nothing, if a branch requires
  nothing).

Anything the derivation does not understand (a negated class, `\w`, a back-reference,
case-insensitive matching, a literal NUL) requires nothing, so the worst a new construct can do
is make a signature run more often. tests/unit/test_needles.py checks, over every match of every
signature in the pinned corpora and over random expressions and texts, that every match holds its
pattern's needles.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from re import _constants as C  # type: ignore[attr-defined]  # re's private parser modules: not in typeshed
from re import _parser  # type: ignore[attr-defined]  # (as above)
from typing import Any, Union

__all__ = ["Need", "All", "Any_", "Lookups", "BOUNDARY", "SPACE", "needles", "present", "strings_of",
           "single_spaced"]


_ZERO_WIDTH = (C.AT, C.ASSERT, C.ASSERT_NOT)
_REPEATS = (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT)


#: A derived requirement: a string that must occur, all of several requirements, or one of several.
Need = Union[str, "All", "Any_"]


@dataclass(frozen=True, slots=True)
class All:
    parts: tuple[Need, ...]


@dataclass(frozen=True, slots=True)
class Any_:
    parts: tuple[Need, ...]


def needles(pattern: re.Pattern[str], *, single_spaced: bool = False) -> Need | None:
    """What every match of `pattern` contains (a string, All of, or Any of requirements), or None
    when nothing is known."""
    if not isinstance(pattern.pattern, str) or pattern.flags & re.IGNORECASE:
        return None
    tree = _parser.parse(pattern.pattern, pattern.flags)
    general = _sequence(tree)
    if not single_spaced:
        return general
    # Both hold in such a text; each derivation cuts long spellings at different places.
    return _all([n for n in (general, _sequence(_one_space(tree))) if n is not None])


def _one_space(items: Any) -> list[Any]:
    """The parse tree with every repetition of `\\s` bounded to at most one: what the pattern can
    match in a text where no two whitespace characters are adjacent (a normalised form), a
    superset of its matches there, so what this tree requires every such match holds."""
    out: list[Any] = []
    for op, av in items:
        if op in _REPEATS:
            low, high, body = av
            body = _one_space(body)
            if body == [(C.IN, [(C.CATEGORY, C.CATEGORY_SPACE)])]:
                low, high = min(low, 1), 1
            out.append((op, (low, high, body)))
        elif op is C.SUBPATTERN:
            out.append((op, (*av[:3], _one_space(av[3]))))
        elif op is C.ATOMIC_GROUP:
            out.append((op, _one_space(av)))
        elif op is C.BRANCH:
            out.append((op, (av[0], [_one_space(b) for b in av[1]])))
        else:
            out.append((op, av))
    return out


class Lookups:
    """The look-ups of needles in one text, shared by every pattern checked against it.

    Each string is looked for once. Before the text itself is searched, two cheaper tests that
    can only say no: a string holding a character the text lacks is absent; and a string's
    longest run of letters a-z lies inside one of the text's maximal runs of letters a-z, so when
    no distinct run holds it (searched in the runs joined by newlines, a few kilobytes where the
    text has tens) the string is absent too."""

    __slots__ = ("_words", "chars", "found", "single_spaced", "spaces", "text")

    def __init__(self, text: str):
        self.text = text
        self.chars = frozenset(text)
        #: No two whitespace characters are adjacent (true of every normalised form): the needles
        #: derived with `single_spaced` hold for this text.
        self.single_spaced = single_spaced(text)
        self.spaces = [c for c in _SPACE if c in self.chars]
        self.found: dict[str, bool] = {}
        self._words: str | None = None

    def has(self, needle: str) -> bool:
        hit = self.found.get(needle)
        if hit is None:
            shape = _shape(needle)
            if shape.spaced:
                hit = self._spaced(needle)
            elif shape.pieces is not None:
                hit = self._bounded(shape) and (not shape.plain or self.has(shape.plain))
            else:
                hit = self._may_hold(needle, shape.core) and needle in self.text
            self.found[needle] = hit
        return hit

    def _spaced(self, needle: str) -> bool:
        """A needle with SPACE marks: present when one spelling of it, each mark a whitespace
        character the text holds, is present (assumed present when there are too many)."""
        spaces = self.spaces
        marks = needle.count(SPACE)
        if len(spaces) ** marks > 16:
            return True
        spellings = [""]
        for piece in needle.split(SPACE)[:-1]:
            spellings = [s + piece + c for s in spellings for c in spaces]
        last = needle.rsplit(SPACE, 1)[1]
        return any(self.has(s + last) for s in spellings)

    def _bounded(self, shape: _Shape) -> bool:
        """False when the needle's word boundaries cannot hold in this text: between two word
        characters or two others, or before (after) letters that begin (end) no run of letters
        a-z in the text (a letter after a boundary follows a non-word character, or the start,
        so it begins a maximal run of letters; likewise at the end)."""
        if shape.impossible:
            return False
        if shape.head and "\n" + shape.head not in self._runs():
            return False
        return not (shape.tail and shape.tail + "\n" not in self._runs())

    def _runs(self) -> str:
        if self._words is None:
            self._words = "\n" + "\n".join(set(_LETTERS.findall(self.text))) + "\n"
        return self._words

    def _may_hold(self, needle: str, core: str) -> bool:
        if not self.chars.issuperset(needle):
            return False
        return len(core) < 3 or core in self._runs()


@dataclass(frozen=True, slots=True)
class _Shape:
    """What a needle's look-up needs, worked out once per needle (the needles are the signatures'
    and never change): whether it has SPACE marks; its word-boundary pieces, the needle without
    them, whether two of its boundaries sit between like characters, and the letters that must
    begin (`head`) and end (`tail`) runs of letters of the text; its longest run of letters."""

    spaced: bool
    pieces: tuple[str, ...] | None
    plain: str
    impossible: bool
    head: str
    tail: str
    core: str


_SHAPES: dict[str, _Shape] = {}


def _shape(needle: str) -> _Shape:
    found = _SHAPES.get(needle)
    if found is None:
        found = _SHAPES[needle] = _shape_of(needle)
    return found


def _shape_of(needle: str) -> _Shape:
    core = max(_LETTERS.findall(needle), key=len, default="")
    if SPACE in needle or BOUNDARY not in needle:
        return _Shape(SPACE in needle, None, needle, False, "", "", core)
    pieces = tuple(needle.split(BOUNDARY))
    impossible, head, tail = False, "", ""
    for i in range(len(pieces) - 1):
        left, right = pieces[i][-1:], pieces[i + 1][:1]
        if left and right:
            if _word(left) == _word(right):
                impossible = True
        elif right and not left and i == 0:
            found = _LETTERS.match(pieces[1])
            if found and len(found.group()) >= 3:
                head = found.group()
        elif left and not right and i + 1 == len(pieces) - 1:
            found = _LETTERS_END.search(pieces[i])
            if found and len(found.group()) >= 3:
                tail = found.group()
    return _Shape(False, pieces, needle.replace(BOUNDARY, ""), impossible, head, tail, core)


def single_spaced(text: str) -> bool:
    """No two whitespace characters are adjacent in `text` (true of every normalised form)."""
    return _SPACE_PAIR.search(text) is None


_LETTERS = re.compile(r"[a-z]+")
_SPACE_PAIR = re.compile(r"\s\s")
_LETTERS_END = re.compile(r"[a-z]+$")
_WORD = re.compile(r"\w")


def _word(char: str) -> bool:
    return _WORD.match(char) is not None


def present(need: Need | None, text: str | Lookups) -> bool:
    """Whether `text` may match the pattern `need` was derived from (always True for None). Pass a
    Lookups to share the look-ups in one text between several patterns."""
    if need is None:
        return True
    return _holds(need, Lookups(text) if isinstance(text, str) else text)


def _holds(need: Need, lookups: Lookups) -> bool:
    if isinstance(need, str):
        return lookups.has(need)
    if isinstance(need, All):
        return all(_holds(p, lookups) for p in need.parts)
    return any(_holds(p, lookups) for p in need.parts)


def strings_of(need: Need | None) -> set[str]:
    """Every string `need` mentions (for tests and for reading)."""
    if need is None:
        return set()
    if isinstance(need, str):
        return {need}
    return set().union(*(strings_of(p) for p in need.parts))


#: In a needle, a word boundary (`\\b`) between its neighbours: one is a word character and the
#: other is not (or is the text's start or end). It occupies no place in the text.
BOUNDARY = "\x00"
#: In a needle, any one character `\\s` matches; Lookups tries those the text holds.
SPACE = "\x01"
#: Largest set of strings a run of adjacent elements is spelled out as (beyond it, a run is cut).
_CAP = 256
#: Largest character class spelled out as its characters.
_CLASS_CAP = 64
#: Every character `\s` matches in a str pattern: those of str.isspace(), all below U+3100
#: (tests/unit/test_needles.py checks the whole code space).
_SPACE = tuple(c for c in map(chr, range(0x3100)) if c.isspace())


def _all(parts: list[Need]) -> Need | None:
    # The requirements with the fewest strings first: they are the cheapest to look for, and the
    # first one missing settles the question.
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else All(tuple(sorted(parts, key=lambda p: len(strings_of(p)))))


def _flush(run: set[str], parts: list[Need]) -> None:
    # A run that may be empty guarantees nothing; otherwise one of its spellings occurs.
    if run and not any(r.replace(BOUNDARY, "") == "" for r in run):
        parts.append(next(iter(run)) if len(run) == 1 else Any_(tuple(sorted(run))))


def _sequence(items: Any) -> Need | None:
    r"""Every part of a sequence is required: all of what each part requires. Adjacent parts whose
    spellings are few (literals, small classes and groups of them) are spelled out together, so
    "act\s+as" requires "act " or "act\n" ..., not "act" and "as" apart."""
    parts: list[Need] = []
    run: set[str] = {""}
    for op, av in items:
        if op is C.AT and av is C.AT_BOUNDARY:
            run = {r + BOUNDARY for r in run}  # zero-width, but it says what the neighbours are
            continue
        if op in _ZERO_WIDTH:
            continue  # consumes nothing: the strings either side are adjacent in every match
        spelled = _spellings(op, av)
        if spelled is not None:
            run = _join(run, spelled, parts)
            continue
        if op in _REPEATS and av[0] >= 1 and av[2] and (body := _language(av[2])) is not None:
            # At least one repetition of a body with few spellings: the first repetition follows
            # what came before, the last one precedes what comes after.
            run = _join(run, body, parts)
            _flush(run, parts)
            run = set(body)
            continue
        _flush(run, parts)
        run = {""}
        found = _item(op, av)
        if found is not None:
            parts.append(found)
    _flush(run, parts)
    return _all(parts)


def _join(run: set[str], spelled: set[str], parts: list[Need]) -> set[str]:
    if len(run) * len(spelled) > _CAP:
        _flush(run, parts)
        return set(spelled)
    return {a + b for a in run for b in spelled}


def _language(items: Any) -> set[str] | None:
    """Every string a sequence can match, when they are few; else None."""
    out: set[str] = {""}
    for op, av in items:
        if op in _ZERO_WIDTH:
            continue
        spelled = _spellings(op, av)
        if spelled is None or len(out) * len(spelled) > _CAP:
            return None
        out = {a + b for a in out for b in spelled}
    return out


def _spellings(op: Any, av: Any) -> set[str] | None:
    """Every string one element can match, when they are few; else None."""
    if op is C.LITERAL:
        return None if av in (0, 1) else {chr(av)}  # the markers' characters: never spelled
    if op is C.IN:
        return _class(av)
    if op is C.SUBPATTERN:
        return None if av[1] & re.IGNORECASE else _language(av[3])
    if op is C.ATOMIC_GROUP:
        return _language(av)
    if op is C.BRANCH:
        out: set[str] = set()
        for branch in av[1]:
            found = _language(branch)
            if found is None or len(out) + len(found) > _CAP:
                return None
            out |= found
        return out
    if op in _REPEATS:
        low, high, body = av
        if high > 4:
            return None
        lang = _language(body)
        if lang is None:
            return None
        out, power = set(), {""}
        for k in range(high + 1):
            if k >= low:
                out |= power
            if k < high:
                if len(power) * len(lang) > _CAP:
                    return None
                power = {a + b for a in power for b in lang}
        return out if len(out) <= _CAP else None
    return None


def _class(items: Any) -> set[str] | None:
    chars: set[str] = set()
    for op, av in items:
        if op is C.LITERAL and av not in (0, 1):
            chars.add(chr(av))
        elif op is C.RANGE and av[0] > 1 and av[1] - av[0] < _CLASS_CAP:
            chars.update(map(chr, range(av[0], av[1] + 1)))
        elif op is C.CATEGORY and av is C.CATEGORY_SPACE:
            chars.add(SPACE)
        else:
            return None  # a negated class, \w, \d ...: too many characters to spell out
    return chars if len(chars) <= _CLASS_CAP else None


def _item(op: Any, av: Any) -> Need | None:
    if op is C.SUBPATTERN:
        _group, add_flags, _del_flags, body = av
        return None if add_flags & re.IGNORECASE else _sequence(body)
    if op is C.ATOMIC_GROUP:
        return _sequence(av)
    if op in _REPEATS:
        low, _high, body = av
        return _sequence(body) if low >= 1 else None
    if op is C.BRANCH:
        # One branch matches, so what that branch requires is present: any of the branches'
        # requirements (nothing, if some branch requires nothing).
        branches = []
        for branch in av[1]:
            found = _sequence(branch)
            if found is None:
                return None
            branches.append(found)
        return Any_(tuple(branches))
    return None
