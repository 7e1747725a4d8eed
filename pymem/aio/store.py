"""The async store: psycopg's async pool, and the memory verbs as coroutines.

`await Store.open()` opens the same store as pymem.Store (the embedded server or PYMEM_DSN, the
schema check, the recorded embedder) on an `AsyncConnectionPool`; `store.bind(ctx)` gives the
awaitable verbs of one context (`Memories`). Each verb runs the sync verb's own code on the
bridge (pymem.bridge): the same checks, SQL, transaction and typed errors, its waits for the
server awaited on the event loop, its CPU work (embedding, the content check) on a worker thread.

What a verb is given as `conn=` is a caller's `psycopg.AsyncConnection`, joined exactly as the
sync verbs join a caller's connection (a savepoint in its transaction, never committed).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any, ParamSpec, TypeVar, cast

import psycopg
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from .. import bridge, db
from ..config import Settings
from ..context import Context
from ..embedder import Embedder, configure_threads
from ..errors import InvalidArguments, ServerError
from ..storage.embedding import StoreEmbedder
from ..storage.endpoints import Endpoints, resolve
from ..storage.memories import Memories as SyncMemories
from ..storage.store import Store as SyncStore
from ..storage.store import store_facts
from .connection import BridgedConnection, BridgedPool, bridged

__all__ = ["Store", "Memories", "AsyncConn", "OffLoopEmbedder"]

P = ParamSpec("P")
R = TypeVar("R")

#: A caller's connection, as the async verbs take it.
AsyncConn = psycopg.AsyncConnection[Any]


class OffLoopEmbedder:
    """An embedder whose vectors are computed on a worker thread when called on the bridge (the
    event loop goes on meanwhile); its name, dimension and calibrated floor are the embedder's."""

    def __init__(self, embedder: Embedder):
        self.embedder = embedder
        self.name = embedder.name
        self.dim = embedder.dim
        floor = getattr(embedder, "similarity_floor", None)
        if floor is not None:
            self.similarity_floor = floor

    def embed(self, texts: list[str]) -> list[list[float]]:
        return bridge.blocking(self.embedder.embed, texts)

    def embed_query(self, texts: list[str]) -> list[list[float]]:
        as_query = getattr(self.embedder, "embed_query", None)
        return bridge.blocking(as_query if callable(as_query) else self.embedder.embed, texts)


class _StatementPool:
    """StatementConnections on the async side: autocommit connections for pymem's one-statement
    calls (a search, a refusal's audit), never reset, never held by a caller."""

    def __init__(self, pool: AsyncConnectionPool[Any]):
        self.pool = pool

    def connection(self) -> Any:
        return BridgedPool(self.pool).checkout()

    def discard_idle(self) -> None:
        pass  # the async pool checks and replaces its connections itself

    def close(self) -> None:
        pass  # closed by the async Store


class _BridgedStore(SyncStore):
    """The sync Store the bridged verbs see: the same settings, facts and embedder as the async
    Store, its pools the async ones behind the sync interface (pymem.aio.connection)."""

    def __init__(self, owner: Store, settings: Settings):  # no super().__init__(): nothing is opened here
        self.endpoints = owner.endpoints
        self.settings = settings
        self.embedding_dim = owner.embedding_dim
        self.embedder = owner.embedder
        self.timeouts = owner.timeouts
        self.pool = cast(ConnectionPool, BridgedPool(owner.pool))
        self.statements = cast(db.StatementConnections, _StatementPool(owner.statement_pool))

    def text_embedder(self, embedder: Any = None, *, claim: bool = False) -> Any:
        chosen = super().text_embedder(embedder, claim=claim)
        return OffLoopEmbedder(chosen)

    def close(self) -> None:
        pass  # the async Store owns the pools


