"""Retention: a memory's time-to-live, the tenant's policy, and the purge of expired memories.

A writer names a ttl (seconds) on a write, or leaves it to the tenant's default; the database
turns it into `expires_at` with its own clock at every write (pymem._memories_expiry), within the
tenant's maximum, which no writer can exceed. An expired memory is gone for every read at once
(the read policy, and the definer reads that apply it themselves); `purge_expired` deletes it,
one chained memory.delete event each, so verification stays clean. The policy is an operator's
(an untagged, whole-tenant context); purging is anyone's in their own reach (row-level security
lets an adapter purge only its own rows), and `pymem.purge_expired_all()` is the SQL function a
scheduler (pg_cron) calls for every tenant.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import psycopg

from .. import db, queries
from ..errors import InvalidArguments
from .validate import check_ids, check_ttl

if TYPE_CHECKING:  # pragma: no cover
    from .memories import Memories
    from .store import Store

__all__ = ["RetentionPolicy", "retention_policy", "set_retention", "purge_expired", "purge_expired_all",
           "refresh_expiry", "PURGE_BATCH"]

#: Expired memories deleted per transaction by `purge_expired` (it runs as many as it takes).
PURGE_BATCH = 10_000


@dataclass(frozen=True)
class RetentionPolicy:
    """A tenant's retention policy: the ttl of a memory whose writer names none (None: it never
    expires, unless a maximum is set, which then applies) and the longest ttl a writer may name."""

    default_ttl: timedelta | None
    max_ttl: timedelta | None
    set_at: datetime
    set_by: str

    def to_json(self) -> dict[str, Any]:
        return {"default_ttl_seconds": _seconds(self.default_ttl), "max_ttl_seconds": _seconds(self.max_ttl),
                "set_at": self.set_at.isoformat(), "set_by": self.set_by}


def _seconds(value: timedelta | None) -> float | None:
    return None if value is None else value.total_seconds()


def retention_policy(memories: Memories, *, conn: psycopg.Connection | None = None) -> RetentionPolicy | None:
    """The context tenant's retention policy, or None when it has none."""
    with memories.store.transaction(memories.ctx, conn) as c:
        row = c.execute(queries.query("retention_policy"), (memories.ctx.tenant,)).fetchone()
    return None if row is None else RetentionPolicy(*row)


def set_retention(memories: Memories, *, default_ttl: float | timedelta | None = None,
                  max_ttl: float | timedelta | None = None, conn: psycopg.Connection | None = None) -> int:
    """Set the context tenant's default and maximum ttl (seconds or timedeltas; both None removes
    the policy); returns the ledger seq of the retention.set event. An operator's act: AccessDenied
    for a context acting as an adapter or confined to a scope. Rows already written keep their
    expiry until their next write."""
    default, maximum = check_ttl(default_ttl, "default_ttl"), check_ttl(max_ttl, "max_ttl")
    if default is not None and maximum is not None and default > maximum:
        raise InvalidArguments("the default ttl must not exceed the maximum")
    with memories.store.transaction(memories.ctx, conn) as c:
        return int(c.execute(queries.query("set_retention"), (default, maximum)).fetchone()[0])


def purge_expired(memories: Memories, *, batch: int = PURGE_BATCH) -> int:
    """Delete every expired memory this context may delete (its tenant's, or an adapter's own), in
    transactions of `batch` rows, each row a chained memory.delete event; returns how many."""
    if isinstance(batch, bool) or not isinstance(batch, int) or not 1 <= batch <= 100_000:
        raise InvalidArguments("batch must be an integer between 1 and 100000")
    total = 0
    while True:
        with memories.store.transaction(memories.ctx) as c:
            purged = int(c.execute(queries.query("purge_expired"), (batch,)).fetchone()[0])
        total += purged
        if purged < batch:
            return total


def purge_expired_all(store: Store, *, batch: int = PURGE_BATCH) -> dict[str, int]:
    """Every tenant's expired memories, on the administrative connection (what a scheduler's call
    of pymem.purge_expired_all() does); {tenant: memories purged}."""
    if isinstance(batch, bool) or not isinstance(batch, int) or not 1 <= batch <= 100_000:
        raise InvalidArguments("batch must be an integer between 1 and 100000")
    totals: dict[str, int] = {}
    with db.translate_errors(), store.admin_connection() as conn:
        while True:
            rows = conn.execute(queries.query("purge_expired_all"), (batch,)).fetchall()
            conn.commit()
            for tenant, purged in rows:
                totals[tenant] = totals.get(tenant, 0) + int(purged)
            if all(int(purged) < batch for _, purged in rows):
                return totals


def refresh_expiry(memories: Memories, ids: Sequence[str], *, conn: psycopg.Connection | None = None) -> int:
    """Restart the clock of these memories that have a ttl (now + their ttl, by the database's
    clock), as a write does; returns how many. Expired memories are not revived."""
    ids = check_ids(ids)
    if not ids:
        return 0
    with memories.store.transaction(memories.ctx, conn) as c:
        return len(c.execute(queries.query("refresh_expiry"), (memories.ctx.tenant, list(ids))).fetchall())
