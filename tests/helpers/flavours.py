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
from pymem import aio, delivery, facts, lessons

FLAVOURS = ("sync", "async")


class BlockingStore:
    """A pymem.aio.Store driven from sync test code (see the module docstring)."""

    def __init__(self, settings: Any):
        self.runner = asyncio.Runner()
        self.aio = self.runner.run(aio.Store.open(settings))
        self.sync = pymem.Store.open(settings)

    def run(self, awaitable: Any) -> Any:
        return self.runner.run(awaitable)

    @property
    def pool(self) -> BlockingPool:
        """The async pool, its checkouts driven from sync code (what a test passes as `conn=`)."""
        return BlockingPool(self)

    def bind(self, ctx: Any = None, **fields: Any) -> BlockingMemories:
        return BlockingMemories(self, self.aio.bind(ctx, **fields))

    def reload(self, settings: Any = None) -> None:
        self.sync.reload(settings)
        self.aio.reload(settings if settings is not None else None)

    @property
    def settings(self) -> Any:
        return self.aio.settings

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
