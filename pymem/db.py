"""Connections, the pool, and the per-transaction context.

Data connections run as pymem_app. If the login is a superuser or has BYPASSRLS (the postgres
user of a docker-compose setup, say), the connection switches to pymem_app with SET ROLE so that
row-level security applies; a dedicated login that is only a member of pymem_app is the real
boundary and what the README recommends.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import psycopg
from pgvector.psycopg import register_vector
from psycopg import errors as pgerr
from psycopg import sql
from psycopg.pq import TransactionStatus
from psycopg_pool import ConnectionPool, PoolTimeout

from . import queries
from .context import Context
from .errors import (
    AccessDenied,
    ContextError,
    IncognitoSession,
    InvalidArguments,
    LockTimeout,
    NotFound,
    PoolExhausted,
    PymemError,
    SchemaError,
    ServerError,
    StatementTimeout,
    TransactionConflict,
    UnknownSession,
)
from .telemetry import tracing

_Row = TypeVar("_Row")


def one(row: _Row | None) -> _Row:
    """The row of a statement that always returns one (an aggregate, a function's result, an
    INSERT ... RETURNING): psycopg types `fetchone()` as optional, and a missing row here is the
    server breaking its contract, not a case to handle."""
    if row is None:
        raise ServerError("the database returned no row from a statement that always returns one")
    return row


APP_ROLE = "pymem_app"
AUDITOR_ROLE = "pymem_auditor"


#: What _configure found for each open connection: the role it switched to (None: its login's
#: own). A reset restores exactly that without asking the server again.
_configured: weakref.WeakKeyDictionary[psycopg.Connection, str | None] = weakref.WeakKeyDictionary()


def _configure(conn: psycopg.Connection, role: str | None = APP_ROLE) -> None:
    tracing.instrument(conn)  # a span per statement with the otel extra (pymem.telemetry.tracing)
    # An administrative connection may reach a database pgvector is not installed in yet.
    vector = one(conn.execute(queries.query("vector_type_exists")).fetchone())[0]
    if vector:
        register_vector(conn)
    switched = None
    if role is not None:  # None: an administrative connection keeps the login's own rights
        row = conn.execute(queries.query("login_needs_app_role"), (role,)).fetchone()
        if row and row[0] and not row[1]:
            if conn.prepare_threshold is None and conn in _pooled:
                conn.rollback()
                raise ServerError(
                    f"behind a transaction pooler (PYMEM_POOLER=transaction) the login must be a member of {role} "
                    "that is neither a superuser nor BYPASSRLS: the switch to the app role (SET ROLE) is session "
                    "state a transaction pooler does not keep")
            conn.execute(queries.template("set_role", role=sql.Identifier(role)))
            switched = role
    conn.commit()
    if vector:
        _configured[conn] = switched


#: Connections that reach Postgres through a transaction-mode pooler (pymem.config.Settings.pooler).
_pooled: weakref.WeakSet[psycopg.Connection] = weakref.WeakSet()


def connect_options(pooler: bool) -> dict[str, Any]:
    """psycopg's connection options: behind a transaction-mode pooler, no server-side prepared
    statement (the next transaction may run on another server connection, which never saw it)."""
    return {"prepare_threshold": None} if pooler else {}


def connect(dsn: str, *, role: str | None = APP_ROLE, autocommit: bool = False,
            pooler: bool = False, connect_timeout: float | None = None) -> psycopg.Connection:
    """One connection configured like the pool's (pgvector types, RLS-bound role)."""
    extra: dict[str, Any] = {} if connect_timeout is None else {"connect_timeout": max(1, round(connect_timeout))}
    try:
        conn = psycopg.connect(dsn, autocommit=autocommit, **connect_options(pooler), **extra)
    except psycopg.OperationalError as exc:
        raise ServerError(f"cannot connect to the database: {exc}".strip()) from exc
    if pooler:
        _pooled.add(conn)
    try:
        _configure(conn, role)
    except Exception:
        conn.close()
        raise
    return conn


