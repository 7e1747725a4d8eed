"""An in-memory reference implementation of the storage contract, for differential tests.

It models one tenant, seen by one actor at a time, with no context scope: the verbs'
semantics (verbatim records, revisions, replay-or-conflict idempotency, optimistic locking,
the injection rule, scope filtering, cosine ranking with top_k counting in-scope rows) written
as plainly as possible, with no database and no cleverness. Scores are computed in float64 from
float32-rounded vectors (what pgvector stores), so they agree with Postgres to about 1e-6.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import struct
from typing import Any

from pymem.errors import IdempotencyConflict, InvalidArguments, RevisionMismatch

INJECTED = "injected_context"
CLASSES = ("default", "short", "long")


def _f32(x: float) -> float:
    return struct.unpack("f", struct.pack("f", float(x)))[0]


def cosine(a: list[float], b: list[float]) -> float:
    a = [_f32(x) for x in a]
    b = [_f32(x) for x in b]
    dot = math.fsum(x * y for x, y in zip(a, b, strict=False))
    na = math.fsum(x * x for x in a)
    nb = math.fsum(y * y for y in b)
    return dot / math.sqrt(na * nb)


def _first(record: dict, keys: tuple[str, ...]) -> Any:
    for key in keys:
        if record.get(key) is not None:
            return record[key]
    return None


class ReferenceStore:
    def __init__(self, dim: int, max_top_k: int = 1000):
        self.dim = dim
        self.max_top_k = max_top_k
        self.rows: dict[str, tuple[dict, int]] = {}  # id -> (record, revision)
        self.keys: dict[tuple[str, str, str], tuple[str, int]] = {}  # (verb, actor, key) -> (digest, n)

    # -- checks ----------------------------------------------------------------------------
    def _vector(self, value: Any) -> list[float]:
        if not isinstance(value, list) or len(value) != self.dim:
            raise InvalidArguments("bad vector")
        if any(isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) for x in value):
            raise InvalidArguments("bad vector")
        if not any(value):
            raise InvalidArguments("zero vector")
        return value

    def _check(self, record: Any) -> str:
        if not isinstance(record, dict):
            raise InvalidArguments("record must be an object")
        memory_id = _first(record, ("id", "chunk_id", "memory_id"))
        if not isinstance(memory_id, str) or not memory_id:
            raise InvalidArguments("bad id")
        vector = _first(record, ("embedding", "vector"))
        if vector is not None:
            self._vector(vector)
        injected = record.get("origin") == INJECTED
        has_source = record.get("injection_source") is not None
        if injected != has_source:
            raise InvalidArguments("injection rule")
        return memory_id

    # -- verbs -----------------------------------------------------------------------------
    def upsert_many(self, records: list[dict], *, idempotency_key: str, actor: str | None = None,
                    expected_revisions: dict[str, int] | None = None, idempotency_class: str | None = None) -> dict:
        if not isinstance(idempotency_key, str) or not idempotency_key.strip():
            raise InvalidArguments("idempotency_key")
        if idempotency_class is not None and idempotency_class not in CLASSES:
            raise InvalidArguments("idempotency_class")
        ids = [self._check(r) for r in records]
        if len(set(ids)) != len(ids):
            raise InvalidArguments("repeated id")
        expected = dict(expected_revisions or {})
        if any(k not in ids for k in expected):
            raise InvalidArguments("expected_revisions names an id not in records")
        digest = hashlib.sha256(json.dumps({"records": records, "expected_revisions": expected or None},
                                           sort_keys=True).encode()).hexdigest()
        slot = ("upsert_many", actor or "", idempotency_key)
        if slot in self.keys:
            stored_digest, n = self.keys[slot]
            if stored_digest != digest:
                raise IdempotencyConflict("different payload")
            return {"upserted": n, "replayed": True}
        for memory_id, want in expected.items():
            have = self.rows[memory_id][1] if memory_id in self.rows else 0
            if have != want:
                raise RevisionMismatch("stale")
        for memory_id, record in zip(ids, records, strict=False):
            revision = self.rows[memory_id][1] + 1 if memory_id in self.rows else 1
            self.rows[memory_id] = (copy.deepcopy(record), revision)
        self.keys[slot] = (digest, len(records))
        return {"upserted": len(records), "replayed": False}

    def get(self, memory_id: str) -> dict | None:
        if not isinstance(memory_id, str):
            raise InvalidArguments("id")
        if memory_id not in self.rows:
            return None
        record, revision = self.rows[memory_id]
        return {**copy.deepcopy(record), "revision": revision}

    def get_many(self, ids: list[str]) -> list[dict]:
        return [r for r in (self.get(i) for i in ids) if r is not None]

    def delete_many(self, ids: list[str]) -> dict:
        gone = 0
        for memory_id in set(ids):
            if self.rows.pop(memory_id, None) is not None:
                gone += 1
        return {"deleted": gone}

    def scored(self, vector: list[float], scope_filter: dict[str, str] | None = None) -> list[tuple[float, str]]:
        """(score, id) of every in-scope row with a vector, best first (ties by id)."""
        scope_filter = scope_filter or {}
        out = []
        for memory_id, (record, _) in self.rows.items():
            emb = _first(record, ("embedding", "vector"))
            if emb is None:
                continue
            scope = record.get("scope") or {}
            if any(scope.get(axis) != value for axis, value in scope_filter.items()):
                continue
            out.append((cosine(vector, emb), memory_id))
        out.sort(key=lambda t: (-t[0], t[1]))
        return out

    def search(self, vector: list[float], *, top_k: int, scope_filter: dict | None = None,
               metadata_filter: dict | None = None, include: dict | None = None) -> list[dict]:
        self._vector(vector)
        if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= self.max_top_k:
            raise InvalidArguments("top_k")
        if metadata_filter:
            raise InvalidArguments("metadata_filter")
        hits = []
        for score, memory_id in self.scored(vector, scope_filter)[:top_k]:
            record, revision = self.rows[memory_id]
            chunk = copy.deepcopy(record)
            view = chunk["distillate"] if chunk.get("distillate") is not None else chunk
            hits.append({"chunk": chunk, "chunk_id": memory_id, "score": score, "recalled_view": view,
                         "revision": revision})
        return hits


def assert_same_search(got: list[dict], ref: ReferenceStore, vector: list[float], top_k: int,
                       scope_filter: dict | None = None, tol: float = 1e-5) -> None:
    """Postgres's answer matches the reference's up to float32 rounding: same length, same scores
    rank by rank, every returned row in scope with its reference score, and every row that scores
    clearly better than the k-th returned one present. Near-ties may come back in either order."""
    scored = ref.scored(vector, scope_filter)
    expected = scored[:top_k]
    assert len(got) == len(expected), (len(got), len(expected))
    by_id = {memory_id: score for score, memory_id in scored}
    for hit, (score, _) in zip(got, expected, strict=False):
        assert abs(hit["score"] - score) <= tol, (hit["score"], score)
        assert hit["chunk_id"] in by_id, "returned a row that is out of scope"
        assert abs(by_id[hit["chunk_id"]] - hit["score"]) <= tol
        record, revision = ref.rows[hit["chunk_id"]]
        assert hit["chunk"] == record and hit["revision"] == revision
        view = record["distillate"] if record.get("distillate") is not None else record
        assert hit["recalled_view"] == view
    if got:
        floor = got[-1]["score"]
        returned = {h["chunk_id"] for h in got}
        assert all(memory_id in returned for score, memory_id in scored if score > floor + tol)
    assert len({h["chunk_id"] for h in got}) == len(got)