class Store:
    """An open pymem store on psycopg's async pool: `store = await Store.open()`, or
    `async with await Store.open() as store:`; `store.bind(ctx)` gives the awaitable verbs."""

    def __init__(self, endpoints: Endpoints, settings: Settings, *, embedding_dim: int,
                 recorded_embedder: str | None, pool: AsyncConnectionPool[Any],
                 statement_pool: AsyncConnectionPool[Any]):
        self.endpoints = endpoints
        self.embedding_dim = embedding_dim
        #: the embedder the store's vectors come from (pymem.storage.embedding)
        self.embedder = StoreEmbedder(recorded_embedder, embedding_dim, settings.environ)
        #: The lock and statement timeouts of every transaction the store opens (settings).
        self.timeouts = db.Timeouts(settings.lock_timeout_ms, settings.statement_timeout_ms)
        #: psycopg's AsyncConnectionPool the verbs check out from (reset on return, as the sync pool).
        self.pool = pool
        #: the pool of autocommit connections for one-statement calls (searches, refusal audits).
        self.statement_pool = statement_pool
        #: the sync view the verbs run against (on the bridge only).
        self.bridged = _BridgedStore(self, settings)
        #: the event loop the store was opened on (its pools belong to it).
        self.loop = asyncio.get_running_loop()

    @classmethod
    async def open(cls, settings: Settings | None = None, *, pool_size: int = 8) -> Store:
        """Open the store `settings` name (default Settings.from_env()), as pymem.Store.open does;
        starting the embedded server, when it is the one, runs on a worker thread."""
        if not bridge.available():
            raise ImportError(bridge.MISSING)
        settings = settings or Settings.from_env()
        endpoints = await asyncio.to_thread(resolve, settings)
        pooler = settings.transaction_pooler
        try:
            aconn = await psycopg.AsyncConnection.connect(endpoints.app, **db.connect_options(pooler))
        except psycopg.OperationalError as exc:
            raise ServerError(f"cannot connect to the database: {exc}".strip()) from exc
        async with aconn:
            dim, recorded = await bridge.run(_checked_facts, bridged(aconn), pooler)
        configure_threads(settings.embed_threads)
        timeouts = db.Timeouts(settings.lock_timeout_ms, settings.statement_timeout_ms)
        pool = await _open_pool(endpoints.app, pool_size, pooler, settings.pool_wait, statements=None)
        try:
            statement_pool = await _open_pool(endpoints.app, pool_size, pooler, settings.pool_wait,
                                              statements=timeouts)
        except BaseException:
            await pool.close()
            raise
        return cls(endpoints, settings, embedding_dim=dim, recorded_embedder=recorded, pool=pool,
                   statement_pool=statement_pool)

    async def close(self) -> None:
        await self.statement_pool.close()
        await self.pool.close()

    async def __aenter__(self) -> Store:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def bind(self, ctx: Context | None = None, **fields: Any) -> Memories:
        """The awaitable memory verbs for one context: store.bind(tenant="acme", actor="u1")."""
        return Memories(self, ctx if ctx is not None else Context(**fields))

    @property
    def settings(self) -> Settings:
        """The configuration the store holds (the verbs' policies in force come from it)."""
        return self.bridged.settings

    @settings.setter
    def settings(self, settings: Settings) -> None:
        self.bridged.settings = settings

    def reload(self, settings: Settings | None = None) -> None:
        """As pymem.Store.reload: build the policies in force again (no I/O but the policy files)."""
        self.bridged.reload(settings)

    async def call(self, fn: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
        """Run a sync pymem function on the bridge: one that takes `bind(...)`'s sync view
        (`Memories.bridged`) or a bridged connection; for the library's functions that have no
        coroutine of their own."""
        return await bridge.run(fn, *args, **kwargs)

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[AsyncConn]:
        """One checkout of the pool for the `async with` block, committed (rolled back on error)
        and returned at the end. Verbs given it as `conn=` run on it, each in a transaction of its
        own; inside `async with conn.transaction():`, as savepoints of that one transaction."""
        async with self.pool.connection() as conn:
            yield conn


def _checked_facts(conn: BridgedConnection, pooler: bool) -> tuple[int, str | None]:
    db.configure_pooled(conn, pooler=pooler, owned=False)
    return store_facts(conn)


async def _open_pool(dsn: str, size: int, pooler: bool, wait: float,
                     statements: db.Timeouts | None) -> AsyncConnectionPool[Any]:
    """An async pool configured as pymem.db.make_pool's (`statements`: as StatementConnections',
    autocommit, unowned, with the session timeouts and no reset, and none kept open unused)."""

    async def configure(aconn: AsyncConn) -> None:
        if statements is None:
            await bridge.run(db.configure_pooled, bridged(aconn), pooler=pooler)
        else:
            await aconn.set_autocommit(True)
            await bridge.run(_configure_statements, bridged(aconn), statements, pooler)

    async def reset(aconn: AsyncConn) -> None:
        await bridge.run(db.reset_connection, bridged(aconn))

    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        dsn, min_size=0 if statements is not None else min(2, size), max_size=size, configure=configure,
        reset=reset if statements is None else None, open=False, kwargs=db.connect_options(pooler), timeout=wait)
    try:
        await pool.open(wait=True, timeout=30)
    except Exception as exc:
        await pool.close()
        raise ServerError(f"cannot connect to the database: {exc}".strip()) from exc
    return pool


def _configure_statements(conn: BridgedConnection, timeouts: db.Timeouts, pooler: bool) -> None:
    db.configure_pooled(conn, pooler=pooler, owned=False)
    db.set_session_timeouts(conn, timeouts, pooler=pooler)


