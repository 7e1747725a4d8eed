"""The storage verbs of the memory plane: upsert_many, search, get, get_many, delete_many,
describe_store and health.

Each verb takes the store and the Context it acts in; identity, tenant, actor and scope come only
from the context, and Postgres enforces them (RLS). Every verb runs in one transaction of its own,
or as a savepoint inside the caller's when given `conn`. Content and vectors are never logged or
put in error messages.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

import psycopg
from pgvector import Vector
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from .. import db, migrate
from . import idempotency
from ..context import Context
from ..errors import AccessDenied, InvalidArguments, RevisionMismatch
from .chunks import Chunk, check_embedding, chunk_from_row, parse_chunk
from .search import (MAX_TOP_K, check_include, check_metadata_filter, check_scope_filter, check_top_k,
                     contract_hits, run_search, run_search_as)
from .validate import check_id, check_ids

if TYPE_CHECKING:  # pragma: no cover
    from .store import Store

MAX_BATCH = 10_000
MAX_IDS = 10_000
ROWS_PER_STATEMENT = 500
MIN_PGVECTOR = (0, 8, 3)
UPSERT_VERB = "upsert_many"

_WRITE_COLUMNS = ("tenant_id", "id", "scope", "content", "record", "embedding", "origin", "provenance",
                  "injection_source", "source_adapter")
# An upsert replaces what the chunk determines; columns owned by other write paths (kind, tags,
# confidence, supersession, ...) are left as they are. The trigger bumps the revision.
_UPDATE_SET = ", ".join(f"{c} = excluded.{c}" for c in _WRITE_COLUMNS[2:])


def _identity(text: str) -> str:
    return text


# -- upsert_many --------------------------------------------------------------------------------

def check_records(records: Any, *, dim: int, ctx: Context, max_content_bytes: int) -> list[Chunk]:
    if isinstance(records, (str, bytes, Mapping)) or not isinstance(records, (list, tuple)):
        raise InvalidArguments("records must be a list of chunk objects")
    if len(records) > MAX_BATCH:
        raise InvalidArguments(f"at most {MAX_BATCH} records per call, got {len(records)}")
    chunks = [parse_chunk(r, dim=dim, default_scope=ctx.scope, max_content_bytes=max_content_bytes,
                          where=f"records[{i}]") for i, r in enumerate(records)]
    seen: dict[str, int] = {}
    for i, chunk in enumerate(chunks):
        if chunk.id in seen:
            raise InvalidArguments(f"records[{i}] repeats the id of records[{seen[chunk.id]}]; one record per id per call")
        seen[chunk.id] = i
    return chunks


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


def upsert_many(store: "Store", ctx: Context, records: Any, *, idempotency_key: Any,
                expected_revisions: Any = None, idempotency_class: Any = None,
                conn: psycopg.Connection | None = None) -> dict[str, Any]:
    key = idempotency.check_key(idempotency_key)
    lifetime = idempotency.ttl(idempotency_class)
    chunks = check_records(records, dim=store.embedding_dim, ctx=ctx,
                           max_content_bytes=store.settings.max_content_bytes)
    expected = check_expected_revisions(expected_revisions, {c.id for c in chunks})
    # One canonical JSON text per record serves both the digest and the jsonb parameter.
    call_digest = idempotency.digest({"records": [c.text for c in chunks], "expected_revisions": expected or None})
    result = {"upserted": len(chunks)}

    with store.transaction(ctx, conn) as c:
        stored = idempotency.claim(c, ctx, UPSERT_VERB, key, call_digest, result, lifetime)
        if stored is not None:
            return {"upserted": int(stored.get("upserted", len(chunks))), "replayed": True}
        if expected:
            _check_revisions(c, ctx, expected)
        revisions = _write(c, ctx, chunks)
        if expected:
            # Belt and braces against a concurrent writer between the check and the write: a
            # record expected at revision r must now be at r + 1.
            stale = [i for i, r in expected.items() if revisions.get(i) != r + 1]
            if stale:
                raise RevisionMismatch(f"{len(stale)} record(s) changed concurrently (first: id {stale[0]!r})")
    return {"upserted": len(chunks), "replayed": False}


def _check_revisions(conn: psycopg.Connection, ctx: Context, expected: dict[str, int]) -> None:
    with conn.cursor() as cur:
        cur.execute(
            "select id, revision from pymem.memories where tenant_id = %s and id = any(%s) and erased_at is null",
            (ctx.tenant, list(expected)),
        )
        current = dict(cur.fetchall())
    stale = [(i, r, current.get(i, 0)) for i, r in expected.items() if current.get(i, 0) != r]
    if stale:
        memory_id, want, have = stale[0]
        found = f"revision {have}" if have else "no such record"
        raise RevisionMismatch(
            f"{len(stale)} record(s) are not at their expected revision (first: id {memory_id!r} expected "
            f"{want}, found {found}); nothing was written"
        )


def _write(conn: psycopg.Connection, ctx: Context, chunks: list[Chunk]) -> dict[str, int]:
    revisions: dict[str, int] = {}
    with conn.cursor() as cur:
        for start in range(0, len(chunks), ROWS_PER_STATEMENT):
            part = range(start, min(start + ROWS_PER_STATEMENT, len(chunks)))
            params: list[Any] = []
            for i in part:
                ch = chunks[i]
                params += [
                    ctx.tenant, ch.id, Jsonb(ch.scope), ch.content, Jsonb(ch.text, dumps=_identity),
                    Vector(ch.embedding) if ch.embedding is not None else None, ch.origin,
                    Jsonb(ch.provenance) if ch.provenance is not None else None, ch.injection_source, ctx.adapter,
                ]
            row = "(" + ", ".join(["%s"] * len(_WRITE_COLUMNS)) + ")"
            cur.execute(
                f"insert into pymem.memories as m ({', '.join(_WRITE_COLUMNS)}) values "
                + ", ".join([row] * len(part))
                + f" on conflict (tenant_id, id) do update set {_UPDATE_SET} returning m.id, m.revision",
                params,
            )
            revisions.update(cur.fetchall())
    return revisions


# -- search -------------------------------------------------------------------------------------

def search(store: "Store", ctx: Context, vector: Any, *, top_k: Any, scope_filter: Any = None,
           metadata_filter: Any = None, include: Any = None, fidelity_target: Any = None,
           conn: psycopg.Connection | None = None) -> list[dict[str, Any]]:
    top_k = check_top_k(top_k)
    scope = check_scope_filter(scope_filter)
    check_metadata_filter(metadata_filter)
    options = check_include(include)
    if fidelity_target is not None:
        raise InvalidArguments("fidelity_target is not supported: search is exact or HNSW with recall >= 0.95")
    query = check_embedding(vector, store.embedding_dim, "vector")
    rows = _search(store, ctx, query, top_k, scope, include_superseded=options["superseded"],
                       with_vectors=options["embedding"], conn=conn)
    return contract_hits(rows)


def _search(store: "Store", ctx: Context, query: list[float], top_k: int, scope: dict[str, str], *,
                include_superseded: bool = False, with_vectors: bool = True,
                conn: psycopg.Connection | None = None) -> list[dict[str, Any]]:
    """Validated input in, pymem.search rows out. On a pooled connection, one autocommit
    statement that sets the context and searches (one round trip instead of four); inside a
    caller's transaction, a savepoint."""
    kwargs = dict(include_superseded=include_superseded, with_vectors=with_vectors)
    if conn is not None:
        with db.transaction(conn, ctx):
            return run_search(conn, query, top_k, scope, **kwargs)
    with store.pool.connection() as c:
        return run_search_as(c, ctx, query, top_k, scope, **kwargs)


