"""The store: opening the database (embedded or PYMEM_DSN), its pool, and binding a context."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

import psycopg

from .. import db, migrate, queries
from ..config import Settings
from ..context import Context
from ..errors import SchemaError
from .endpoints import Endpoints, resolve
from .memories import Memories

__all__ = ["Store", "Memories", "Endpoints", "resolve"]


class Store:
    """An open pymem store: a connection pool plus the store-wide facts it checked on opening."""

    def __init__(self, endpoints: Endpoints, settings: Settings, *, pool_size: int = 8):
        self.endpoints = endpoints
        self.settings = settings
        with db.connect(endpoints.app) as conn:
            with db.translate_errors():
                migrate.check_current(conn)
                row = conn.execute(queries.query("store_embedding_dim")).fetchone()
            conn.rollback()
        if row is None:
            raise SchemaError("pymem.store_info is empty: the schema was not created by pymem")
        self.embedding_dim: int = row[0]
        #: The lock and statement timeouts of every transaction the store opens (settings).
        self.timeouts = db.Timeouts(settings.lock_timeout_ms, settings.statement_timeout_ms)
        self.pool = db.make_pool(endpoints.app, max_size=pool_size, wait=settings.pool_wait)
        # Memories.search's one autocommit statement (pymem.search_as) runs on these: no reset needed
        self.statements = db.StatementConnections(endpoints.app, max_size=pool_size, timeout=settings.pool_wait,
                                                  timeouts=self.timeouts)

    @classmethod
    def open(cls, settings: Settings | None = None, **kwargs: Any) -> "Store":
        settings = settings or Settings.from_env()
        return cls(resolve(settings), settings, **kwargs)

    def close(self) -> None:
        self.statements.close()
        self.pool.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection]:
        """A pooled connection, waited for at most settings.pool_wait seconds (then PoolExhausted
        when every connection is busy, ServerError when none can be opened)."""
        with db.pooled(self.pool) as c:
            yield c

    @contextmanager
    def transaction(self, ctx: Context, conn: psycopg.Connection | None = None) -> Iterator[psycopg.Connection]:
        """A transaction with `ctx` set, under the store's lock and statement timeouts. Given
        `conn`, a savepoint inside the caller's transaction (whose settings are the caller's)."""
        if conn is not None:
            with db.transaction(conn, ctx):
                yield conn
            return
        with self.connection() as c, db.transaction(c, ctx, self.timeouts):
            yield c

    def admin_connection(self) -> psycopg.Connection:
        """A connection with the administrative login (DDL, cross-tenant audits, benchmarks)."""
        return db.connect(self.endpoints.admin, role=None)

    def bind(self, ctx: Context | None = None, **fields: Any) -> Memories:
        """The memory verbs for one context: store.bind(tenant="acme", actor="u1", adapter=None)."""
        return Memories(self, ctx if ctx is not None else Context(**fields))