def reset_connection(conn: psycopg.Connection, role: str | None = APP_ROLE) -> None:
    """Return `conn` to a clean session, in the role a new connection would have.

    What a connection returned to the pool must not carry into the next checkout: session-level
    settings (a `set_config('pymem.tenant', ..., false)` made by code sharing the pool), held
    cursors (a WITH HOLD cursor opened under another tenant), temporary objects, LISTEN
    registrations, advisory locks and a changed role (queries.sql: reset_session). Prepared
    statements and cached plans are kept: they carry no data, since row-level security is applied
    when a statement runs, with the context of that moment. The pgvector types registered on the
    connection are client-side and stay; the role the connection was configured with is set
    again, in the same round trip (every checkout waits for it); a connection never configured is
    configured in full.
    """
    if conn.info.transaction_status != TransactionStatus.IDLE:
        conn.rollback()
    conn.isolation_level, conn.read_only = None, None  # as a snapshot transaction may have left them
    if conn in _pooled:
        return  # behind a transaction pooler a session is not ours to clean: nothing of it is kept
    prev = conn.autocommit
    conn.autocommit = True
    try:
        configured = conn in _configured
        switched = _configured.get(conn) if configured else None
        if switched is not None:
            # the reset and the role back in one round trip (a simple query: one statement after
            # the other, as two calls would run them)
            conn.execute(sql.SQL("{}; {}").format(sql.SQL(queries.query("reset_session")),
                                                  queries.template("set_role", role=sql.Identifier(switched))))
        else:
            conn.execute(queries.query("reset_session"))
        if configured:
            return
    finally:
        conn.autocommit = prev
    _configure(conn, role)


@dataclass(frozen=True)
class Timeouts:
    """The lock and statement timeouts of the transactions pymem opens (None: the server's own)."""

    lock_ms: int | None = None
    statement_ms: int | None = None

    def __bool__(self) -> bool:
        return self.lock_ms is not None or self.statement_ms is not None

    def params(self) -> tuple[str | None, str | None]:
        return (None if self.lock_ms is None else f"{self.lock_ms}ms",
                None if self.statement_ms is None else f"{self.statement_ms}ms")


#: Seconds a caller is told to wait before retrying a call that found every connection busy.
POOL_RETRY_AFTER = 1.0


def make_pool(dsn: str, *, min_size: int = 2, max_size: int = 8, pooler: bool = False,
              wait: float = 30.0) -> ConnectionPool:
    """A pool of app connections, reset on return (reset_connection). Two stay open, so that a
    caller running one statement after another never waits for the reset of the connection it
    just returned: the pool hands out the other one meanwhile. `pooler`: the DSN is a
    transaction-mode pooler (no prepared statements, no session reset, no SET ROLE). A checkout
    waits at most `wait` seconds (pool_error says why it failed)."""
    min_size = min(min_size, max_size)

    def configure(conn: psycopg.Connection) -> None:
        configure_pooled(conn, pooler=pooler)

    pool = ConnectionPool(dsn, min_size=min_size, max_size=max_size, configure=configure,
                          reset=reset_connection, open=False, kwargs=connect_options(pooler), timeout=wait)
    try:
        pool.open(wait=True, timeout=30)
    except Exception as exc:
        pool.close()
        raise ServerError(f"cannot connect to the database: {exc}".strip()) from exc
    return pool


def configure_pooled(conn: psycopg.Connection, *, pooler: bool, owned: bool = True) -> None:
    """Configure a new connection of a pool (pgvector types, the app role) and, when `owned`, mark
    it as pymem's own (pymem.db.transaction commits on it); `pooler`: it reaches Postgres through a
    transaction-mode pooler."""
    if pooler:
        _pooled.add(conn)
    _configure(conn)
    if owned:
        own(conn)