# -- get / get_many / delete_many ---------------------------------------------------------------

_FETCH = """
select id, record, revision, content, scope, kind, tags, origin, provenance, injection_source,
       case when record is null then embedding end as embedding
  from pymem.memories
 where tenant_id = %s and id = any(%s) and erased_at is null
"""


def _fetch(store: "Store", ctx: Context, ids: list[str], conn: psycopg.Connection | None) -> dict[str, dict]:
    if not ids:
        return {}
    with store.transaction(ctx, conn) as c, c.cursor(row_factory=dict_row) as cur:
        cur.execute(_FETCH, (ctx.tenant, ids))
        rows = cur.fetchall()
    found = {}
    for row in rows:
        record = dict(chunk_from_row(row))
        record["revision"] = row["revision"]
        found[row["id"]] = record
    return found


def get(store: "Store", ctx: Context, memory_id: Any, *, conn: psycopg.Connection | None = None) -> dict | None:
    memory_id = check_id(memory_id)
    return _fetch(store, ctx, [memory_id], conn).get(memory_id)


def get_many(store: "Store", ctx: Context, ids: Any, *, conn: psycopg.Connection | None = None) -> list[dict]:
    ids = check_ids(ids)
    if len(ids) > MAX_IDS:
        raise InvalidArguments(f"at most {MAX_IDS} ids per call, got {len(ids)}")
    found = _fetch(store, ctx, list(dict.fromkeys(ids)), conn)
    # each a fresh copy, so a caller mutating one result does not change another
    return [dict(found[i]) for i in ids if i in found]


