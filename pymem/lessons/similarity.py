"""When two lessons say the same thing, and how well a lesson fits a task: pure functions.

Near-duplicate rule (both must hold, and the lessons must have the same type):

* tag similarity: the Jaccard index of the two tag sets (|A and B| / |A or B|) is at least
  `TAG_THRESHOLD` (0.75);
* word similarity: the Jaccard index of the two texts' word sets is above `WORD_THRESHOLD` (0.8).
  A word is a maximal run of letters and digits, compared case-insensitively (casefold); order,
  repetition and punctuation do not count. Two texts without any word are never similar.

Both are computed exactly (as fractions), so 3 tags shared out of 4 is a match and 4 words shared
out of 5 is not. Tags are compared after normalising: surrounding spaces stripped, lowercased.

Fit to a task: a lesson is a candidate when it shares at least one tag with the task, and ranks by
the number of shared tags plus its confidence after decay (a number in [0, 1]), so a lesson that
shares more tags always ranks above one that shares fewer, and confidence orders lessons that
share as many.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from fractions import Fraction

__all__ = ["TAG_THRESHOLD", "WORD_THRESHOLD", "normalise_tag", "normalise_tags", "words", "jaccard",
           "tag_similarity", "word_similarity", "is_near_duplicate", "shared_tags", "rank_score"]

TAG_THRESHOLD = Fraction(3, 4)
WORD_THRESHOLD = Fraction(4, 5)

_WORD = re.compile(r"[^\W_]+")


def normalise_tag(tag: str) -> str:
    return tag.strip().lower()


def normalise_tags(tags: Iterable[str]) -> tuple[str, ...]:
    """Tags as lessons store them: normalised, each once, sorted."""
    return tuple(sorted({normalise_tag(t) for t in tags}))


def words(text: str) -> frozenset[str]:
    return frozenset(w.casefold() for w in _WORD.findall(text))


def jaccard(a: Iterable[str], b: Iterable[str]) -> Fraction:
    """|A and B| / |A or B|, exactly; 0 when both are empty (nothing to compare)."""
    a, b = set(a), set(b)
    union = a | b
    return Fraction(len(a & b), len(union)) if union else Fraction(0)


def tag_similarity(a: Iterable[str], b: Iterable[str]) -> Fraction:
    return jaccard(normalise_tags(a), normalise_tags(b))


def word_similarity(a: str, b: str) -> Fraction:
    return jaccard(words(a), words(b))


def is_near_duplicate(tags_a: Iterable[str], text_a: str, tags_b: Iterable[str], text_b: str) -> bool:
    """The near-duplicate rule (the caller compares lessons of one type only)."""
    return tag_similarity(tags_a, tags_b) >= TAG_THRESHOLD and word_similarity(text_a, text_b) > WORD_THRESHOLD


def shared_tags(lesson_tags: Iterable[str], task_tags: Iterable[str]) -> int:
    return len(set(normalise_tags(lesson_tags)) & set(normalise_tags(task_tags)))


def rank_score(lesson_tags: Iterable[str], task_tags: Iterable[str], confidence: float) -> float:
    """Shared tags plus the confidence after decay."""
    return shared_tags(lesson_tags, task_tags) + float(confidence)