def set_session_timeouts(conn: psycopg.Connection, timeouts: Timeouts, *, pooler: bool) -> None:
    """The lock and statement timeouts as session settings, on a connection that only pymem's own
    one-statement calls use (StatementConnections); none behind a transaction-mode pooler, whose
    server connections other clients share."""
    if timeouts and not pooler:
        with translate_errors():
            conn.execute(queries.query("set_session_timeouts"), timeouts.params())


def pool_error(pool: ConnectionPool, wait: float) -> PymemError:
    """Why a checkout of `pool` timed out: every connection it may open was open and busy
    (PoolExhausted, retry soon), or it could not open the ones it lacks (the database is not
    reachable: ServerError)."""
    stats = pool.get_stats()
    if stats.get("pool_size", 0) >= pool.max_size and not stats.get("pool_available", 0):
        return PoolExhausted(f"all {pool.max_size} database connections stayed busy for {wait:g} s",
                             retry_after=POOL_RETRY_AFTER)
    return ServerError(f"no database connection could be opened within {wait:g} s")


@contextmanager
def pooled(pool: ConnectionPool, wait: float | None = None) -> Iterator[psycopg.Connection]:
    """pool.connection(), with a checkout that times out raised as pool_error says."""
    try:
        conn = pool.getconn(timeout=wait)
    except PoolTimeout as exc:
        raise pool_error(pool, pool.timeout if wait is None else wait) from exc
    try:
        with conn:  # as pool.connection(): commit or roll back, then hand it back
            yield conn
    finally:
        pool.putconn(conn)


