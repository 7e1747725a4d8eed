"""The store: opening the database (embedded or PYMEM_DSN), its pool, and binding a context."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg

from .. import db, migrate, queries
from ..config import Settings
from ..context import Context
from ..embedder import configure_threads
from ..errors import InvalidArguments, SchemaError
from .embedding import StoreEmbedder
from .endpoints import Endpoints, resolve
from .memories import Memories

__all__ = ["Store", "Memories", "Endpoints", "resolve", "store_facts"]


#: What an open store cannot change by reload(settings): where and how it connects.
_CONNECTION_FIELDS = ("dsn", "admin_dsn", "home", "embedding_dim", "pooler", "direct_dsn", "lock_timeout_ms",
                      "statement_timeout_ms", "pool_wait", "max_content_bytes", "signing_key")


def store_facts(conn: psycopg.Connection) -> tuple[int, str | None]:
    """What a store checks on opening, on `conn` (left idle): the schema is current (SchemaError
    naming the upgrade otherwise); returns the embedding dimension and the recorded embedder."""
    with db.translate_errors():
        migrate.check_current(conn)
        row = conn.execute(queries.query("store_embedding_dim")).fetchone()
        recorded = conn.execute(queries.query("store_embedder")).fetchone() if row is not None else None
    conn.rollback()
    if row is None:
        raise SchemaError("pymem.store_info is empty: the schema was not created by pymem")
    return int(row[0]), (recorded[0] if recorded else None)


class Store:
    """An open pymem store: a connection pool plus the store-wide facts it checked on opening."""

    #: a Citus store (`pymem db distribute`): a context set inside one autocommit statement does
    #: not reach the shards there, so searches run in a transaction, and a write reaps expired
    #: rows before its idempotency claim (read when the store opens; pymem.aio's stores: False)
    on_citus: bool = False

    def __init__(self, endpoints: Endpoints, settings: Settings, *, pool_size: int = 8):
        self.endpoints = endpoints
        self.settings = settings
        pooler = settings.transaction_pooler
        with db.connect(endpoints.app, pooler=pooler) as conn:
            dim, recorded = store_facts(conn)
            self.on_citus = bool(db.one(conn.execute(queries.query("on_citus")).fetchone())[0])
            conn.rollback()
        self.embedding_dim: int = dim
        #: the embedder the store's vectors come from (pymem.storage.embedding)
        self.embedder = StoreEmbedder(recorded, self.embedding_dim, settings.environ)
        configure_threads(settings.embed_threads)
        #: The lock and statement timeouts of every transaction the store opens (settings).
        self.timeouts = db.Timeouts(settings.lock_timeout_ms, settings.statement_timeout_ms)
        self.pool = db.make_pool(endpoints.app, max_size=pool_size, pooler=pooler, wait=settings.pool_wait)
        # Memories.search's one autocommit statement (pymem.search_as) runs on these: no reset needed
        self.statements = db.StatementConnections(endpoints.app, max_size=pool_size, timeout=settings.pool_wait,
                                                  pooler=pooler, timeouts=self.timeouts)

    @classmethod
    def open(cls, settings: Settings | None = None, **kwargs: Any) -> Store:
        settings = settings or Settings.from_env()
        return cls(resolve(settings), settings, **kwargs)

    def close(self) -> None:
        self.statements.close()
        self.pool.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def connection(self, conn: psycopg.Connection | None = None) -> Iterator[psycopg.Connection]:
        """`conn` when given, else one checkout of the pool for the whole `with` block: a verb that
        runs more than one transaction runs them all on it. A checkout waits at most
        settings.pool_wait seconds (then PoolExhausted when every connection is busy, ServerError
        when none can be opened)."""
        if conn is not None:
            yield conn
            return
        with db.pooled(self.pool) as c:
            yield c

    @contextmanager
    def transaction(self, ctx: Context, conn: psycopg.Connection | None = None, *, snapshot: bool = False,
                    savepoint: bool = False) -> Iterator[psycopg.Connection]:
        """A transaction with `ctx` set (pymem.db.transaction says what happens on whose connection):
        without `conn`, one of its own on a pool connection, under the store's lock and statement
        timeouts; given a caller's connection, joined as a savepoint in the caller's transaction
        (whose settings are the caller's) and never committed."""
        with self.connection(conn) as c, db.transaction(c, ctx, snapshot=snapshot, savepoint=savepoint,
                                                        timeouts=self.timeouts):
            yield c

    def text_embedder(self, embedder: Any = None, *, claim: bool = False) -> Any:
        """The embedder for text in this store (pymem.storage.embedding): `embedder` checked
        against the store's recorded one, or the store's own; with `claim`, recorded as the
        store's if it has none yet (before a write of vectors computed from text)."""
        chosen = self.embedder.resolve(embedder)
        if claim and self.embedder.recorded is None:
            with self.pool.connection() as c:
                self.embedder.claim(chosen, c)
        return chosen

    def reload(self, settings: Settings | None = None) -> None:
        """Build the policies in force again at their next use (the admission policy, the adapter
        trust, the trust tiers): from the files their settings name, read again (a changed file
        is also noticed without this: pymem.config), or from `settings`, which the store then
        holds. New settings may change the policies, not the connection: settings that name
        another database, pool or schema are refused (open another store for those)."""
        if settings is None:
            self.settings.reload()
            return
        if not isinstance(settings, Settings):
            raise InvalidArguments(f"settings must be a Settings, not {type(settings).__name__}")
        fixed = [f for f in _CONNECTION_FIELDS if getattr(settings, f) != getattr(self.settings, f)]
        if fixed:
            raise InvalidArguments(f"a store keeps its connection: these settings differ in {', '.join(fixed)}")
        self.settings = settings
        self.embedder.environ = settings.environ

    def admin_connection(self) -> psycopg.Connection:
        """A connection with the administrative login (DDL, cross-tenant audits, benchmarks)."""
        return db.connect(self.endpoints.admin, role=None)

    def bind(self, ctx: Context | None = None, **fields: Any) -> Memories:
        """The memory verbs for one context: store.bind(tenant="acme", actor="u1", adapter=None)."""
        return Memories(self, ctx if ctx is not None else Context(**fields))
