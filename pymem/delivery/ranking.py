"""How delivery orders and cuts what it recalled: a similarity floor, trust weights and recency.

All deterministic; no model judges relevance or freshness.

* **Abstention.** A hit whose cosine similarity to the query is below the floor is not delivered,
  however few hits are left: when nothing relevant is stored the recalled section is empty
  instead of holding the nearest unrelated memory. Default DEFAULT_FLOOR (0.35), from
  ``PYMEM_SIMILARITY_FLOOR`` or the `floor=` argument. With the MiniLM embedder related pairs
  measure 0.5 and above and unrelated ones 0.34 and below; the lexical embedder scores shared
  words, so two texts that share only common words ("the user's ...") can pass it.
* **Rank.** Delivery ranks by `fused_rank_score` (recall's hybrid order × tier weight, no recency).
  `rank_score` below is the former similarity-based score, kept for callers that rank vectors
  themselves: ``score = similarity × tier weight × recency``, where
  ``recency = (1 − RECENCY_WEIGHT) + RECENCY_WEIGHT × 2^(−age_days / RECENCY_HALF_LIFE_DAYS)``
  and ``age_days`` is the time from the memory's `created_at` to the delivery (never negative).
  With the defaults (0.3, 30 days) a memory written today keeps its full similarity, a month-old
  one 85 %, a very old one 70 %: recency breaks near-ties and prefers the newer of two similar
  facts, it never lets a fresh irrelevant memory beat an old relevant one by much. Superseded
  memories are not candidates at all (search leaves out rows whose `invalidated_at` is set).
"""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Mapping

from ..config import environment
from ..errors import InvalidArguments

__all__ = ["DEFAULT_FLOOR", "RECENCY_WEIGHT", "RECENCY_HALF_LIFE_DAYS", "RANK_K", "recency", "rank_score",
           "fused_rank_score", "similarity_floor", "check_floor"]

DEFAULT_FLOOR = 0.35
RECENCY_WEIGHT = 0.3
RECENCY_HALF_LIFE_DAYS = 30.0
#: The reciprocal-rank constant of fused_rank_score (the one pymem.search fuses with).
RANK_K = 10.0


def fused_rank_score(position: int, tier_weight: float) -> float:
    """What delivery ranks a recalled memory by: tier weight / (RANK_K + 1 + its place in recall's
    fused ranking, from 0). No recency: on LoCoMo with the sessions' real dates a recency weight
    lowered any@5 (most questions are about an event whose first mention is the answer), so time
    does not rank; a memory's event time is shown in the block instead."""
    return tier_weight / (RANK_K + 1.0 + position)


def recency(created_at: _dt.datetime | None, now: _dt.datetime) -> float:
    """The recency factor in [1 − RECENCY_WEIGHT, 1] (see the module docstring); a memory with no
    known creation time counts as very old."""
    if created_at is None:
        return 1.0 - RECENCY_WEIGHT
    age_days = max(0.0, (now - created_at).total_seconds() / 86400.0)
    return (1.0 - RECENCY_WEIGHT) + RECENCY_WEIGHT * math.pow(2.0, -age_days / RECENCY_HALF_LIFE_DAYS)


def rank_score(similarity: float, tier_weight: float, created_at: _dt.datetime | None, now: _dt.datetime) -> float:
    return similarity * tier_weight * recency(created_at, now)


def check_floor(value: object, what: str = "floor") -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not -1.0 <= value <= 1.0:
        raise InvalidArguments(f"{what} must be a cosine similarity in [-1, 1]")
    return float(value)


def similarity_floor(environ: Mapping[str, str] | None = None) -> float:
    """The floor the environment asks for (``PYMEM_SIMILARITY_FLOOR``), else DEFAULT_FLOOR."""
    env = environment() if environ is None else environ
    raw = (env.get("PYMEM_SIMILARITY_FLOOR") or "").strip()
    if not raw:
        return DEFAULT_FLOOR
    try:
        return check_floor(float(raw), "PYMEM_SIMILARITY_FLOOR")
    except ValueError:
        raise InvalidArguments(f"PYMEM_SIMILARITY_FLOOR must be a number in [-1, 1], got {raw[:32]!r}") from None