def delete_many(store: "Store", ctx: Context, ids: Any, *, conn: psycopg.Connection | None = None) -> dict[str, int]:
    ids = check_ids(ids)
    if len(ids) > MAX_IDS:
        raise InvalidArguments(f"at most {MAX_IDS} ids per call, got {len(ids)}")
    ids = list(dict.fromkeys(ids))
    if not ids:
        return {"deleted": 0}
    with store.transaction(ctx, conn) as c, c.cursor() as cur:
        cur.execute("select count(*) from pymem.memories where tenant_id = %s and id = any(%s)", (ctx.tenant, ids))
        visible = cur.fetchone()[0]
        cur.execute(
            "delete from pymem.memories where tenant_id = %s and id = any(%s) returning erased_at is null",
            (ctx.tenant, ids),
        )
        deleted = [r[0] for r in cur.fetchall()]
        if len(deleted) < visible:
            # RLS hides nothing here but lets an adapter delete only its own rows: say so, and
            # roll the whole batch back rather than delete part of it.
            raise AccessDenied(f"{visible - len(deleted)} of the records may not be deleted in this context "
                               "(an adapter deletes only its own rows); nothing was deleted")
    return {"deleted": sum(1 for live in deleted if live)}


# -- describe_store / health --------------------------------------------------------------------

def describe_store(store: "Store") -> dict[str, Any]:
    """What this store implements, and nothing more (the client gates verbs on it)."""
    from .search import INCLUDE_KEYS

    return {
        "store": "pymem",
        "verbs": ["upsert_many", "search", "get", "get_many", "delete_many", "describe_store", "health"],
        "optimistic_locking_supported": True,
        "filterable_metadata_fields": [],
        "relational_edges_supported": False,
        "atomic_supersede_supported": False,
        "transaction_supported": False,
        "embedding_dim": store.embedding_dim,
        "distance": "cosine",
        "max_top_k": MAX_TOP_K,
        "max_batch": MAX_BATCH,
        "include_keys": sorted(INCLUDE_KEYS),
        "idempotency_classes": {name: int(t.total_seconds()) for name, t in idempotency.CLASSES.items()},
    }


def _version_tuple(text: str) -> tuple[int, ...]:
    parts = []
    for piece in text.split("."):
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def health(store: "Store") -> dict[str, Any]:
    """Database reachable, its version, pgvector >= 0.8.3 (iterative scans), schema at head."""
    head = migrate.head_revision()
    report: dict[str, Any] = {
        "ok": False,
        "database": {"reachable": False},
        "pgvector": {"required": ".".join(map(str, MIN_PGVECTOR))},
        "schema": {"head": head},
        "embedding_dim": store.embedding_dim,
    }
    try:
        with store.pool.connection() as c:
            server = c.info.server_version
            ext = c.execute("select extversion from pg_extension where extname = 'vector'").fetchone()
            current = migrate.current_revision(c)
            c.rollback()
    except Exception as exc:  # health reports, it does not raise
        report["database"]["error"] = type(exc).__name__
        return report
    report["database"] = {"reachable": True, "server_version": f"{server // 10000}.{server % 10000}"}
    version = ext[0] if ext else None
    report["pgvector"].update(version=version, ok=bool(version) and _version_tuple(version) >= MIN_PGVECTOR)
    report["schema"].update(revision=current, current=current == head)
    report["ok"] = report["pgvector"]["ok"] and report["schema"]["current"]
    return report


__all__ = ["upsert_many", "search", "get", "get_many", "delete_many", "describe_store", "health",
           "check_records", "check_expected_revisions", "MAX_BATCH", "MAX_IDS"]
