"""The near-duplicate rule and the task fit, exactly at their thresholds (no database)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from pymem.lessons.similarity import (
    TAG_THRESHOLD,
    WORD_THRESHOLD,
    is_near_duplicate,
    jaccard,
    normalise_tags,
    rank_score,
    shared_tags,
    tag_similarity,
    word_similarity,
    words,
)


def test_words_are_casefolded_runs_of_letters_and_digits():
    assert words("Retry 3 times, then FAIL -- retry_after!") == {"retry", "3", "times", "then", "fail", "after"}
    assert words("Straße STRASSE") == {"strasse"}
    assert words("...") == frozenset()


def test_jaccard_is_exact():
    assert jaccard("abc", "abcd") == Fraction(3, 4)
    assert jaccard([], []) == 0
    assert Fraction(3, 4) == TAG_THRESHOLD and Fraction(4, 5) == WORD_THRESHOLD


def test_tags_are_normalised():
    assert normalise_tags([" DB", "db", "Migrations "]) == ("db", "migrations")
    assert tag_similarity(["DB"], ["db "]) == 1


@pytest.mark.parametrize("tags_b,extra_words,expected", [
    (["a", "b", "c"], "", True),            # tags 3/4 = 0.75: enough
    (["a", "b", "c", "e"], "", False),      # tags 3/5 = 0.6
    (["a", "b", "c", "d"], " w9", True),    # words 8/9
    (["a", "b", "c", "d"], " w9 w10", False),  # words 8/10 = 0.8: not above
])
def test_thresholds(tags_b, extra_words, expected):
    text = "w1 w2 w3 w4 w5 w6 w7 w8"
    assert is_near_duplicate(["a", "b", "c", "d"], text, tags_b, text + extra_words) is expected


def test_texts_without_words_never_match():
    assert word_similarity("!!!", "???") == 0
    assert not is_near_duplicate(["a"], "!!!", ["a"], "!!!")


def test_rank_score_is_shared_tags_plus_confidence():
    assert shared_tags(["DB", "perf"], ["db", "migrations"]) == 1
    assert rank_score(["db", "migrations"], ["db", "migrations"], 0.1) == pytest.approx(2.1)
    # a lesson sharing more tags always outranks one sharing fewer, whatever their confidence
    assert rank_score(["db", "migrations"], ["db", "migrations"], 0.0) > rank_score(["db"], ["db", "migrations"], 1.0 - 1e-9)
