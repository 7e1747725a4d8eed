"""An async connection seen as a sync one, and the async pool seen as a sync pool, for the verbs
run on the bridge (pymem.bridge).

`bridged(aconn)` is a `psycopg.Connection` over the session of `aconn`, a `psycopg.AsyncConnection`:
the two objects share one state (the same attributes: transaction status and nesting,
autocommit, prepared statements, registered types, the pool it belongs to), and every wait the
sync one makes for the server is awaited by the async one on the event loop (`wait`). Its lock
is the async connection's lock, so another task using `aconn` meanwhile waits its turn. The same
object comes back for the same `aconn`, so what pymem.db keeps per connection (whose it is, the
pymem transactions open on it, the role it was configured with) holds across calls.

`BridgedPool` is the async pool with the sync pool's interface (getconn, putconn, connection,
get_stats, check), its checkouts bridged connections, a timed-out checkout the same PoolTimeout.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TypeVar, cast

import psycopg
from psycopg.abc import PQGen
from psycopg_pool import AsyncConnectionPool

from ..bridge import await_

__all__ = ["BridgedConnection", "bridged", "async_of", "BridgedPool"]

RV = TypeVar("RV")

#: Where an async connection keeps its bridged twin (one per async connection).
_TWIN = "_pymem_bridged"
#: Where the twin finds its async connection.
_ASYNC = "_pymem_async"
#: Where the twin keeps its sync cursor class, when one was set (tracing).
_CURSOR = "_pymem_bridged_cursor_factory"


class _LoopLock:
    """The async connection's lock, taken from inside the bridge (the event loop awaits it)."""

    def __init__(self, lock: Any):
        self._lock = lock

    def __enter__(self) -> None:
        await_(self._lock.acquire())

    def __exit__(self, *exc: object) -> None:
        self._lock.release()


class BridgedConnection(psycopg.Connection[Any]):
    """A sync psycopg connection over an async connection's session (see the module docstring).
    Made by `bridged`, never directly; usable only inside a call run by pymem.bridge.run."""

    # The attributes that differ from the async connection's: the lock and the cursor classes
    # (sync ones). Properties on the class win over the shared attributes of the same name.
    @property
    def lock(self) -> Any:  # type: ignore[override]
        return _LoopLock(async_of(self).lock)

    @property
    def cursor_factory(self) -> Any:
        return self.__dict__.get(_CURSOR, psycopg.Cursor)

    @cursor_factory.setter
    def cursor_factory(self, value: Any) -> None:
        # A sync cursor class (the traced one, pymem.telemetry.tracing) for this twin's cursors,
        # kept apart from the async connection's own, which shares this object's attributes.
        self.__dict__[_CURSOR] = value

    @property
    def server_cursor_factory(self) -> Any:  # type: ignore[override]
        return psycopg.ServerCursor

    def wait(self, gen: PQGen[RV], interval: float = 0.1, timeout: float | None = None) -> RV:
        """Consume `gen` on the async connection: awaited by the event loop, never blocking it (an
        interrupted wait cancels the query as the async connection does)."""
        result: RV = await_(async_of(self).wait(gen, interval, timeout))
        return result

    def __del__(self, *args: Any) -> None:
        pass  # the session is the async connection's: closing or warning is its business


def bridged(aconn: psycopg.AsyncConnection[Any]) -> BridgedConnection:
    """The sync twin of `aconn` (made on first use, the same object afterwards)."""
    if not isinstance(aconn, psycopg.AsyncConnection):
        raise TypeError(f"expected a psycopg.AsyncConnection, got {type(aconn).__name__}")
    state = vars(aconn)
    twin = state.get(_TWIN)
    if twin is None:
        twin = object.__new__(BridgedConnection)
        state[_ASYNC] = aconn
        state[_TWIN] = twin
        twin.__dict__ = state  # one state for both objects
    return cast(BridgedConnection, twin)


def async_of(conn: BridgedConnection) -> psycopg.AsyncConnection[Any]:
    """The async connection `conn` is the twin of."""
    aconn: psycopg.AsyncConnection[Any] = vars(conn)[_ASYNC]
    return aconn


class BridgedPool:
    """An AsyncConnectionPool with the sync pool's interface, for code run on the bridge."""

    def __init__(self, pool: AsyncConnectionPool[Any]):
        self.pool = pool

    @property
    def max_size(self) -> int:
        return self.pool.max_size

    @property
    def timeout(self) -> float:
        return self.pool.timeout

    def get_stats(self) -> dict[str, int]:
        return self.pool.get_stats()

    def getconn(self, timeout: float | None = None) -> BridgedConnection:
        return bridged(await_(self.pool.getconn(timeout)))

    def putconn(self, conn: BridgedConnection) -> None:
        await_(self.pool.putconn(async_of(conn)))

    def check(self) -> None:
        await_(self.pool.check())

    @contextmanager
    def checkout(self) -> Iterator[BridgedConnection]:
        """A checkout returned at the end as it is (the pool rolls back what is left open)."""
        conn = self.getconn()
        try:
            yield conn
        finally:
            self.putconn(conn)

    @contextmanager
    def connection(self, timeout: float | None = None) -> Iterator[BridgedConnection]:
        """As ConnectionPool.connection: a checkout, committed (or rolled back on error) and returned."""
        conn = self.getconn(timeout)
        try:
            with conn:
                yield conn
        finally:
            self.putconn(conn)
