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

from collections.abc import Mapping
from typing import Any, cast

from ..errors import InvalidArguments
from ..vocabulary import CONTENT_KEYS, ID_KEYS, VECTOR_KEYS
from .rows import MemoryRow, check_row


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


def parse_chunk(record: Any, *, dim: int, default_scope: Mapping[str, str], max_content_bytes: int,
                where: str = "record") -> MemoryRow:
    """Read one chunk's structural surface and check it as a row (pymem.storage.rows.check_row);
    raises InvalidArguments naming `where`."""
    if not isinstance(record, Mapping):
        raise InvalidArguments(f"{where} must be an object, got {type(record).__name__}")
    record = dict(record)
    raw_id = chunk_id(record)
    if raw_id is None:
        raise InvalidArguments(f"{where} has no id (one of {', '.join(ID_KEYS)})")
    vector_key = next((k for k in VECTOR_KEYS if record.get(k) is not None), None)
    content = next((record[k] for k in CONTENT_KEYS if isinstance(record.get(k), str)), None)
    provenance = record.get("provenance")
    return check_row(
        dim=dim, max_content_bytes=max_content_bytes, default_scope=default_scope, where=where,
        id=raw_id, scope=record.get("scope"), content=content, record=record, record_vector_key=vector_key,
        embedding=record[vector_key] if vector_key else None, origin=record.get("origin"),
        provenance=provenance if isinstance(provenance, dict) else None,
        injection_source=record.get("injection_source"))


def chunk_from_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """The chunk a row stands for: its verbatim record, or, for a row written without one (by
    another write path), the record its columns describe."""
    if row.get("record") is not None:
        return cast("dict[str, Any]", row["record"])
    chunk: dict[str, Any] = {"id": row["id"]}
    for key in ("content", "scope", "kind", "tags", "origin", "provenance", "injection_source"):
        if row.get(key) is not None:
            chunk[key] = row[key]
    embedding = row.get("embedding")
    if embedding is not None:
        chunk["embedding"] = embedding.to_list() if hasattr(embedding, "to_list") else list(embedding)
    return chunk


__all__ = ["chunk_id", "recalled_view", "parse_chunk", "chunk_from_row"]
