"""The memory verbs, bound to one Context: add / get_row on whole rows, the storage contract's
upsert_many, search, get, get_many, delete_many, describe_store and health, and list_chunks (pages).

Identity, tenant, actor and scope come only from the context, and Postgres enforces them (RLS).
Every verb runs in one transaction of its own, or as a savepoint inside the caller's when given
`conn`. Every write goes through the one write path (pymem.storage.rows). Content and vectors
are never logged or put in error messages.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import timedelta
from typing import Any, cast

import psycopg
from psycopg.rows import dict_row

from .. import db, queries
from ..context import Context
from ..errors import AccessDenied, InvalidArguments, RevisionMismatch
from . import idempotency, status
from .chunks import chunk_from_row, parse_chunk
from .rows import MemoryRow, check_row, reap_expired, write_rows
from .search import (
    check_include,
    check_metadata_filter,
    check_scope_filter,
    check_top_k,
    contract_hits,
    run_search,
    search_chunks_as,
)
from .validate import check_embedding, check_id, check_ids, check_subject, check_ttl

__all__ = ["Memories", "check_records", "check_expected_revisions", "MAX_BATCH", "MAX_IDS", "MAX_LIST", "ROW_FIELDS"]

MAX_BATCH = 10_000
MAX_IDS = 10_000
MAX_LIST = 1000
UPSERT_VERB = "upsert_many"
#: The fields a caller may give `add` (the rest of a row is the database's or the context's).
ROW_FIELDS = frozenset({"id", "scope", "kind", "content", "record", "embedding", "tags", "importance", "confidence",
                        "origin", "provenance", "injection_source", "policy_fingerprint", "valid_from",
                        "invalidated_at", "superseded_by", "embedder", "ttl", "subject"})


class Memories:
    """Memory verbs bound to one Context. Every verb takes an optional connection to join a
    caller's transaction (as a savepoint) instead of opening its own."""

    def __init__(self, store: Any, ctx: Context):
        self.store = store  # the pymem.storage.store.Store these verbs run on
        self.ctx = ctx

    def _tx(self, conn: psycopg.Connection | None) -> AbstractContextManager[psycopg.Connection]:
        tx: AbstractContextManager[psycopg.Connection] = self.store.transaction(self.ctx, conn)
        return tx

    # -- rows --------------------------------------------------------------------------------

    def prepare_row(self, row: Mapping[str, Any]) -> MemoryRow:
        """Validate one memory row and fill in defaults; raises InvalidArguments."""
        if not isinstance(row, Mapping):
            raise InvalidArguments(f"a memory must be an object, got {type(row).__name__}")
        unknown = set(row) - ROW_FIELDS
        if unknown:
            raise InvalidArguments(f"unknown memory fields: {', '.join(sorted(map(str, unknown)))}")
        return check_row(dim=self.store.embedding_dim, max_content_bytes=self.store.settings.max_content_bytes,
                         default_scope=self.ctx.scope, **row)

    def add(self, rows: Sequence[Mapping[str, Any]], *, conn: psycopg.Connection | None = None) -> list[str]:
        """Insert memory rows in one transaction; returns their ids. All or nothing."""
        if isinstance(rows, Mapping) or not isinstance(rows, (list, tuple)):
            raise InvalidArguments("rows must be a list of memory objects")
        prepared = [self.prepare_row(r) for r in rows]
        if not prepared:
            return []
        with self._tx(conn) as c:
            write_rows(c, self.ctx, prepared, replace=False)
        return [p.id for p in prepared]

    def get_row(self, memory_id: str, *, conn: psycopg.Connection | None = None) -> dict[str, Any] | None:
        """One memory row as a dict (embedding as a list of floats), or None if not visible."""
        check_id(memory_id)
        with self._tx(conn) as c, c.cursor(row_factory=dict_row) as cur:
            cur.execute(queries.query("memory_row"), (self.ctx.tenant, memory_id))
            row = cur.fetchone()
        if row and row["embedding"] is not None:
            row["embedding"] = row["embedding"].to_list()
        return row

    # -- the storage contract ----------------------------------------------------------------

    def upsert_many(self, records: Sequence[Mapping[str, Any]], *, idempotency_key: str,
                    expected_revisions: Mapping[str, int] | None = None, idempotency_class: str | None = None,
                    ttl: float | timedelta | None = None, subject: str | None = None,
                    conn: psycopg.Connection | None = None) -> dict[str, Any]:
        """Store chunks verbatim, atomically: {"upserted": N, "replayed": bool}.

        Replay-or-conflict on (verb, actor, idempotency_key); expected_revisions {id: rev} (0 = must
        not exist) => RevisionMismatch and nothing written; idempotency_class "default" (24 h),
        "short" (1 h) or "long" (30 days) sets how long the key is remembered. ttl (seconds, or a
        timedelta) makes every record expire that long after this write (None: the tenant's
        default); subject names the person the records are about (pymem.integrity.erase_actor).
        """
        ctx, store = self.ctx, self.store
        key = idempotency.check_key(idempotency_key)
        lifetime = idempotency.ttl(idempotency_class)
        expiry, about = check_ttl(ttl), check_subject(subject)
        rows = check_records(records, dim=store.embedding_dim, ctx=ctx,
                             max_content_bytes=store.settings.max_content_bytes)
        if expiry is not None or about is not None:
            rows = [dataclasses.replace(r, ttl=expiry, subject=about) for r in rows]
        expected = check_expected_revisions(expected_revisions, {r.id for r in rows})
        # One canonical JSON text per record serves both the digest and the jsonb parameter.
        call: dict[str, Any] = {"records": [r.record_text for r in rows], "expected_revisions": expected or None}
        if expiry is not None:
            call["ttl"] = expiry.total_seconds()
        if about is not None:
            call["subject"] = about
        call_digest = idempotency.digest(call)
        result = {"upserted": len(rows)}

        with self._tx(conn) as c:
            if store.on_citus:  # before the claim's write: rows.reap_expired says why
                reap_expired(c, rows)
            stored = idempotency.claim(c, ctx, UPSERT_VERB, key, call_digest, result, lifetime)
            if stored is not None:
                return {"upserted": int(stored.get("upserted", len(rows))), "replayed": True}
            if expected:
                _check_revisions(c, ctx, expected)
            revisions = write_rows(c, ctx, rows, replace=True, reaped=store.on_citus)
            if expected:
                # Belt and braces against a concurrent writer between the check and the write: a
                # record expected at revision r must now be at r + 1.
                stale = [i for i, r in expected.items() if revisions.get(i) != r + 1]
                if stale:
                    raise RevisionMismatch(f"{len(stale)} record(s) changed concurrently (first: id {stale[0]!r})")
        return {"upserted": len(rows), "replayed": False}

    def search(self, vector: Sequence[float], *, top_k: int, scope_filter: Mapping[str, str] | None = None,
               metadata_filter: Mapping[str, Any] | None = None, include: Mapping[str, bool] | None = None,
               fidelity_target: Any = None, conn: psycopg.Connection | None = None) -> list[dict[str, Any]]:
        """The top_k visible chunks closest by cosine whose scope contains scope_filter, best first:
        [{chunk, chunk_id, score, recalled_view, revision}]. include: {"embedding": False} leaves
        vectors out of the returned chunks, {"superseded": True} also returns superseded rows."""
        top_k = check_top_k(top_k)
        scope = check_scope_filter(scope_filter)
        check_metadata_filter(metadata_filter)
        options = check_include(include)
        if fidelity_target is not None:
            raise InvalidArguments("fidelity_target is not supported: search is exact or HNSW with recall >= 0.95")
        query = check_embedding(vector, self.store.embedding_dim, "vector")
        kwargs: dict[str, Any] = dict(include_superseded=options["superseded"], with_vectors=options["embedding"])
        if conn is not None:
            with db.transaction(conn, self.ctx):
                return contract_hits(run_search(conn, query, top_k, scope, **kwargs))
        if self.store.on_citus:  # Citus replays the context on the shards only inside a transaction block
            with self.store.connection() as c, db.transaction(c, self.ctx):
                return contract_hits(run_search(c, query, top_k, scope, **kwargs))
        # One autocommit statement that sets the context and searches (one round trip instead of
        # four), on a connection kept for such statements (db.StatementConnections).
        with self.store.statements.connection() as c:
            return search_chunks_as(c, self.ctx, query, top_k, scope, **kwargs)

    def get(self, memory_id: str, *, conn: psycopg.Connection | None = None) -> dict[str, Any] | None:
        """The stored chunk, verbatim, plus a "revision" key; None if absent, erased or not visible."""
        memory_id = check_id(memory_id)
        return self._fetch([memory_id], conn).get(memory_id)

    def get_many(self, ids: Sequence[str], *, conn: psycopg.Connection | None = None) -> list[dict[str, Any]]:
        """get() for many ids: the records found, in the order of `ids` (absent ids are skipped, a
        repeated id is returned each time it is asked for)."""
        ids = _check_id_list(ids)
        found = self._fetch(list(dict.fromkeys(ids)), conn)
        # each a fresh copy, so a caller mutating one result does not change another
        return [dict(found[i]) for i in ids if i in found]

    def list_chunks(self, *, limit: int = 50, after: str | None = None,
                    conn: psycopg.Connection | None = None) -> dict[str, Any]:
        """A page of the visible chunks in id order: {"chunks": [record + "revision"], "next_after": the
        id to pass as `after` for the next page, or None on the last page}."""
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIST:
            raise InvalidArguments(f"limit must be an integer between 1 and {MAX_LIST}")
        if after is not None:
            after = check_id(after, "after")
        with self._tx(conn) as c, c.cursor(row_factory=dict_row) as cur:
            cur.execute(queries.query("list_chunks"), (self.ctx.tenant, after, after, limit + 1))
            rows = cur.fetchall()
        chunks = []
        for row in rows[:limit]:
            record = dict(chunk_from_row(row))
            record["revision"] = row["revision"]
            chunks.append(record)
        return {"chunks": chunks, "next_after": rows[limit - 1]["id"] if len(rows) > limit else None}

    def delete_many(self, ids: Sequence[str], *, conn: psycopg.Connection | None = None) -> dict[str, int]:
        """Delete chunks in one transaction (one ledger event each): {"deleted": ids that existed}."""
        ids = list(dict.fromkeys(_check_id_list(ids)))
        if not ids:
            return {"deleted": 0}
        with self._tx(conn) as c, c.cursor() as cur:
            cur.execute(queries.query("count_memories"), (self.ctx.tenant, ids))
            visible = db.one(cur.fetchone())[0]
            cur.execute(queries.query("delete_memories"), (ids,))
            deleted = [not erased for (erased,) in cur.fetchall()]
            if len(deleted) < visible:
                # RLS hides nothing here but lets an adapter delete only its own rows: say so, and
                # roll the whole batch back rather than delete part of it.
                raise AccessDenied(f"{visible - len(deleted)} of the records may not be deleted in this context "
                                   "(an adapter deletes only its own rows); nothing was deleted")
        return {"deleted": sum(1 for live in deleted if live)}

    def describe_store(self) -> dict[str, Any]:
        """Capabilities, advertising only what is implemented."""
        return status.describe_store(self.store.embedding_dim, max_batch=MAX_BATCH)

    def health(self) -> dict[str, Any]:
        """Database reachable and its version, pgvector version check, schema revision current."""
        return status.health(self.store.pool, self.store.embedding_dim)

    def _fetch(self, ids: list[str], conn: psycopg.Connection | None) -> dict[str, dict[str, Any]]:
        if not ids:
            return {}
        with self._tx(conn) as c, c.cursor(row_factory=dict_row) as cur:
            cur.execute(queries.query("chunks_by_id"), (self.ctx.tenant, ids))
            rows = cur.fetchall()
        found = {}
        for row in rows:
            record = dict(chunk_from_row(row))
            record["revision"] = row["revision"]
            found[row["id"]] = record
        return found


