"""What the LangGraph store's tests share: a deterministic embedding, and a bound PymemStore."""

from __future__ import annotations

import hashlib
import math

DIM = 384


def text_vector(text: str, dim: int = DIM) -> list[float]:
    """A unit vector spun from the text's digests: equal texts give equal vectors, different
    texts almost never tie in cosine."""
    stream = b""
    block = 0
    while len(stream) < 2 * dim:
        stream += hashlib.sha256(f"{block}:{text}".encode()).digest()
        block += 1
    v = [int.from_bytes(stream[2 * i:2 * i + 2], "big") / 32767.5 - 1.0 for i in range(dim)]
    norm = math.sqrt(math.fsum(x * x for x in v))
    return [x / norm for x in v]


def embed(texts: list[str]) -> list[list[float]]:
    return [text_vector(t) for t in texts]


def cosine(a: list[float], b: list[float]) -> float:
    dot = math.fsum(x * y for x, y in zip(a, b, strict=False))
    return dot / (math.sqrt(math.fsum(x * x for x in a)) * math.sqrt(math.fsum(y * y for y in b)))


def index(fields: list[str] | None = None) -> dict:
    return {"dims": DIM, "embed": embed, "fields": fields or ["text"]}
