"""Chain verification: walk each tenant's ledger and re-hash every live memory (pymem.verify_chain)."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field

import psycopg

from .. import db
from ..context import Context


@dataclass(frozen=True)
class TenantVerification:
    tenant: str
    entries: int
    rows_checked: int
    head_seq: int | None
    head_hash: str | None
    bad_seq: int | None = None
    bad_memory_id: str | None = None
    problem: str | None = None

    @property
    def clean(self) -> bool:
        return self.problem is None


@dataclass(frozen=True)
class VerifyReport:
    tenants: list[TenantVerification] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def clean(self) -> bool:
        return all(t.clean for t in self.tenants)

    @property
    def entries(self) -> int:
        return sum(t.entries for t in self.tenants)

    @property
    def first_problem(self) -> TenantVerification | None:
        return next((t for t in self.tenants if not t.clean), None)

    def to_json(self) -> dict:
        return {
            "clean": self.clean,
            "entries": self.entries,
            "seconds": round(self.seconds, 6),
            "tenants": [asdict(t) for t in self.tenants],
        }


_SQL = ("select tenant_id, entries, rows_checked, head_seq, head_hash, bad_seq, bad_memory_id, problem "
        "from pymem.verify_chain(%s)")


def verify_chain(conn: psycopg.Connection, tenant: str | None = None) -> VerifyReport:
    """Verify one tenant (with a tenant context) or every tenant (needs pymem_auditor).

    `conn` is an app connection when `tenant` is given, else an auditor or admin connection.
    """
    started = time.perf_counter()
    with db.transaction(conn, Context(tenant=tenant) if tenant else None):
        rows = conn.execute(_SQL, (tenant,), prepare=False).fetchall()
    tenants = [
        TenantVerification(
            tenant=r[0], entries=r[1], rows_checked=r[2], head_seq=r[3],
            head_hash=r[4].hex() if r[4] is not None else None,
            bad_seq=r[5], bad_memory_id=r[6], problem=r[7],
        )
        for r in rows
    ]
    return VerifyReport(tenants=tenants, seconds=time.perf_counter() - started)


def verify_store(store, tenant: str | None = None) -> VerifyReport:
    """verify_chain on the right connection for `store`: the app's for a tenant, the admin's for all."""
    if tenant:
        with store.pool.connection() as conn:
            return verify_chain(conn, tenant)
    with store.admin_connection() as conn:
        return verify_chain(conn, None)