class StatementConnections:
    """A few app connections for pymem's own one-statement autocommit calls that leave nothing
    behind in the session (a search through pymem.search_as: its context is transaction-local,
    its settings function-local). Nothing else ever runs on them and no caller ever holds one, so
    they need no reset: they are handed out last in, first out, without the pool's round trip
    and worker thread, and a connection that fails or is left in a transaction is closed."""

    def __init__(self, dsn: str, *, max_size: int = 8, timeout: float = 30.0, pooler: bool = False,
                 timeouts: Timeouts = Timeouts()):
        self._dsn = dsn
        self._pooler = pooler
        self._idle: list[psycopg.Connection] = []
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(max_size)
        self._max_size = max_size
        self._timeout = timeout
        self._timeouts = timeouts
        self._closed = False

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection]:
        if not self._slots.acquire(timeout=self._timeout):
            raise PoolExhausted(f"all {self._max_size} search connections stayed busy for {self._timeout:g} s",
                                retry_after=POOL_RETRY_AFTER)
        conn = None
        try:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            if conn is None or conn.closed:
                conn = connect(self._dsn, autocommit=True, pooler=self._pooler)
                set_session_timeouts(conn, self._timeouts, pooler=self._pooler)
            yield conn
            if not conn.closed and conn.info.transaction_status == TransactionStatus.IDLE:
                with self._lock:
                    if not self._closed:
                        self._idle.append(conn)
                        conn = None
        finally:
            if conn is not None:
                conn.close()
            self._slots.release()

    def discard_idle(self) -> None:
        """Close the idle connections (after the server restarted, they are all dead)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
        self.discard_idle()


def set_context(conn: psycopg.Connection, ctx: Context) -> None:
    """Put the context into the current transaction (transaction-local settings)."""
    with translate_errors():
        conn.execute(queries.query("set_context"), ctx.params())


@contextmanager
def translate_errors() -> Iterator[None]:
    """Turn the database's refusals into pymem's typed errors (messages carry no content)."""
    try:
        yield
    except PymemError:
        raise
    except (pgerr.ForeignKeyViolation, pgerr.InsufficientPrivilege) as exc:
        raise _session_refusal(exc) from exc
    except pgerr.NoDataFound as exc:
        raise NotFound(_message(exc)) from exc
    except pgerr.CheckViolation as exc:
        raise InvalidArguments(f"the database refused the row: {exc.diag.constraint_name or _message(exc)}") from exc
    except pgerr.NotNullViolation as exc:
        raise InvalidArguments(f"missing value for {exc.diag.column_name}") from exc
    except pgerr.InvalidParameterValue as exc:
        raise ContextError(_message(exc)) from exc
    except (pgerr.DataException, pgerr.UntranslatableCharacter, pgerr.CharacterNotInRepertoire,
            pgerr.IntervalFieldOverflow) as exc:  # the last: a ttl beyond the tenant's maximum
        raise InvalidArguments(_message(exc)) from exc
    except pgerr.LockNotAvailable as exc:
        raise LockTimeout(f"a lock was not granted in time: {_message(exc)}", retry_after=1.0) from exc
    except pgerr.QueryCanceled as exc:
        raise StatementTimeout(f"the statement was cancelled: {_message(exc)}", retry_after=1.0) from exc
    except (pgerr.DeadlockDetected, pgerr.SerializationFailure) as exc:
        # Postgres rolled the transaction back; nothing of the call was written.
        raise TransactionConflict(f"the transaction was rolled back: {_message(exc)}", retry_after=0.1) from exc
    except psycopg.OperationalError as exc:
        raise ServerError(_message(exc)) from exc


# The constraint names the schema's session checks raise with (sql/schema.sql): an unknown or an
# incognito session is a refusal of its own kind, not a generic integrity or privilege error.
_UNKNOWN_SESSION = frozenset({"memories_session_started", "injections_session_started"})
_INCOGNITO_SESSION = frozenset({"memories_session_not_incognito", "injections_not_incognito"})


def _session_refusal(exc: psycopg.Error) -> PymemError:
    constraint = getattr(exc.diag, "constraint_name", None)
    if constraint in _UNKNOWN_SESSION:
        return UnknownSession(_message(exc))
    if constraint in _INCOGNITO_SESSION:
        return IncognitoSession(_message(exc))
    if isinstance(exc, pgerr.InsufficientPrivilege):
        return AccessDenied(_message(exc))
    return InvalidArguments(f"the database refused the row: {constraint or _message(exc)}")


def _message(exc: psycopg.Error) -> str:
    diag = getattr(exc, "diag", None)
    text = (diag.message_primary if diag and diag.message_primary else str(exc)).strip()
    return text.removeprefix("pymem: ")


#: Connections of pymem's own pools: on one of these, `transaction` opens and commits a transaction
#: of its own. Any other connection is a caller's, whose transaction is joined, never committed.
_owned: weakref.WeakSet[psycopg.Connection] = weakref.WeakSet()
#: The contexts of the pymem transactions open on a connection, innermost last: a verb called
#: inside another verb's transaction on the same connection and context joins it as it is.
_active: weakref.WeakKeyDictionary[psycopg.Connection, list[Context | None]] = weakref.WeakKeyDictionary()


def own(conn: psycopg.Connection) -> psycopg.Connection:
    """Mark `conn` as pymem's own (a pool's): transactions on it are pymem's to commit."""
    _owned.add(conn)
    return conn


def is_owned(conn: psycopg.Connection) -> bool:
    return conn in _owned


def in_transaction(conn: psycopg.Connection) -> bool:
    """Whether a pymem transaction (or a caller's transaction pymem joined) is open on `conn`."""
    return bool(_active.get(conn))


def register_types(conn: psycopg.Connection) -> None:
    """pgvector's types on a caller's connection (once per connection), so a caller never needs
    register_vector(): only the `vector` type is fetched, in the connection's current state."""
    if conn.adapters.types.get("vector") is not None:
        return
    from pgvector.psycopg.vector import register_vector_info
    from psycopg.types import TypeInfo

    with translate_errors():
        info = TypeInfo.fetch(conn, "vector")
    if info is None:
        raise SchemaError("pgvector's vector type is not in the connection's database: is it a pymem database?")
    register_vector_info(conn, info)


