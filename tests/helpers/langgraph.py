"""What the LangGraph store's tests share: a deterministic embedding, and a bound PymemStore."""

from __future__ import annotations

import hashlib
import math
import random

DIM = 384


def text_vector(text: str, dim: int = DIM) -> list[float]:
    """A unit vector drawn from a generator seeded by the text: equal texts give equal vectors,
    different texts almost never tie in cosine."""
    rng = random.Random(hashlib.sha256(text.encode("utf-8")).digest())
    v = [rng.gauss(0.0, 1.0) for _ in range(dim)]
    norm = math.sqrt(math.fsum(x * x for x in v))
    return [x / norm for x in v]


def embed(texts: list[str]) -> list[list[float]]:
    return [text_vector(t) for t in texts]


def cosine(a: list[float], b: list[float]) -> float:
    dot = math.fsum(x * y for x, y in zip(a, b))
    return dot / (math.sqrt(math.fsum(x * x for x in a)) * math.sqrt(math.fsum(y * y for y in b)))


def index(fields: list[str] | None = None) -> dict:
    return {"dims": DIM, "embed": embed, "fields": fields or ["text"]}
