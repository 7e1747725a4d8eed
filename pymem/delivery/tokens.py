"""Counting tokens for a delivery's budget: pluggable, and by default with nothing to download.

`ApproxTokenCounter` (the default) estimates what a byte-pair-encoding tokenizer of the kind
today's models use would produce, from the text alone:

* the text is split the way those tokenizers pre-split it: runs of letters, runs of digits,
  whitespace, and single punctuation characters;
* a run of ASCII letters is cut further at case changes (camelCase, aLtErNaTiNg case). A run
  that falls into three or more parts averaging three letters or fewer (base64, random mixed
  case) counts 0.8 per letter. Otherwise each part of at most two letters counts 1, an
  all-capitals part one per 2 letters, and a lower-case part one per 4 letters if at least 80 %
  of its letter pairs are among the 150 commonest letter pairs of English prose (word-like), one
  per 2.5 letters if at least half are, else one per 1.8 letters (random strings, identifiers);
* other letters count one per character (two-byte UTF-8) or one less than their UTF-8 length
  (CJK, Indic scripts, mathematical letters); other non-ASCII symbols count their UTF-8 length;
* digits count one per group of three, plus one for a single space before them (the tokenizers
  do not merge a space into a number); a lone space counts 0 (it merges into the next word), any
  other whitespace run 1, plus 1 for a run of spaces after its last newline, plus 1 for each
  change of whitespace character; punctuation one per character (one less than the UTF-8 length
  for wider punctuation, the UTF-8 length for symbols such as emoji or circled letters).

The claim, and how it is checked: on a corpus of English prose, Python, SQL, JSON, UUIDs, hex
digests, base64, timestamps, numbers, random letter strings, ten other scripts, emoji,
whitespace runs and rendered delivery blocks, the estimate is never below the count of OpenAI's
`cl100k_base` or `o200k_base` encodings by more than UNDERCOUNT_MARGIN (10 %) on any single text
(tests/unit/test_tokens.py measures it against both encodings, loaded offline from the
`bpe-openai` package). It over-counts English prose by about half, which is the price of not
under-counting the rest.

Any object with `count(text) -> int` and a `name` is a counter; `EncodingCounter` wraps anything
with `encode(text)` (a `tiktoken` or `bpe-openai` encoding, a Hugging Face tokenizer) to count
exactly for one model.
"""

from __future__ import annotations

import itertools
import math
import re
import unicodedata
from functools import lru_cache
from typing import Any, Protocol, runtime_checkable

from ..errors import InvalidArguments

__all__ = ["TokenCounter", "ApproxTokenCounter", "EncodingCounter", "UNDERCOUNT_MARGIN", "default_counter"]

#: The most the default counter under-counts a real tokenizer, as a fraction of the true count,
#: on the measured corpus (see the module docstring).
UNDERCOUNT_MARGIN = 0.10

# The 150 commonest letter pairs of English prose (counted once over English documentation text).
_COMMON_PAIRS = frozenset(
    ["th", "in", "he", "re", "er", "on", "te", "or", "es", "en", "an", "le", "at", "se", "is", "al", "ti", "st", "nt",
     "de", "ed", "me", "ar", "et", "nd", "co", "to", "ng", "it", "ec", "io", "ne", "as", "ur", "ct", "ma", "ra", "ri",
     "il", "tr", "ta", "fi", "tu", "ro", "ex", "li", "fo", "of", "ea", "pe", "ss", "ce", "ve", "am", "ns", "na", "be",
     "di", "ca", "if", "ll", "no", "si", "im", "nc", "ha", "om", "od", "un", "la", "ac", "rn", "pa", "ou", "pr", "ul",
     "lo", "ot", "ts", "ad", "hi", "mp", "ic", "us", "ut", "wi", "ch", "rt", "ge", "um", "ue", "el", "po", "pl", "ci",
     "op", "ho", "rs", "em", "va", "mo", "ai", "cl", "pt", "xt", "ef", "oc", "by", "rg", "ep", "ly", "ke", "ab", "su",
     "rr", "bl", "ck", "iv", "wh", "os", "lt", "ob", "fa", "lu", "ty", "sp", "ee", "ir", "fr", "do", "da", "so", "id",
     "gu", "ie", "rm", "ol", "ru", "bj", "up", "ap", "ni", "ry", "fu", "je", "ls", "tl", "gi", "ip", "ow", "ag", "au",
     "ia", "qu", "yt", "cu", "sa", "nu", "mb"])
_PIECES = re.compile(r"([^\W\d_]+)|(\d+)|(\s+)|([^\w\s]|_)")
_CASE_PARTS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])")