def check_records(records: Any, *, dim: int, ctx: Context, max_content_bytes: int) -> list[MemoryRow]:
    if isinstance(records, (str, bytes, Mapping)) or not isinstance(records, (list, tuple)):
        raise InvalidArguments("records must be a list of chunk objects")
    if len(records) > MAX_BATCH:
        raise InvalidArguments(f"at most {MAX_BATCH} records per call, got {len(records)}")
    rows = [parse_chunk(r, dim=dim, default_scope=ctx.scope, max_content_bytes=max_content_bytes,
                        where=f"records[{i}]") for i, r in enumerate(records)]
    seen: dict[str, int] = {}
    for i, row in enumerate(rows):
        if row.id in seen:
            raise InvalidArguments(f"records[{i}] repeats the id of records[{seen[row.id]}]; "
                                   "one record per id per call")
        seen[row.id] = i
    return rows


def check_expected_revisions(expected: Any, ids: set[str]) -> dict[str, int]:
    """{id: revision}: the revision each record must have now; 0 means it must not exist yet."""
    if expected is None:
        return {}
    if not isinstance(expected, Mapping):
        raise InvalidArguments(f"expected_revisions must be an object of id -> revision, got {type(expected).__name__}")
    out: dict[str, int] = {}
    for key, value in expected.items():
        memory_id = check_id(key, "expected_revisions id")
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InvalidArguments("expected_revisions values must be integers >= 0 (0 = must not exist yet)")
        if memory_id not in ids:
            raise InvalidArguments("expected_revisions names an id that is not in records")
        out[memory_id] = value
    return out


def _check_revisions(conn: psycopg.Connection, ctx: Context, expected: dict[str, int]) -> None:
    with conn.cursor() as cur:
        cur.execute(queries.query("current_revisions"), (ctx.tenant, list(expected)))
        current: dict[str, int] = dict(cur.fetchall())
    stale = [(i, r, current.get(i, 0)) for i, r in expected.items() if current.get(i, 0) != r]
    if stale:
        memory_id, want, have = stale[0]
        found = f"revision {have}" if have else "no such record"
        raise RevisionMismatch(
            f"{len(stale)} record(s) are not at their expected revision (first: id {memory_id!r} expected "
            f"{want}, found {found}); nothing was written"
        )


def _check_id_list(ids: Any) -> list[str]:
    ids = check_ids(ids)
    if len(ids) > MAX_IDS:
        raise InvalidArguments(f"at most {MAX_IDS} ids per call, got {len(ids)}")
    return cast("list[str]", ids)
