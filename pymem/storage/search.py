"""Cosine search: argument checks, the call to the pymem.search SQL function, and its rows.

The plan choice (exact or iterative HNSW), tenant and scope isolation and the completeness of
top_k all live in pymem.search (sql/schema.sql); this module validates input, calls it, and
shapes rows. `search_rows` returns SearchHit values (every column of pymem.search_hit, by
name); `contract_hits` turns them into the storage contract's result shape.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import psycopg
from pgvector import Vector
from psycopg.rows import class_row
from psycopg.types.json import Jsonb

from .. import db, queries
from ..context import Context, check_scope
from ..embedder import RANK_FUSION
from ..errors import ContextError, InvalidArguments
from ..vocabulary import MAX_TOP_K
from .chunks import chunk_from_row, recalled_view
from .validate import check_embedding

PLANS = ("auto", "exact", "hnsw")
INCLUDE_KEYS = {
    "embedding": "keep the chunk's embedding/vector keys in returned chunks (default true)",
    "superseded": "also return superseded rows, whose invalidated_at is set (default false)",
}


@dataclass(frozen=True)
class SearchHit:
    """One row of pymem.search: the columns of the SQL type pymem.search_hit, by name (a column
    added in SQL only is an error here, and tests/db/test_sql_contract.py names it)."""

    id: str
    record: Any
    content: str | None
    kind: str
    tags: list[str]
    scope: dict[str, str]
    origin: str | None
    provenance: Any
    confidence: float | None
    source_adapter: str | None
    injection_source: str | None
    policy_fingerprint: str | None
    created_at: _dt.datetime
    revision: int
    score: float


def check_top_k(top_k: Any) -> int:
    if isinstance(top_k, bool) or not isinstance(top_k, int):
        raise InvalidArguments(f"top_k must be an integer, got {type(top_k).__name__}")
    if not 1 <= top_k <= MAX_TOP_K:
        raise InvalidArguments(f"top_k must be between 1 and {MAX_TOP_K}, got {top_k}")
    return top_k


def check_scope_filter(scope_filter: Any) -> dict[str, str]:
    if scope_filter is None:
        return {}
    try:
        return check_scope(scope_filter, "scope_filter")
    except ContextError as exc:
        raise InvalidArguments(str(exc)) from None


def check_include(include: Any) -> dict[str, bool]:
    """`include` options: {"embedding": bool, "superseded": bool}; anything else is refused."""
    options = {"embedding": True, "superseded": False}
    if include is None:
        return options
    if not isinstance(include, Mapping):
        raise InvalidArguments(f"include must be an object, got {type(include).__name__}")
    unknown = sorted(str(k) for k in include if k not in INCLUDE_KEYS)
    if unknown:
        raise InvalidArguments(f"unknown include keys: {', '.join(unknown)}; known: {', '.join(INCLUDE_KEYS)}")
    for key, value in include.items():
        if not isinstance(value, bool):
            raise InvalidArguments(f"include[{key!r}] must be true or false")
        options[key] = value
    return options


def check_metadata_filter(metadata_filter: Any) -> None:
    """No metadata field is filterable (describe_store advertises none), so any filter is refused."""
    if metadata_filter is None:
        return
    if not isinstance(metadata_filter, Mapping):
        raise InvalidArguments(f"metadata_filter must be an object, got {type(metadata_filter).__name__}")
    if metadata_filter:
        raise InvalidArguments("metadata_filter is not supported: this store advertises no filterable metadata fields")


MAX_TEXT_CHARS = 10_000


def check_text_query(text: Any) -> str | None:
    """A hybrid search's query text: None (vectors only) or a non-blank string (the SQL reads
    its first MAX_TEXT_CHARS characters)."""
    if text is None:
        return None
    if not isinstance(text, str):
        raise InvalidArguments(f"the query text must be a string, got {type(text).__name__}")
    if "\x00" in text:
        raise InvalidArguments("the query text contains a NUL byte")
    return text[:MAX_TEXT_CHARS] if text.strip() else None


def search_rows(conn: psycopg.Connection, ctx: Context, vector: Any, top_k: Any,
                scope_filter: Mapping[str, str] | None = None, *, dim: int | None = None,
                include_superseded: bool = False, with_vectors: bool = True,
                plan: str = "auto", text: str | None = None,
                fusion: tuple[float, float | None] = RANK_FUSION) -> list[SearchHit]:
    """The top_k rows visible to `ctx` closest to `vector` by cosine, best first; with `text`
    (the query's words) the hybrid ranking: the vector ranking fused with a BM25 ranking of
    `text` inside pymem.search, as `fusion` says (text weight, rank constant:
    pymem.embedder.hybrid_fusion_of; a rank constant of None fuses by score).

    Each hit has the columns of pymem.search_hit (score = 1 - cosine distance, plus, fused by
    score, the text weight x the hit's share of the best BM25 score; the list is in ranking
    order). Runs in a transaction of its own on `conn`, or as a savepoint when `conn` is already
    in one. `dim` defaults to the store's (read once per call). `plan` forces "exact" or "hnsw"
    (tests, benchmarks); "auto" lets pymem.search choose.
    """
    if plan not in PLANS:
        raise InvalidArguments(f"plan must be one of {', '.join(PLANS)}")
    text = check_text_query(text)
    top_k = check_top_k(top_k)
    scope_filter = check_scope_filter(scope_filter)
    if dim is None:
        with db.translate_errors():
            dim = db.one(conn.execute(queries.query("store_embedding_dim")).fetchone())[0]
    query = check_embedding(vector, dim, "vector")
    with db.transaction(conn, ctx):
        return run_search(conn, query, top_k, scope_filter, include_superseded=include_superseded,
                          with_vectors=with_vectors, plan=plan, text=text, fusion=fusion)


def run_search(conn: psycopg.Connection, query: list[float], top_k: int, scope_filter: dict[str, str], *,
               include_superseded: bool, with_vectors: bool, plan: str = "auto",
               text: str | None = None, fusion: tuple[float, float | None] = RANK_FUSION) -> list[SearchHit]:
    """Call pymem.search on a connection whose transaction already carries the context (input
    already validated). prepare=False: the call itself is trivial to plan, and a server-side
    prepared statement would buy nothing."""
    with conn.cursor(row_factory=class_row(SearchHit)) as cur:
        cur.execute(queries.query("search"),
                    (Vector(query), top_k, Jsonb(scope_filter), include_superseded, with_vectors, plan, text, *fusion),
                    prepare=False)
        return cur.fetchall()


def session_search_rows(conn: psycopg.Connection, session_id: str, query: list[float], top_k: int, *,
                        plan: str = "auto", text: str | None = None,
                        fusion: tuple[float, float | None] = RANK_FUSION) -> list[SearchHit]:
    """pymem.session_search on a connection whose transaction already carries the context (input
    already validated): the top_k memories session `session_id` receives (those of its scope and
    its ancestors') closest to `query`, best first. With `text` (check_text_query), the hybrid
    ranking (pymem.session_search_hybrid: the vector ranking fused with the text's BM25 ranking
    over the same rows as `fusion` says, as search_rows fuses them). Nothing when the context
    cannot see the session."""
    if plan not in PLANS:
        raise InvalidArguments(f"plan must be one of {', '.join(PLANS)}")
    text = check_text_query(text)
    with db.translate_errors(), conn.cursor(row_factory=class_row(SearchHit)) as cur:
        if text is None:
            cur.execute(queries.query("session_search"), (session_id, Vector(query), top_k, plan), prepare=False)
        else:
            cur.execute(queries.query("session_search_hybrid"), (session_id, Vector(query), text, top_k, plan, *fusion),
                        prepare=False)
        return cur.fetchall()


_FALLBACK = ("content", "scope", "kind", "tags", "origin", "provenance", "injection_source")


def search_chunks_as(conn: psycopg.Connection, ctx: Context, query: list[float], top_k: int,
                     scope_filter: dict[str, str], *, include_superseded: bool,
                     with_vectors: bool) -> list[dict[str, Any]]:
    """Memories.search on an idle pooled connection: one autocommit statement that sets the
    context and searches (pymem.search_as), returning the storage contract's hits. Only what a
    hit needs crosses the wire, as plain rows, and the statement is prepared (its plan is a
    function scan; the searches inside keep the plans pymem.search pins), unless the connection
    prepares nothing (behind a transaction-mode pooler). `conn` is left as it
    was found."""
    with db.translate_errors():
        autocommit = conn.autocommit
        conn.autocommit = True
        try:
            with conn.cursor() as cur:
                cur.execute(queries.query("search_as_chunks"),
                            (*ctx.params(), Vector(query), top_k, Jsonb(scope_filter), include_superseded,
                             with_vectors), prepare=conn.prepare_threshold is not None)
                rows = cur.fetchall()
        finally:
            if not conn.closed:
                conn.autocommit = autocommit
    hits = []
    for chunk_id, record, score, revision, *fallback in rows:
        chunk = record if record is not None else chunk_from_row(dict(zip(_FALLBACK, fallback, strict=False),
                                                                      id=chunk_id))
        distillate = chunk.get("distillate")
        hits.append({"chunk": chunk, "chunk_id": chunk_id, "score": score,
                     "recalled_view": distillate if distillate is not None else chunk, "revision": revision})
    return hits


def search_hits_as(conn: psycopg.Connection, ctx: Context, query: list[float], top_k: int,
                   scope_filter: dict[str, str]) -> list[SearchHit]:
    """search_chunks_as, returning whole SearchHit rows (records without vectors): for a reader
    that judges each row itself (the LangGraph store). `conn` is left as it was found."""
    with db.translate_errors():
        autocommit = conn.autocommit
        conn.autocommit = True
        try:
            with conn.cursor(row_factory=class_row(SearchHit)) as cur:
                cur.execute(queries.query("search_as_hits"),
                            (*ctx.params(), Vector(query), top_k, Jsonb(scope_filter)), prepare=True)
                return cur.fetchall()
        finally:
            if not conn.closed:
                conn.autocommit = autocommit


def contract_hits(rows: list[SearchHit]) -> list[dict[str, Any]]:
    """Hits as the storage contract returns them: {chunk, chunk_id, score, recalled_view, revision}."""
    hits = []
    for row in rows:
        chunk = chunk_from_row(vars(row))
        hits.append({
            "chunk": chunk,
            "chunk_id": row.id,
            "score": float(row.score),
            "recalled_view": recalled_view(chunk),
            "revision": row.revision,
        })
    return hits


__all__ = ["MAX_TOP_K", "MAX_TEXT_CHARS", "check_text_query", "PLANS", "INCLUDE_KEYS", "SearchHit", "check_top_k",
           "check_scope_filter", "check_include",
           "check_metadata_filter", "search_rows", "run_search", "session_search_rows", "search_chunks_as",
           "search_hits_as", "contract_hits"]
