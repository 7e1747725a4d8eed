"""Reading the ledger's audit trail: admission refusals, and how a memory got here.

`refusals` and `history` read the `pymem.audit_refusals` and `pymem.memory_history` views for the
context tenant and return typed values built from the views' columns by name; an auditor login
reads the same views across tenants in plain SQL (see the README, "The audit in SQL"). Recording
a refusal is the write gate's (pymem.admission.refusals). Nothing here returns content.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, cast

import psycopg
from psycopg.rows import class_row

from .. import queries
from ..errors import InvalidArguments
from ..storage.validate import check_id

if TYPE_CHECKING:  # pragma: no cover
    from ..storage.memories import Memories

__all__ = ["Refusal", "HistoryEvent", "refusals", "history"]


@dataclass(frozen=True)
class Refusal:
    """One row of pymem.audit_refusals: who, which origin and tool, why, and a digest (never content);
    for a refusal by the classifier, its score and the digest of the piece of the note that decided."""

    tenant_id: str
    seq: int
    occurred_at: _dt.datetime
    actor: str | None
    adapter: str | None
    origin: str | None
    tool: str | None
    reason: str | None
    signature: str | None
    args_digest: str | None
    policy_fingerprint: str | None
    score: float | None = None
    piece_digest: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "occurred_at": self.occurred_at.isoformat()}


@dataclass(frozen=True)
class HistoryEvent:
    """One row of pymem.memory_history: a ledger event of a memory, with the memory's current
    origin and provenance (content_hash as hex)."""

    tenant_id: str
    memory_id: str
    seq: int
    event: str
    occurred_at: _dt.datetime
    actor: str | None
    adapter: str | None
    revision: int | None
    content_hash: str | None
    origin: str | None
    provenance: dict[str, Any] | None
    source_adapter: str | None
    policy_fingerprint: str | None
    confidence: float | None
    injection_source: str | None
    kind: str | None
    memory_created_at: _dt.datetime | None
    current_revision: int | None
    invalidated_at: _dt.datetime | None
    superseded_by: str | None
    erased_at: _dt.datetime | None

    def __post_init__(self) -> None:
        if isinstance(self.content_hash, (bytes, bytearray, memoryview)):
            object.__setattr__(self, "content_hash", bytes(self.content_hash).hex())

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _since(value: Any) -> _dt.datetime | None:
    if value is None:
        return None
    if isinstance(value, _dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=_dt.UTC)
    if isinstance(value, str):
        try:
            parsed = _dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            raise InvalidArguments(f"since must be an ISO 8601 time, got {value[:40]!r}") from None
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=_dt.UTC)
    raise InvalidArguments(f"since must be a datetime or an ISO 8601 string, not {type(value).__name__}")


def refusals(memories: Memories, *, since: Any = None, limit: int | None = 1000,
             conn: psycopg.Connection | None = None) -> list[Refusal]:
    """The context tenant's refusals (pymem.audit_refusals), oldest first: the most recent
    `limit` of those at or after `since` (a datetime or ISO 8601 string; naive means UTC)."""
    when = _since(since)
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise InvalidArguments("limit must be a positive integer")
    with memories.store.transaction(memories.ctx, conn) as c, c.cursor(row_factory=class_row(Refusal)) as cur:
        cur.execute(queries.query("refusals"), (memories.ctx.tenant, when, when, limit))
        return cast("list[Refusal]", cur.fetchall())


def history(memories: Memories, memory_id: str, *, conn: psycopg.Connection | None = None) -> list[HistoryEvent]:
    """How a memory got here: its ledger events, oldest first, each with the memory's current
    origin, provenance, source adapter and policy fingerprint (pymem.memory_history). No content."""
    check_id(memory_id)
    with memories.store.transaction(memories.ctx, conn) as c, c.cursor(row_factory=class_row(HistoryEvent)) as cur:
        cur.execute(queries.query("memory_history"), (memories.ctx.tenant, memory_id))
        return cast("list[HistoryEvent]", cur.fetchall())
