"""Reading a session's row: what the write gate and the delivery layer need to know before they
name a session (does it exist for this context, is it incognito).

Sessions are written and listed by pymem.delivery.sessions; the rules that guard them (times,
immutable identity, incognito keeping nothing, the ledger events) live in Postgres
(sql/schema.sql, pymem.sessions and its triggers).
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.rows import class_row

from .. import queries

__all__ = ["SessionRow", "session_row"]


@dataclass(frozen=True)
class SessionRow:
    """One row of pymem.sessions, by column name (tests/db/test_sql_contract.py compares them)."""

    tenant_id: str
    id: str
    scope: dict[str, Any]
    source_adapter: str | None
    surface: str
    incognito: bool
    topic: str | None
    summary: str | None
    started_at: _dt.datetime
    ended_at: _dt.datetime | None
    erased_at: _dt.datetime | None


def session_row(conn: psycopg.Connection, tenant: str, session_id: str) -> SessionRow | None:
    """The session as the connection's context sees it (row-level security), or None: a session
    of another tenant, scope or excluded adapter is unknown here, as it is to the database."""
    with conn.cursor(row_factory=class_row(SessionRow)) as cur:
        cur.execute(queries.query("session_row"), (tenant, session_id))
        return cur.fetchone()
