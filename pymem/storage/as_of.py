"""Search as of a past time: what was believed then (pymem.search_as_of, sql/schema.sql).

A row counts at time t if it had been written by t (`created_at`), was valid from t or earlier
(`valid_from`), had not been superseded by t (`invalidated_at` later than t, or never), and has
not been erased since (erased content is gone for every question, past ones included). The
search is exact: questions about the past are rare, and their answer must be complete.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping
from typing import Any

import psycopg
from pgvector import Vector
from psycopg.rows import class_row
from psycopg.types.json import Jsonb

from .. import db, queries
from ..context import Context
from ..errors import InvalidArguments
from .search import SearchHit, check_scope_filter, check_top_k
from .validate import check_embedding

__all__ = ["check_as_of", "search_rows_as_of"]


def check_as_of(value: Any) -> _dt.datetime:
    """A datetime or an ISO 8601 string; naive means UTC."""
    if isinstance(value, str):
        try:
            value = _dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            raise InvalidArguments(f"as_of must be an ISO 8601 time, got {value[:40]!r}") from None
    if not isinstance(value, _dt.datetime):
        raise InvalidArguments(f"as_of must be a datetime or an ISO 8601 string, not {type(value).__name__}")
    return value if value.tzinfo else value.replace(tzinfo=_dt.UTC)


def search_rows_as_of(conn: psycopg.Connection, ctx: Context, vector: Any, top_k: Any, as_of: Any,
                      scope_filter: Mapping[str, str] | None = None, *, dim: int) -> list[SearchHit]:
    """The top_k rows visible to `ctx` that were believed at `as_of`, closest to `vector` first."""
    top_k = check_top_k(top_k)
    when = check_as_of(as_of)
    scope = check_scope_filter(scope_filter)
    query = check_embedding(vector, dim, "vector")
    with db.transaction(conn, ctx), conn.cursor(row_factory=class_row(SearchHit)) as cur:
        cur.execute(queries.query("search_as_of"), (Vector(query), top_k, when, Jsonb(scope)), prepare=False)
        return cur.fetchall()
