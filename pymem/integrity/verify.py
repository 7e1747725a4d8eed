"""Chain verification: walk each tenant's ledger and re-hash every live memory (pymem.verify_chain)."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

import psycopg
from psycopg.rows import dict_row

from .. import db, queries
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

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> "TenantVerification":
        """From a row of pymem.verify_chain, by column name (tenant_id is `tenant` here)."""
        values = dict(row)
        values["tenant"] = values.pop("tenant_id")
        if values["head_hash"] is not None:
            values["head_hash"] = bytes(values["head_hash"]).hex()
        return cls(**values)


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


def verify_chain(conn: psycopg.Connection, tenant: str | None = None) -> VerifyReport:
    """Verify one tenant (with a tenant context) or every tenant (needs pymem_auditor).

    `conn` is an app connection when `tenant` is given, else an auditor or admin connection.
    """
    started = time.perf_counter()
    with db.transaction(conn, Context(tenant=tenant) if tenant else None):
        with conn.cursor(row_factory=dict_row) as cur:
            rows = cur.execute(queries.query("verify_chain"), (tenant,), prepare=False).fetchall()
    tenants = [TenantVerification.from_row(r) for r in rows]
    return VerifyReport(tenants=tenants, seconds=time.perf_counter() - started)


def verify_store(store, tenant: str | None = None) -> VerifyReport:
    """verify_chain on the right connection for `store`: the app's for a tenant, the admin's for all."""
    if tenant:
        with store.pool.connection() as conn:
            return verify_chain(conn, tenant)
    with store.admin_connection() as conn:
        return verify_chain(conn, None)
