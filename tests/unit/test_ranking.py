"""Recency and the similarity floor: deterministic, and what the README says."""

from __future__ import annotations

import datetime as dt

import pytest

from pymem import InvalidArguments
from pymem.delivery import DEFAULT_FLOOR
from pymem.delivery.ranking import RECENCY_HALF_LIFE_DAYS, RECENCY_WEIGHT, rank_score, recency, similarity_floor

NOW = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)


def test_the_recency_formula():
    assert recency(NOW, NOW) == 1.0
    assert recency(NOW + dt.timedelta(days=3), NOW) == 1.0  # never above 1 for a clock ahead
    month = recency(NOW - dt.timedelta(days=RECENCY_HALF_LIFE_DAYS), NOW)
    assert month == pytest.approx(1 - RECENCY_WEIGHT / 2) == pytest.approx(0.85)
    assert recency(NOW - dt.timedelta(days=3650), NOW) == pytest.approx(0.7, abs=1e-9)
    assert recency(None, NOW) == pytest.approx(0.7)


def test_recency_prefers_the_newer_of_two_similar_facts_but_not_an_irrelevant_one():
    old, new = NOW - dt.timedelta(days=90), NOW - dt.timedelta(hours=1)
    assert rank_score(0.80, 1.0, new, NOW) > rank_score(0.82, 1.0, old, NOW)
    assert rank_score(0.80, 1.0, old, NOW) > rank_score(0.50, 1.0, new, NOW)


def test_the_floor_default_and_environment():
    assert DEFAULT_FLOOR == 0.35 and similarity_floor({}) == 0.35
    assert similarity_floor({"PYMEM_SIMILARITY_FLOOR": "0.5"}) == 0.5
    for bad in ("high", "2", "nan"):
        with pytest.raises(InvalidArguments):
            similarity_floor({"PYMEM_SIMILARITY_FLOOR": bad})
