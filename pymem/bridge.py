"""Running pymem's verbs on an event loop, without a thread per call: the greenlet bridge.

pymem's verbs are written once, as plain functions over a psycopg connection. `pymem.aio` runs
those same functions for a coroutine: `run(fn, ...)` calls `fn` in a greenlet of its own, and
every time psycopg would block waiting for the server, the wait is handed back to the event loop
(`await_`), which awaits it while serving other tasks and then switches back with the result.
So the verb's checks, its SQL, its transaction and its typed errors are the sync ones; only the
waiting differs (the technique SQLAlchemy's asyncio extension uses).

CPU work a verb does (the content check of a note, embedding a text) would hold the event loop
while it runs: it goes through `blocking`, which under the bridge runs it on a worker thread
(the loop's default executor) and awaits it, and outside the bridge is a plain call. Nothing here
imports database code: the pure modules may call `blocking`.

The bridge needs the `greenlet` package (pip install 'pymem-pg[async]'); without it `blocking`
is a plain call and `run` says what to install.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import sys
from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec, TypeVar, cast

try:
    from greenlet import getcurrent, greenlet  # type: ignore[import-untyped]  # greenlet ships no type information
except ImportError:  # pragma: no cover - the async extra is not installed
    greenlet = None

__all__ = ["run", "await_", "blocking", "in_bridge", "available", "MISSING"]

P = ParamSpec("P")
R = TypeVar("R")

#: What to install for the async surface.
MISSING = "pymem's async surface needs the greenlet package: pip install 'pymem-pg[async]'"


def available() -> bool:
    """Whether the bridge can run (greenlet is installed)."""
    return greenlet is not None


if greenlet is not None:
    class _VerbGreenlet(greenlet):  # type: ignore[misc]
        """The greenlet a bridged call runs in; its parent is the coroutine that awaits for it."""


def in_bridge() -> bool:
    """Whether the caller runs inside `run` (a coroutine awaits its every wait for the server)."""
    return greenlet is not None and isinstance(getcurrent(), _VerbGreenlet)


def await_(awaitable: Awaitable[R]) -> R:
    """Inside `run`: suspend this call until the event loop has awaited `awaitable`, and return its
    result (or raise its error). Outside `run` a RuntimeError: nothing could await it.

    A coroutine is first stepped here: one that finishes without waiting (an uncontended lock, a
    wait with nothing to wait for, a pool checkout of an idle connection) costs no trip through the
    event loop; one that waits is handed to the loop where it stopped (`_Started`)."""
    if not in_bridge():
        if asyncio.iscoroutine(awaitable):
            awaitable.close()  # never awaited: say why instead of warning about it
        raise RuntimeError("a pymem.aio connection was used outside an awaited pymem.aio call")
    if asyncio.iscoroutine(awaitable):
        try:
            first = awaitable.send(None)
        except StopIteration as done:
            return cast(R, done.value)
        awaitable = _Started(awaitable, first)
    return cast(R, getcurrent().parent.switch(awaitable))


class _Started:
    """A coroutine stepped up to its first wait (it yielded `first`, a future), awaited from there
    as a task awaits it: the task waits for each future it yields, resumes it with None (the
    future's outcome is read inside it), and throws into it what is thrown at the task."""

    def __init__(self, coro: Any, first: Any):
        self.coro = coro
        self.first = first

    def __await__(self) -> Any:
        yielded = self.first
        while True:
            try:
                yield yielded
            except BaseException as exc:  # noqa: BLE001 - a cancellation is the coroutine's to handle
                step = functools.partial(self.coro.throw, exc)
            else:
                step = functools.partial(self.coro.send, None)
            try:
                yielded = step()
            except StopIteration as done:
                return done.value


async def run(fn: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
    """`fn(*args, **kwargs)` run in a greenlet, its waits awaited here on the event loop; returns
    what it returns and raises what it raises. The caller's context variables are visible to `fn`
    (a copy: what `fn` sets stays inside)."""
    if greenlet is None:  # pragma: no cover - the async extra is not installed
        raise ImportError(MISSING)
    call = _VerbGreenlet(fn, getcurrent())
    call.gr_context = contextvars.copy_context()
    result: Any = call.switch(*args, **kwargs)
    while not call.dead:
        # `fn` handed out an awaitable (await_): await it, and give it its result or its error
        try:
            value = await result
        except BaseException:  # noqa: BLE001 - every error, a cancellation too, goes back into the call
            result = call.throw(*sys.exc_info())
        else:
            result = call.switch(value)
    return cast(R, result)


def blocking(fn: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
    """`fn(*args, **kwargs)`, CPU-bound: inside `run`, on a worker thread while the event loop goes
    on (the caller's context variables go with it); anywhere else, here and now."""
    if not in_bridge():
        return fn(*args, **kwargs)
    return await_(asyncio.to_thread(fn, *args, **kwargs))
