"""The audit of admission refusals: recording them durably, and reading them back.

Why a transaction of its own. A refusal is evidence that something tried to plant a memory. If it
were written in the caller's transaction, a caller that rolls back (or swallows the exception
and rolls back later) would erase the evidence along with its own work. So `record_refusal`
takes its own pooled connection, appends the event to the tenant's hash chain through
`pymem.record_refusal` (SQL), and commits before it returns; only then does the write gate raise.

What is recorded. The decision, the action class (`memory.persist`), the writing tool
(`memory.write:<source>`), origin, adapter, actor, the reason, the detector signature if one
matched, the admission policy's fingerprint, and `sha256:` of the canonical JSON of the
arguments. Never the content: an audit trail that quotes a poisoned note has copied the poison
somewhere else. The SQL function checks the shapes again (a digest must look like one, a reason
is short, no control characters), because the app role can call it directly.

Reading. `refusals` and `history` read the `pymem.audit_refusals` and `pymem.memory_history`
views for the context tenant; an auditor login reads the same views across tenants in plain SQL
(see the README, "The audit in SQL").
"""

from __future__ import annotations

import datetime as _dt
import logging
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import errors as pgerr
from psycopg.rows import dict_row

from .. import db
from ..admission.signatures import instruction_shaped
from ..errors import InvalidArguments, ServerError
from ..storage.validate import check_id

if TYPE_CHECKING:  # pragma: no cover
    from ..context import Context
    from ..storage.store import Memories, Store

__all__ = ["record_refusal", "refusals", "history", "REFUSAL_COLUMNS", "HISTORY_COLUMNS", "LOCK_TIMEOUT",
           "MAX_SOURCE", "MAX_REASON"]

log = logging.getLogger(__name__)

#: How long a refusal waits for its tenant's chain-head lock before giving up with a clear error
#: instead of hanging (a caller holding that lock in another open transaction would otherwise
#: wait on us forever, and we on it).
LOCK_TIMEOUT = "10s"
#: Limits enforced by pymem.record_refusal (sql/schema.sql).
MAX_SOURCE = 200
MAX_REASON = 300

REFUSAL_COLUMNS = ("tenant_id", "seq", "occurred_at", "actor", "adapter", "origin", "tool", "reason", "signature",
                   "args_digest", "policy_fingerprint")
HISTORY_COLUMNS = ("tenant_id", "memory_id", "seq", "event", "occurred_at", "actor", "adapter", "revision",
                   "content_hash", "origin", "provenance", "source_adapter", "policy_fingerprint", "confidence",
                   "injection_source", "kind", "memory_created_at", "current_revision", "invalidated_at",
                   "superseded_by", "erased_at")


def _clean(text: str, limit: int) -> str:
    """One line of at most `limit` characters: control characters become spaces."""
    text = " ".join("".join(" " if ord(c) < 32 or 127 <= ord(c) < 160 else c for c in text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def audit_source(source: str | None) -> str | None:
    """The provenance source as the audit may record it: short, one line, and never itself
    instruction-shaped (a refused note's source can be part of the payload)."""
    if source is None:
        return None
    cleaned = _clean(source, MAX_SOURCE)
    if not cleaned:
        return None
    if instruction_shaped(source) is not None:
        return "redacted"
    return cleaned


def record_refusal(store: "Store", ctx: "Context", *, origin: str, source: str | None, reason: str,
                   signature: str | None, digest: str, policy_fingerprint: str | None) -> int:
    """Append an `admission.refused` event to the context tenant's chain and COMMIT it, on a
    pooled connection and in a transaction of its own. Returns the event's ledger seq."""
    args = (origin, audit_source(source), _clean(reason, MAX_REASON) or "refused", signature, digest,
            policy_fingerprint)
    try:
        with store.pool.connection() as conn:
            with db.transaction(conn, ctx):
                conn.execute("select set_config('lock_timeout', %s, true)", (LOCK_TIMEOUT,))
                seq = conn.execute("select pymem.record_refusal(%s, %s, %s, %s, %s, %s)", args).fetchone()[0]
    except pgerr.LockNotAvailable as exc:
        raise ServerError(
            f"could not record the refusal's audit event within {LOCK_TIMEOUT}: tenant {ctx.tenant}'s chain is "
            "locked by another open transaction (one that already wrote to this tenant, perhaps the caller's own)"
        ) from exc
    except ServerError as exc:
        if isinstance(exc.__cause__, pgerr.LockNotAvailable):
            raise ServerError(
                f"could not record the refusal's audit event within {LOCK_TIMEOUT}: tenant {ctx.tenant}'s chain "
                "is locked by another open transaction (one that already wrote to this tenant, perhaps the "
                "caller's own)") from exc
        raise
    log.info("admission refused: tenant=%s origin=%s signature=%s audit_seq=%s digest=%s",
             ctx.tenant, origin, signature, seq, digest)
    return int(seq)


def _since(value: Any) -> _dt.datetime | None:
    if value is None:
        return None
    if isinstance(value, _dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=_dt.timezone.utc)
    if isinstance(value, str):
        try:
            parsed = _dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            raise InvalidArguments(f"since must be an ISO 8601 time, got {value[:40]!r}") from None
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=_dt.timezone.utc)
    raise InvalidArguments(f"since must be a datetime or an ISO 8601 string, not {type(value).__name__}")


def refusals(memories: "Memories", *, since: Any = None, limit: int | None = 1000,
             conn: psycopg.Connection | None = None) -> list[dict[str, Any]]:
    """The context tenant's refusals (pymem.audit_refusals), oldest first: the most recent
    `limit` of those at or after `since` (a datetime or ISO 8601 string; naive means UTC)."""
    when = _since(since)
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise InvalidArguments("limit must be a positive integer")
    sql = (f"select {', '.join(REFUSAL_COLUMNS)} from ("
           f" select {', '.join(REFUSAL_COLUMNS)} from pymem.audit_refusals"
           " where tenant_id = %s and (%s::timestamptz is null or occurred_at >= %s::timestamptz)"
           " order by seq desc limit %s) r order by seq")
    with memories.store.transaction(memories.ctx, conn) as c, c.cursor(row_factory=dict_row) as cur:
        cur.execute(sql, (memories.ctx.tenant, when, when, limit))
        return cur.fetchall()


def history(memories: "Memories", memory_id: str, *, conn: psycopg.Connection | None = None) -> list[dict[str, Any]]:
    """How a memory got here: its ledger events, oldest first, each with the memory's current
    origin, provenance, source adapter and policy fingerprint (pymem.memory_history). No content."""
    check_id(memory_id)
    sql = (f"select {', '.join(HISTORY_COLUMNS)} from pymem.memory_history"
           " where tenant_id = %s and memory_id = %s order by seq")
    with memories.store.transaction(memories.ctx, conn) as c, c.cursor(row_factory=dict_row) as cur:
        cur.execute(sql, (memories.ctx.tenant, memory_id))
        rows = cur.fetchall()
    for row in rows:
        if row["content_hash"] is not None:
            row["content_hash"] = bytes(row["content_hash"]).hex()
    return rows