def _check_joinable(conn: psycopg.Connection) -> TransactionStatus:
    if conn.closed:
        raise ServerError("the connection given is closed")
    status = conn.info.transaction_status
    if status == TransactionStatus.INERROR:
        raise InvalidArguments("the connection's transaction has already failed: roll it back before calling pymem "
                               "with it (nothing was written)")
    if status == TransactionStatus.ACTIVE:
        raise InvalidArguments("the connection is busy (a query in progress, or pipeline mode): pymem cannot join it")
    if status == TransactionStatus.UNKNOWN:
        raise ServerError("the connection given is broken")
    return status


@contextmanager
def own_transaction(conn: psycopg.Connection, ctx: Context | None) -> Iterator[psycopg.Connection]:
    """psycopg's transaction on `conn`, with `ctx` set: a transaction of its own on an idle
    connection (committed), a savepoint in an open one. For the functions whose subject is the
    connection itself (verification, audits), which write nothing of a caller's."""
    with translate_errors(), conn.transaction():
        if ctx is not None:
            set_context(conn, ctx)
        yield conn


@contextmanager
def transaction(conn: psycopg.Connection, ctx: Context | None, *, snapshot: bool = False,
                savepoint: bool = False, timeouts: Timeouts | None = None) -> Iterator[psycopg.Connection]:
    """A transaction on `conn` with `ctx` set, rolled back on any error. Whose it is decides
    what happens at the end:

    - a connection of pymem's own pool, idle: a transaction of its own, committed on success
      (`snapshot`: REPEATABLE READ, READ ONLY, so every read in it sees one snapshot);
    - inside a pymem transaction already open on `conn` with the same context: joined as it is
      (no savepoint; `savepoint=True` asks for one, for a caller that goes on after an error);
      with another context, a savepoint, and the outer context is put back after it;
    - a caller's connection: in a transaction (or idle, not autocommit: the caller's transaction
      begins with pymem's first statement), a savepoint inside it, released on success and never
      committed: the caller's commit or rollback decides; autocommit: a transaction of its own,
      committed (autocommit means every call commits). A failed transaction, a busy or a closed
      connection is refused with a typed error. pgvector's types are registered on it first.

    `timeouts` (lock and statement) apply to a transaction of pymem's own, never to a caller's.
    """
    stack = _active.get(conn)
    if stack:
        outer = stack[-1]
        if (ctx is None or ctx == outer) and not savepoint:
            stack.append(outer)
            try:
                with translate_errors():
                    yield conn
            finally:
                stack.pop()
            return
        with translate_errors(), conn.transaction():
            if ctx is not None:
                set_context(conn, ctx)
            stack.append(ctx if ctx is not None else outer)
            try:
                yield conn
            finally:
                stack.pop()
            if ctx is not None and outer is not None and ctx != outer:
                set_context(conn, outer)
        return
    owned = conn in _owned
    status = _check_joinable(conn)
    if not owned:
        register_types(conn)
        if status == TransactionStatus.IDLE and not conn.autocommit:
            # psycopg begins the caller's transaction before this first statement: from here on
            # conn.transaction() below is a savepoint in it, never a commit
            with translate_errors():
                if ctx is not None:
                    set_context(conn, ctx)
                else:
                    conn.execute(queries.query("join_transaction"))
    isolation = snapshot and owned and status == TransactionStatus.IDLE
    if isolation:
        conn.isolation_level, conn.read_only = psycopg.IsolationLevel.REPEATABLE_READ, True
    try:
        with translate_errors(), conn.transaction():
            if timeouts and owned:  # the caller's own transaction keeps the caller's settings
                conn.execute(queries.query("set_call_timeouts"), timeouts.params())
            if ctx is not None:
                set_context(conn, ctx)
            _active[conn] = [ctx]
            try:
                yield conn
            finally:
                _active.pop(conn, None)
    finally:
        if isolation and not conn.closed and conn.info.transaction_status == TransactionStatus.IDLE:
            conn.isolation_level, conn.read_only = None, None
