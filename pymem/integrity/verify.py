"""Chain verification: walk each tenant's ledger and re-hash every live memory.

`verify_chain` runs the database's function, pymem.verify_chain, on one connection;
`verify_store` (what `pymem verify` runs) makes the same checks with the hashing done in
Python on several connections (pymem.integrity.streamed).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import psycopg
from psycopg.rows import dict_row

from .. import db, queries
from ..context import Context
from .reports import TenantVerification, VerifyReport
from .streamed import DatabaseBytes, verify_streamed

if TYPE_CHECKING:
    from ..storage.store import Store


def verify_chain(conn: psycopg.Connection, tenant: str | None = None) -> VerifyReport:
    """Verify one tenant (with a tenant context) or every tenant (needs pymem_auditor).

    `conn` is an app connection when `tenant` is given, else an auditor or admin connection.
    """
    started = time.perf_counter()
    with db.own_transaction(conn, Context(tenant=tenant) if tenant else None), conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(queries.query("verify_chain"), (tenant,), prepare=False).fetchall()
    tenants = [TenantVerification.from_row(r) for r in rows]
    return VerifyReport(tenants=tenants, seconds=time.perf_counter() - started)


#: Connections `pymem verify` uses by default (the database streams on one while Python hashes
#: what another sent).
JOBS = 2


def verify_store(store: Store, tenant: str | None = None, *, jobs: int = JOBS) -> VerifyReport:
    """Verify one tenant (on app connections, with its context) or every tenant (administrative
    connections): the checks of pymem.verify_chain, with the bytes each hash covers streamed from
    the database's own hash functions and hashed in Python, on `jobs` connections that read one
    snapshot (pymem.integrity.streamed)."""
    if tenant:  # app connections come from the pool: never ask for more than it holds
        return verify_streamed(store.pool.connection, tenant, DatabaseBytes(), jobs=min(jobs, store.pool.max_size))
    return verify_streamed(store.admin_connection, None, DatabaseBytes(), jobs=jobs)


__all__ = ["TenantVerification", "VerifyReport", "JOBS", "verify_chain", "verify_store"]
