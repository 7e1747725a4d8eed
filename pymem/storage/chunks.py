"""The storage contract's chunk record, and the few fields of it the store reads.

A chunk is an opaque JSON object that is stored verbatim (`memories.record`); the store reads
only its structural surface:

- the id: `id`, else `chunk_id`, else `memory_id` (the first that is present and not null);
- the vector: `embedding`, else `vector` (a chunk without one is stored but never found by search);
- `scope`: a flat {axis: value} map, the isolation key (absent = the context's scope);
- `origin` / `injection_source`: `injected_context` needs an injection source, any other origin
  must not carry one;
- for recall and hashing, `content` (else `distillate`, else `text`) when it is a string, and
  `provenance` when it is an object, are copied into their own columns.

Everything else (trust tiers, metadata, ...) is persisted and returned untouched.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Mapping

from ..context import check_scope
from ..errors import ContextError, InvalidArguments
from .validate import check_id, check_json, check_text, check_vector

ID_KEYS = ("id", "chunk_id", "memory_id")
VECTOR_KEYS = ("embedding", "vector")
CONTENT_KEYS = ("content", "distillate", "text")
ORIGINS = frozenset({"user_asserted", "operator", "model_inferred", "tool_output", "retrieved_content",
                     "unproven", "injected_context"})
INJECTED = "injected_context"
MAX_RECORD_BYTES = 1 << 20
MAX_INJECTION_SOURCE_BYTES = 2048


@dataclass(frozen=True)
class Chunk:
    """A validated chunk: the verbatim record plus the columns extracted from it."""

    id: str
    record: dict[str, Any]
    text: str  # the record as canonical JSON (sorted keys): digest input and jsonb parameter
    embedding: list[float] | None
    scope: dict[str, str]
    origin: str | None
    injection_source: str | None
    content: str | None
    provenance: dict[str, Any] | None


def first_present(record: Mapping[str, Any], keys: tuple[str, ...]) -> Any:
    for key in keys:
        value = record.get(key)
        if value is not None:
            return value
    return None


def chunk_id(record: Mapping[str, Any]) -> Any:
    """The chunk's id as given (not validated): `id`, else `chunk_id`, else `memory_id`."""
    return first_present(record, ID_KEYS)


def recalled_view(chunk: Mapping[str, Any]) -> Any:
    """What a search hit offers for recall: the chunk's distillate, or the whole chunk."""
    distillate = chunk.get("distillate")
    return distillate if distillate is not None else chunk


def check_nonzero(vector: list[float], what: str) -> list[float]:
    """Cosine similarity is undefined for a zero vector, so none is stored or searched for."""
    if not any(vector):
        raise InvalidArguments(f"{what} is a zero vector, which has no direction for cosine similarity")
    return vector


def check_embedding(value: Any, dim: int, what: str = "embedding") -> list[float]:
    """A list of `dim` finite numbers, not all zero, whose squared norm fits float4 (pgvector sums
    squares in float4: past that the norm overflows and scores become NaN)."""
    if type(value) is list and len(value) == dim and all(type(x) is float for x in value):
        # the common case, checked in one pass: NaN and inf make the sum NaN or inf
        squares = math.fsum(x * x for x in value)
        if 0 < squares < 3.4e38:
            return value
    vector = check_vector(value, dim, what)
    if math.fsum(x * x for x in vector) >= 3.4e38:
        raise InvalidArguments(f"{what} is too large: its squared norm overflows float4")
    return check_nonzero(vector, what)


def parse_chunk(record: Any, *, dim: int, default_scope: Mapping[str, str], max_content_bytes: int,
                where: str = "record") -> Chunk:
    """Validate one chunk and extract its columns; raises InvalidArguments naming `where`."""
    if not isinstance(record, Mapping):
        raise InvalidArguments(f"{where} must be an object, got {type(record).__name__}")
    record = dict(record)
    raw_id = chunk_id(record)
    if raw_id is None:
        raise InvalidArguments(f"{where} has no id (one of {', '.join(ID_KEYS)})")
    memory_id = check_id(raw_id, f"{where} id")

    vector_key = next((k for k in VECTOR_KEYS if record.get(k) is not None), None)
    embedding = check_embedding(record[vector_key], dim, f"{where} embedding") if vector_key else None
    # the vector is checked already: walk the rest (NUL bytes, non-string keys, NaN, ...)
    check_json({k: v for k, v in record.items() if k != vector_key}, where)
    try:
        text = json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidArguments(f"{where} is not JSON: {type(exc).__name__}") from None
    size = len(text.encode("utf-8"))
    if size > MAX_RECORD_BYTES:
        raise InvalidArguments(f"{where} is {size} bytes as JSON, the limit is {MAX_RECORD_BYTES}")

    raw_scope = record.get("scope")
    try:
        scope = check_scope(raw_scope, f"{where} scope") if raw_scope is not None else dict(default_scope)
    except ContextError as exc:
        raise InvalidArguments(str(exc)) from None

    origin = record.get("origin")
    if origin is not None and (not isinstance(origin, str) or origin not in ORIGINS):
        raise InvalidArguments(f"{where} origin must be one of {', '.join(sorted(ORIGINS))}")
    injection_source = record.get("injection_source")
    if injection_source is not None:
        injection_source = check_text(injection_source, f"{where} injection_source",
                                      max_bytes=MAX_INJECTION_SOURCE_BYTES)
        if not injection_source:
            raise InvalidArguments(f"{where} injection_source must not be empty")
    if origin == INJECTED and injection_source is None:
        raise InvalidArguments(f"{where} has origin injected_context but no injection_source")
    if origin != INJECTED and injection_source is not None:
        raise InvalidArguments(f"{where} carries an injection_source but its origin is not injected_context")

    content = next((record[k] for k in CONTENT_KEYS if isinstance(record.get(k), str)), None)
    if content is not None:
        content = check_text(content, f"{where} content", max_bytes=max_content_bytes)
    provenance = record.get("provenance")
    if not isinstance(provenance, dict):
        provenance = None

    return Chunk(id=memory_id, record=record, text=text, embedding=embedding, scope=scope, origin=origin,
                 injection_source=injection_source, content=content, provenance=provenance)


def chunk_from_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """The chunk a row stands for: its verbatim record, or, for a row written without one (by
    another write path), the record its columns describe."""
    if row.get("record") is not None:
        return row["record"]
    chunk: dict[str, Any] = {"id": row["id"]}
    for key in ("content", "scope", "kind", "tags", "origin", "provenance", "injection_source"):
        if row.get(key) is not None:
            chunk[key] = row[key]
    embedding = row.get("embedding")
    if embedding is not None:
        chunk["embedding"] = embedding.to_list() if hasattr(embedding, "to_list") else list(embedding)
    return chunk


__all__ = ["Chunk", "ID_KEYS", "VECTOR_KEYS", "CONTENT_KEYS", "ORIGINS", "chunk_id", "recalled_view",
           "parse_chunk", "chunk_from_row", "check_embedding", "check_nonzero"]
