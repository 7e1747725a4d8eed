"""Injection records: what each delivered turn contained, and which turns a memory entered.

Every delivery for a session's turn appends one `delivery.injected` event to the tenant's hash chain
(pymem.record_injection, sql/schema.sql): the session, the turn, the ids of every memory in the block (the hot
ones named again), the other sessions its digest listed, the sha256 of the delivered text, its token count,
budget and truncation, the counter's name, the admission policy's and trust tiers' fingerprints, and which of
the memories were lessons of earlier tasks. Never the text: the ids lead to the rows and the digest proves
which text it was. The views pymem.audit_injections and pymem.memory_injections read the records back; an
auditor login reads every tenant's.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, cast

import psycopg
from psycopg.rows import class_row

from .. import db, queries
from ..errors import InvalidArguments
from ..storage.validate import check_id

if TYPE_CHECKING:  # pragma: no cover
    from ..storage.memories import Memories

__all__ = ["Injection", "MemoryInjection", "record_injection", "session_injections", "memory_injections",
           "last_turn"]


@dataclass(frozen=True)
class Injection:
    """One row of pymem.audit_injections (by column name)."""

    tenant_id: str
    seq: int
    occurred_at: _dt.datetime
    actor: str | None
    adapter: str | None
    session_id: str
    turn: int
    memory_ids: list[str]
    hot_ids: list[str]
    digest_sessions: list[str]
    block_sha256: str
    tokens: int
    budget: int
    truncated: int
    counter: str
    policy_fingerprint: str | None
    tiers_fingerprint: str | None
    lesson_ids: list[str]

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "occurred_at": self.occurred_at.isoformat()}


@dataclass(frozen=True)
class MemoryInjection:
    """One row of pymem.memory_injections: a turn one memory entered, and in which section."""

    tenant_id: str
    memory_id: str
    seq: int
    occurred_at: _dt.datetime
    session_id: str
    turn: int
    section: str

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "occurred_at": self.occurred_at.isoformat()}


def record_injection(conn: psycopg.Connection, *, session_id: str, turn: int, memory_ids: Sequence[str],
                     hot_ids: Sequence[str], digest_sessions: Sequence[str], block_sha256: str, tokens: int,
                     budget: int, truncated: int, counter: str, policy_fingerprint: str | None,
                     tiers_fingerprint: str | None, lesson_ids: Sequence[str] = ()) -> int:
    """Chain the record on `conn` (whose transaction carries the context); returns its seq."""
    row = conn.execute(queries.query("record_injection"),
                       (session_id, turn, list(memory_ids), list(hot_ids), list(digest_sessions), block_sha256,
                        tokens, budget, truncated, counter, policy_fingerprint, tiers_fingerprint,
                        list(lesson_ids))).fetchone()
    return int(db.one(row)[0])


def last_turn(conn: psycopg.Connection, tenant: str, session_id: str) -> int | None:
    """The highest turn recorded for the session in this context, None when none."""
    return cast("int | None",
                db.one(conn.execute(queries.query("last_injected_turn"), (tenant, session_id)).fetchone())[0])


def _check_turn(turn: Any) -> int | None:
    if turn is None:
        return None
    if isinstance(turn, bool) or not isinstance(turn, int) or turn < 0:
        raise InvalidArguments("turn must be a non-negative integer")
    return turn


def session_injections(memories: Memories, session_id: str, *, turn: int | None = None, all_turns: bool = False,
                       conn: psycopg.Connection | None = None) -> list[Injection]:
    """What a session's turn had injected: the records of `turn`, else (by default) of the last
    recorded turn, else with `all_turns` every record; oldest first."""
    check_id(session_id, "session id")
    turn = _check_turn(turn)
    if turn is not None and all_turns:
        raise InvalidArguments("give a turn or all_turns, not both")
    tenant = memories.ctx.tenant
    with memories.store.transaction(memories.ctx, conn) as c, c.cursor(row_factory=class_row(Injection)) as cur:
        if turn is None and not all_turns:
            turn = last_turn(c, tenant, session_id)
            if turn is None:
                return []
        cur.execute(queries.query("session_injections"), (tenant, session_id, turn, turn))
        return cast("list[Injection]", cur.fetchall())


def memory_injections(memories: Memories, memory_id: str, *,
                      conn: psycopg.Connection | None = None) -> list[MemoryInjection]:
    """Every turn (of any session in this context) that a memory entered, oldest first."""
    check_id(memory_id, "memory id")
    with memories.store.transaction(memories.ctx, conn) as c, c.cursor(row_factory=class_row(MemoryInjection)) as cur:
        cur.execute(queries.query("memory_injections"), (memories.ctx.tenant, memory_id))
        return cast("list[MemoryInjection]", cur.fetchall())