def sync_conn(conn: AsyncConn | None) -> psycopg.Connection[Any] | None:
    """A caller's async connection as the sync verbs take it."""
    if conn is None:
        return None
    if isinstance(conn, psycopg.Connection):
        raise InvalidArguments("pymem.aio verbs join a psycopg.AsyncConnection, not a sync psycopg.Connection")
    if not isinstance(conn, psycopg.AsyncConnection):
        raise InvalidArguments(f"conn must be a psycopg.AsyncConnection, not {type(conn).__name__}")
    return bridged(conn)


class Memories:
    """The memory verbs bound to one Context, as coroutines: the verbs of pymem.Memories, with the
    same arguments, results and errors (every verb takes `conn=`: a caller's AsyncConnection)."""

    def __init__(self, store: Store, ctx: Context):
        self.store = store
        self.ctx = ctx
        #: the sync verbs these run (on the bridge only: outside an awaited call they cannot wait)
        self.bridged = SyncMemories(store.bridged, ctx)

    async def _run(self, fn: Callable[..., R], *args: Any, conn: AsyncConn | None = None, **kwargs: Any) -> R:
        return await bridge.run(fn, *args, conn=sync_conn(conn), **kwargs)

    def prepare_row(self, row: Mapping[str, Any]) -> Any:
        """As pymem.Memories.prepare_row (validation only: no I/O)."""
        return self.bridged.prepare_row(row)

    async def add(self, rows: Sequence[Mapping[str, Any]], *, conn: AsyncConn | None = None) -> list[str]:
        """As pymem.Memories.add."""
        return await self._run(self.bridged.add, rows, conn=conn)

    async def get_row(self, memory_id: str, *, conn: AsyncConn | None = None) -> dict[str, Any] | None:
        """As pymem.Memories.get_row."""
        return await self._run(self.bridged.get_row, memory_id, conn=conn)

    async def upsert_many(self, records: Sequence[Mapping[str, Any]], *, idempotency_key: str,
                          expected_revisions: Mapping[str, int] | None = None, idempotency_class: str | None = None,
                          ttl: float | timedelta | None = None, subject: str | None = None,
                          conn: AsyncConn | None = None) -> dict[str, Any]:
        """As pymem.Memories.upsert_many."""
        return await self._run(self.bridged.upsert_many, records, idempotency_key=idempotency_key,
                               expected_revisions=expected_revisions, idempotency_class=idempotency_class, ttl=ttl,
                               subject=subject, conn=conn)

    async def search(self, vector: Sequence[float], *, top_k: int, scope_filter: Mapping[str, str] | None = None,
                     metadata_filter: Mapping[str, Any] | None = None, include: Mapping[str, bool] | None = None,
                     fidelity_target: Any = None, conn: AsyncConn | None = None) -> list[dict[str, Any]]:
        """As pymem.Memories.search."""
        return await self._run(self.bridged.search, vector, top_k=top_k, scope_filter=scope_filter,
                               metadata_filter=metadata_filter, include=include, fidelity_target=fidelity_target,
                               conn=conn)

    async def get(self, memory_id: str, *, conn: AsyncConn | None = None) -> dict[str, Any] | None:
        """As pymem.Memories.get."""
        return await self._run(self.bridged.get, memory_id, conn=conn)

    async def get_many(self, ids: Sequence[str], *, conn: AsyncConn | None = None) -> list[dict[str, Any]]:
        """As pymem.Memories.get_many."""
        return await self._run(self.bridged.get_many, ids, conn=conn)

    async def list_chunks(self, *, limit: int = 50, after: str | None = None,
                          conn: AsyncConn | None = None) -> dict[str, Any]:
        """As pymem.Memories.list_chunks."""
        return await self._run(self.bridged.list_chunks, limit=limit, after=after, conn=conn)

    async def delete_many(self, ids: Sequence[str], *, conn: AsyncConn | None = None) -> dict[str, int]:
        """As pymem.Memories.delete_many."""
        return await self._run(self.bridged.delete_many, ids, conn=conn)

    def describe_store(self) -> dict[str, Any]:
        """As pymem.Memories.describe_store (what the store implements: no I/O, so not a coroutine)."""
        return self.bridged.describe_store()

    async def health(self) -> dict[str, Any]:
        """As pymem.Memories.health."""
        return await bridge.run(self.bridged.health)


def sync_memories(memories: Any) -> SyncMemories:
    """The sync verbs an async Memories runs (pymem.aio.verbs), refusing anything else."""
    if not isinstance(memories, Memories):
        raise InvalidArguments(f"expected a pymem.aio Memories (store.bind(...)), got {type(memories).__name__}")
    return memories.bridged