@runtime_checkable
class TokenCounter(Protocol):
    """Anything with a `name` (recorded with each delivery) and `count(text) -> int`."""

    name: str

    def count(self, text: str) -> int: ...


def _letters(part: str) -> int:
    if len(part) <= 2:
        return 1
    if part.isupper():
        return math.ceil(len(part) / 2)
    low = part.lower()
    pairs = [low[i:i + 2] for i in range(len(low) - 1)]
    common = sum(p in _COMMON_PAIRS for p in pairs) / len(pairs)
    per_token = 4.0 if common >= 0.8 else 2.5 if common >= 0.5 else 1.8
    return math.ceil(len(part) / per_token)


def _ascii_letters(run: str) -> int:
    parts = _CASE_PARTS.findall(run)
    if len(parts) >= 3 and len(run) <= 3 * len(parts):
        return math.ceil(0.8 * len(run))
    return sum(_letters(p) for p in parts)


def _whitespace(run: str) -> int:
    if run == " ":
        return 0
    count = 1
    last_newline = max(run.rfind("\n"), run.rfind("\r"))
    if last_newline >= 0 and len(run) - last_newline - 1 > 1:
        count += 1
    return count + sum(1 for a, b in itertools.pairwise(run) if a != b and not (a in "\r\n" and b in "\r\n"))


def _wide(char: str) -> int:
    size = len(char.encode("utf-8", errors="surrogatepass"))
    return 1 if size <= 2 else size - 1


def _symbol(char: str) -> int:
    # punctuation shares tokens with its neighbours; other symbols rarely have merges of their own
    if char.isascii() or unicodedata.category(char).startswith("P"):
        return _wide(char)
    return len(char.encode("utf-8", errors="surrogatepass"))


def _count_whole(text: str) -> int:
    """The estimate of `text` (see the module docstring), counted in one pass."""
    total = 0
    seen: dict[str, int] = {}  # runs of letters repeat (words, a block's field names): each counted once
    for match in _PIECES.finditer(text):
        letters, digits, space, other = match.groups()
        if letters:
            n = seen.get(letters)
            if n is None:
                n = seen[letters] = (_ascii_letters(letters) if letters.isascii()
                                     else sum(_wide(c) for c in letters))
            total += n
        elif digits:
            total += math.ceil(len(digits) / 3)
            if match.start() > 0 and text[match.start() - 1] == " ":
                total += 1
        elif space:
            total += _whitespace(space)
        else:
            total += _symbol(other)
    return total


# Just after a newline, before a non-space character. No piece the estimate counts crosses such a
# point (a whitespace run ends there; a number there has no space before it), so the estimate of a
# text is the sum of the estimates of its parts (tests/unit/test_budget.py checks it).
LINE_START = re.compile(r"(?<=\n)(?=\S)")
#: Lines of at most this many characters have their estimate kept per process (_line).
_KEPT_LINE = 1_000
_line = lru_cache(maxsize=16_384)(_count_whole)


class ApproxTokenCounter:
    """The default counter: an estimate from the text alone (see the module docstring).

    A text is counted line by line (LINE_START), which gives the count of the whole, and a process
    keeps the counts of the short lines it has seen: the texts counted again and again (the blocks
    a delivery fits, one turn after another) share most of their lines."""

    name = "approx-bpe-v1"

    def count(self, text: str) -> int:
        if not isinstance(text, str):
            raise InvalidArguments(f"count() takes a string, not {type(text).__name__}")
        return sum(_line(part) if len(part) <= _KEPT_LINE else _count_whole(part) for part in LINE_START.split(text))

    def __repr__(self) -> str:
        return "ApproxTokenCounter()"


class EncodingCounter:
    """Exact counts from a tokenizer: anything with `encode(text)` returning a sequence of ids."""

    def __init__(self, encoding: Any, name: str | None = None):
        if not callable(getattr(encoding, "encode", None)):
            raise InvalidArguments("EncodingCounter needs an object with an encode(text) method")
        self.encoding = encoding
        label = name or getattr(encoding, "name", None) or type(encoding).__name__
        self.name = "encoding:" + "".join(c if c.isalnum() or c in ":_.-" else "_" for c in str(label))[:80]

    def count(self, text: str) -> int:
        if not isinstance(text, str):
            raise InvalidArguments(f"count() takes a string, not {type(text).__name__}")
        return len(self.encoding.encode(text))

    def __repr__(self) -> str:
        return f"EncodingCounter({self.name!r})"


def default_counter() -> ApproxTokenCounter:
    return ApproxTokenCounter()
