"""The verb tests run twice, against the sync library and against pymem.aio (the parity run).

A module opts in with `pytestmark = pytest.mark.parity`: every test of it that uses the `store`
fixture runs once with a sync `pymem.Store` (`[sync]`) and once with a `BlockingStore` over a
`pymem.aio.Store` (`[async]`). The test code stays sync: `BlockingStore.bind` gives a
`BlockingMemories` whose verbs run the aio verb's coroutine to completion on the store's one
event loop, and the library verbs this module exports (`admit`, `recall`, `deliver`, ...) call
the aio verb when given a BlockingMemories, the sync verb otherwise. So each test asserts the
same results, errors and database state against both surfaces.

What a test does around the verbs (raw SQL to set up a row, a policy reload, a pool checkout)
goes to a sync Store on the same database (`BlockingStore.sync`): the verbs under test are the
async ones.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
from collections.abc import Callable, Iterator
from typing import Any

import pymem
from pymem import aio, bridge, db, delivery, facts, lessons
from pymem.admission import quarantine
from pymem.aio.connection import bridged

FLAVOURS = ("sync", "async")


class BlockingStore:
    """A pymem.aio.Store driven from sync test code (see the module docstring)."""

    def __init__(self, settings: Any):
        self.runner = asyncio.Runner()
        self.aio = self.runner.run(aio.Store.open(settings))
        self.sync = pymem.Store.open(settings)

    def run(self, awaitable: Any) -> Any:
        return self.runner.run(awaitable)

    @contextlib.contextmanager
    def transaction(self, ctx: Any, conn: Any = None, **options: Any) -> Iterator[Any]:
        """As pymem.Store.transaction, on an async pool connection driven from sync code: what a
        test passes as `conn=` to join a verb to its transaction."""
        if conn is not None:
            yield conn
            return
        with BlockingPool(self).connection() as c, c.transaction():
            self.run(bridge.run(db.set_context, bridged(c.aconn), ctx))
            yield c

    def bind(self, ctx: Any = None, **fields: Any) -> BlockingMemories:
        return BlockingMemories(self, self.aio.bind(ctx, **fields))

    def reload(self, settings: Any = None) -> None:
        self.sync.reload(settings)
        self.aio.reload(settings)

    @property
    def settings(self) -> Any:
        return self.aio.settings

    @settings.setter
    def settings(self, settings: Any) -> None:
        self.aio.settings = settings
        self.sync.settings = settings

    def __getattr__(self, name: str) -> Any:  # what tests do around the verbs: the sync store's
        return getattr(self.sync, name)

    def close(self) -> None:
        try:
            self.run(self.aio.close())
        finally:
            self.runner.close()
            self.sync.close()

    def __enter__(self) -> BlockingStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class BlockingPool:
    def __init__(self, store: BlockingStore):
        self.store = store

    @contextlib.contextmanager
    def connection(self) -> Iterator[BlockingConnection]:
        checkout = self.store.aio.pool.connection()
        aconn = self.store.run(checkout.__aenter__())
        try:
            yield BlockingConnection(self.store, aconn)
        except BaseException as exc:
            if not self.store.run(checkout.__aexit__(type(exc), exc, exc.__traceback__)):
                raise
        else:
            self.store.run(checkout.__aexit__(None, None, None))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store.aio.pool, name)


class BlockingConnection:
    """A psycopg.AsyncConnection driven from sync code; given as `conn=` to a BlockingMemories
    verb, the verb gets the AsyncConnection itself."""

    def __init__(self, store: BlockingStore, aconn: Any):
        self.store = store
        self.aconn = aconn

    @contextlib.contextmanager
    def cursor(self, *args: Any, **kwargs: Any) -> Iterator[BlockingCursor]:
        cursor = self.aconn.cursor(*args, **kwargs)
        try:
            yield BlockingCursor(self.store, cursor)
        finally:
            self.store.run(cursor.close())

    def execute(self, *args: Any, **kwargs: Any) -> BlockingCursor:
        return BlockingCursor(self.store, self.store.run(self.aconn.execute(*args, **kwargs)))

    @contextlib.contextmanager
    def transaction(self, *args: Any, **kwargs: Any) -> Iterator[BlockingConnection]:
        tx = self.aconn.transaction(*args, **kwargs)
        self.store.run(tx.__aenter__())
        try:
            yield self
        except BaseException as exc:
            if not self.store.run(tx.__aexit__(type(exc), exc, exc.__traceback__)):
                raise
        else:
            self.store.run(tx.__aexit__(None, None, None))

    @property
    def autocommit(self) -> bool:
        return bool(self.aconn.autocommit)

    @autocommit.setter
    def autocommit(self, value: bool) -> None:
        self.store.run(self.aconn.set_autocommit(value))

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.aconn, name)
        if not inspect.iscoroutinefunction(attr):
            return attr
        return lambda *args, **kwargs: self.store.run(attr(*args, **kwargs))


class BlockingCursor:
    def __init__(self, store: BlockingStore, cursor: Any):
        self.store = store
        self.cursor = cursor

    def execute(self, *args: Any, **kwargs: Any) -> BlockingCursor:
        self.store.run(self.cursor.execute(*args, **kwargs))
        return self

    def fetchone(self) -> Any:
        return self.store.run(self.cursor.fetchone())

    def fetchall(self) -> Any:
        return self.store.run(self.cursor.fetchall())

    def __getattr__(self, name: str) -> Any:
        return getattr(self.cursor, name)


def _unwrapped(kwargs: dict[str, Any]) -> dict[str, Any]:
    conn = kwargs.get("conn")
    return {**kwargs, "conn": conn.aconn} if isinstance(conn, BlockingConnection) else kwargs


class BlockingMemories:
    """A pymem.aio.Memories whose coroutine verbs are called like sync ones."""

    def __init__(self, store: BlockingStore, memories: aio.Memories):
        self.store = store
        self.memories = memories
        self.ctx = memories.ctx
        #: the same context on the sync store (for what the test does around the verbs)
        self.sync = store.sync.bind(memories.ctx)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.memories, name)
        if not inspect.iscoroutinefunction(attr):
            return attr

        @functools.wraps(attr)
        def call(*args: Any, **kwargs: Any) -> Any:
            return self.store.run(attr(*args, **_unwrapped(kwargs)))
        return call


def either(sync_verb: Callable[..., Any], async_verb: Callable[..., Any]) -> Callable[..., Any]:
    """`sync_verb`, or `async_verb` run to completion when given a BlockingMemories."""

    @functools.wraps(sync_verb)
    def call(memories: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(memories, BlockingMemories):
            return memories.store.run(async_verb(memories.memories, *args, **_unwrapped(kwargs)))
        return sync_verb(memories, *args, **kwargs)
    return call


admit = either(pymem.admit, aio.admit)
list_quarantined = either(quarantine.list_quarantined, aio.list_quarantined)
get_quarantined = either(quarantine.get_quarantined, aio.get_quarantined)
release_quarantined = either(quarantine.release_quarantined, aio.release_quarantined)
reject_quarantined = either(quarantine.reject_quarantined, aio.reject_quarantined)
recall = either(pymem.recall, aio.recall)
deliver = either(pymem.deliver, aio.deliver)
start_session = either(pymem.start_session, aio.start_session)
end_session = either(pymem.end_session, aio.end_session)
supersede = either(pymem.supersede, aio.supersede)
erase = either(pymem.erase, aio.erase)
erase_session = either(delivery.erase_session, aio.erase_session)
list_sessions = either(delivery.list_sessions, aio.list_sessions)
file_lesson = either(lessons.file_lesson, aio.file_lesson)
list_lessons = either(lessons.list_lessons, aio.list_lessons)
lessons_for_task = either(lessons.lessons_for_task, aio.lessons_for_task)
deliver_with_lessons = either(lessons.deliver_with_lessons, aio.deliver_with_lessons)
publish = either(facts.publish, aio.publish)
subscribe = either(facts.subscribe, aio.subscribe)


def is_async(memories: Any) -> bool:
    return isinstance(memories, BlockingMemories)


def caller_connection(store: Any) -> Any:
    """A checkout of `store`'s pool for a test to pass as `conn=`: a sync connection for the sync
    store, an AsyncConnection driven from sync code (BlockingConnection) for the async one."""
    if isinstance(store, BlockingStore):
        return BlockingPool(store).connection()
    return store.pool.connection()


def _sync_twin(value: Any) -> Any:
    if isinstance(value, BlockingMemories):
        return value.sync
    if isinstance(value, BlockingStore):
        return value.sync
    return value


def sync_view(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn`, a library function with no aio twin (an audit, an inspection): given the async
    flavour's store or memories, it gets their sync twins on the same database."""

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        return fn(*map(_sync_twin, args), **{k: _sync_twin(v) for k, v in kwargs.items()})
    return call
