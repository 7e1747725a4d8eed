"""Facts shared between the tasks of a run: publish, subscribe, and follow.

A fact is a memory of kind 'shared_fact': a tag, a key and a text value, published by a task of a
run (`scope="run"`, visible to subscribers naming that run) or for the whole tenant
(`scope="tenant"`). It is written through the one write path with the context's adapter (which
Postgres enforces) and chained like any memory; its `content_hash` is the memory's, computed by
the database. Facts carry no embedding, so they never turn up in recall or a delivery: they
reach an agent only through `subscribe`.

`subscribe(tag, scope, read_only_from_adapters=...)` returns the facts, oldest first, read under
row-level security: tenant and scope as for every memory, and the read allow-list of the context
narrowed by `read_only_from_adapters` (a strict allow-list: untagged rows are excluded when a
list is given, and an empty list returns nothing). `follow` streams facts as they are published
(Postgres LISTEN/NOTIFY on a connection of its own, no polling). The tenant's channel is named by
a digest keyed with an installation secret (pymem.fact_channel, told only to a context of that
tenant), and a notification carries nothing: it only wakes the stream, which then reads, under
its own context, the facts whose insert the tenant's chain recorded after the point it had read
up to. A notification sent by anyone else, forged or replayed, can never hand it an old fact
again nor one its context could not read (another tenant's, another scope's, an adapter outside
its allow-list).
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, overload

import psycopg
from psycopg import sql
from psycopg.rows import dict_row

from .. import db, queries
from ..context import Context
from ..errors import InvalidArguments, ServerError
from ..vocabulary import FACT_KIND, FACT_SCOPES, MAX_NAME, MAX_TAG, is_plain_text

if TYPE_CHECKING:  # pragma: no cover
    from ..storage.memories import Memories

__all__ = ["Fact", "FactStream", "publish", "subscribe", "follow"]

#: What facts' provenance says: a task's output, shared as it was published.
ORIGIN = "model_inferred"


@dataclass(frozen=True)
class Fact:
    """One published fact, as a subscriber reads it."""

    id: str
    tag: str
    key: str
    value: str
    scope: str
    run_id: str | None
    producer_task: str | None
    source_adapter: str | None
    content_hash: str  # hex sha256, the memory's content_hash (computed by the database)
    published_at: _dt.datetime

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Fact:
        record = row["record"] if isinstance(row["record"], Mapping) else {}
        return cls(id=row["id"], tag=str(record.get("tag", "")), key=str(record.get("key", "")),
                   value=row["content"] or "", scope=str(record.get("reach", "")), run_id=record.get("run_id"),
                   producer_task=record.get("producer_task"), source_adapter=row["source_adapter"],
                   content_hash=bytes(row["content_hash"]).hex(), published_at=row["created_at"])

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["published_at"] = self.published_at.isoformat()
        return out


@overload
def _name(value: Any, what: str, limit: int) -> str: ...
@overload
def _name(value: Any, what: str, limit: int, *, required: bool) -> str | None: ...
def _name(value: Any, what: str, limit: int, *, required: bool = True) -> str | None:
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip() or len(value) > limit or not is_plain_text(value):
        raise InvalidArguments(f"{what} must be 1 to {limit} characters without control or format characters")
    return value


def _check_scope(scope: Any, run_id: Any) -> tuple[str, str | None]:
    if scope not in FACT_SCOPES:
        raise InvalidArguments(f"a fact's scope must be one of {', '.join(FACT_SCOPES)}")
    run_id = _name(run_id, "run id", MAX_NAME, required=scope == "run")
    return scope, run_id


def _reader(ctx: Context, read_only_from_adapters: Sequence[str] | None) -> Context:
    """The context narrowed by an allow-list: only adapters both allow (a list never widens one)."""
    if read_only_from_adapters is None:
        return ctx
    if isinstance(read_only_from_adapters, (str, bytes)) or not isinstance(read_only_from_adapters, Sequence):
        raise InvalidArguments("read_only_from_adapters must be a list of adapter names (or None for no filter)")
    wanted = [_name(a, "adapter", MAX_NAME) for a in read_only_from_adapters]
    if ctx.read_adapters is not None:
        wanted = [a for a in wanted if a in ctx.read_adapters]
    return dataclasses.replace(ctx, read_adapters=tuple(dict.fromkeys(wanted)))


def publish(memories: Memories, tag: str, key: str, value: str, scope: str = "run", *, run_id: str | None = None,
            producer_task: str | None = None, conn: psycopg.Connection | None = None) -> Fact:
    """Publish a fact for the tasks of `run_id` (`scope="run"`, the default) or the whole tenant
    (`scope="tenant"`). Its adapter is the context's; its content hash the database's."""
    tag = _name(tag, "tag", MAX_TAG)
    key = _name(key, "key", MAX_NAME)
    if not isinstance(value, str):
        raise InvalidArguments(f"a fact's value must be text, not {type(value).__name__}")
    scope, run_id = _check_scope(scope, run_id)
    producer_task = _name(producer_task, "producer task", MAX_NAME, required=False)
    ctx = memories.ctx
    record = {"content": value, "tag": tag, "key": key, "reach": scope}
    provenance: dict[str, Any] = {"origin": ORIGIN, "source": "facts"}
    if run_id is not None:
        record["run_id"] = run_id
        provenance["run_id"] = run_id
    if producer_task is not None:
        record["producer_task"] = producer_task
    if ctx.adapter is not None:
        provenance["adapter"] = ctx.adapter
    fact_id = str(uuid.uuid4())
    with memories.store.transaction(ctx, conn) as c:
        memories.add([{"id": fact_id, "kind": FACT_KIND, "content": value, "record": record, "tags": [tag],
                       "origin": ORIGIN, "provenance": provenance}], conn=c)
        # read back for the database's content hash, even when the context's own allow-list
        # would hide its own adapter's rows; then the context again, allow-list and all, so a
        # caller's transaction (conn=) goes on exactly as narrow as it was
        with memories.store.transaction(dataclasses.replace(ctx, read_adapters=None), c) as own:
            found = _read(own, ctx.tenant, tag, scope, run_id, [fact_id])
        db.set_context(c, ctx)
    return found[0]


def _read(conn: psycopg.Connection, tenant: str, tag: str, scope: str, run_id: str | None,
          ids: list[str] | None) -> list[Fact]:
    with conn.cursor(row_factory=dict_row) as cur:
        cur.execute(queries.query("shared_facts"), (tenant, tag, scope, run_id, ids, ids))
        return [Fact.from_row(r) for r in cur.fetchall()]


def subscribe(memories: Memories, tag: str, scope: str = "run", *, run_id: str | None = None,
              read_only_from_adapters: Sequence[str] | None = None,
              conn: psycopg.Connection | None = None) -> list[Fact]:
    """The facts tagged `tag` of run `run_id` (or tenant-wide ones, `scope="tenant"`) that this
    context may read, oldest first; with `read_only_from_adapters`, only those its adapters
    published (untagged facts excluded; an empty list returns nothing)."""
    tag = _name(tag, "tag", MAX_TAG)
    scope, run_id = _check_scope(scope, run_id)
    ctx = _reader(memories.ctx, read_only_from_adapters)
    with memories.store.transaction(ctx, conn) as c:
        return _read(c, ctx.tenant, tag, scope, run_id, None)


class FactStream:
    """Facts as they are published, on a connection of its own that LISTENs on the tenant's
    channel. Iterate (ends after `timeout` seconds without a new fact; None = never), or call
    `next(timeout)`; `close()` it, or use it as a context manager. `notifications` counts what
    arrived, `ignored` what was not a fact this context may read."""

    def __init__(self, memories: Memories, tag: str, scope: str = "run", *, run_id: str | None = None,
                 read_only_from_adapters: Sequence[str] | None = None, existing: bool = True,
                 timeout: float | None = None):
        self.tag = _name(tag, "tag", MAX_TAG)
        self.scope, self.run_id = _check_scope(scope, run_id)
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout < 0):
            raise InvalidArguments("timeout must be a number of seconds >= 0 (or None)")
        self.timeout = timeout
        self.ctx = _reader(memories.ctx, read_only_from_adapters)
        self.notifications = 0
        self.ignored = 0
        # Not a pooled connection: the pool resets connections on return (UNLISTEN *). LISTEN is
        # session state: behind a transaction-mode pooler it needs a direct connection.
        settings = memories.store.settings
        dsn = memories.store.endpoints.app
        if settings.transaction_pooler:
            if settings.direct_dsn is None:
                raise ServerError("following facts needs a session of its own (LISTEN), which a transaction-mode "
                                  "pooler does not keep: set PYMEM_DIRECT_DSN to a direct connection to Postgres")
            dsn = settings.direct_dsn
        self._conn = db.connect(dsn, autocommit=True)
        try:
            with db.transaction(self._conn, self.ctx) as c:
                channel = db.one(c.execute(queries.query("fact_channel"), (self.ctx.tenant,)).fetchone())[0]
            with db.translate_errors():
                self._conn.execute(queries.template("listen", channel=sql.Identifier(channel)))
            # after LISTEN: where the chain ends now (facts after it are announced), then what was
            # published up to here (a fact of both is read once)
            with db.transaction(self._conn, self.ctx) as c:
                self._cursor = int(db.one(c.execute(queries.query("fact_cursor"), (self.ctx.tenant,)).fetchone())[0])
                self._pending = _read(c, self.ctx.tenant, self.tag, self.scope, self.run_id, None) if existing else []
        except Exception:
            self._conn.close()
            raise
        self._seen = {f.id for f in self._pending}

    def _fetch_new(self) -> list[Fact]:
        """The facts chained after the cursor, up to where the chain ends now (which becomes the
        cursor): every later commit is chained after that point, so none is missed or read twice."""
        with db.transaction(self._conn, self.ctx) as c, c.cursor(row_factory=dict_row) as cur:
            head = int(db.one(cur.execute(queries.query("fact_cursor"), (self.ctx.tenant,)).fetchone())["seq"])
            rows = cur.execute(queries.query("facts_between"),
                               (self.ctx.tenant, self._cursor, head, self.tag, self.scope, self.run_id)).fetchall()
        self._cursor = max(self._cursor, head)
        return [Fact.from_row(r) for r in rows]

    def next(self, timeout: float | None = None) -> Fact | None:
        """The next fact (already published ones first), or None after `timeout` seconds without one."""
        deadline = time.monotonic() + timeout if timeout is not None else None
        while not self._pending:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            # consumed whole before any query: the generator holds the connection while it runs
            arrived = list(self._conn.notifies(timeout=remaining, stop_after=1))
            if not arrived:
                return None
            self.notifications += len(arrived)
            found = [f for f in self._fetch_new() if f.id not in self._seen]
            self.ignored += max(0, len(arrived) - len(found))
            self._seen.update(f.id for f in found)
            self._pending.extend(found)
        return self._pending.pop(0)

    def __iter__(self) -> Iterator[Fact]:
        while True:
            fact = self.next(self.timeout)
            if fact is None:
                return
            yield fact

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> FactStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def follow(memories: Memories, tag: str, scope: str = "run", *, run_id: str | None = None,
           read_only_from_adapters: Sequence[str] | None = None, existing: bool = True,
           timeout: float | None = None) -> FactStream:
    """A FactStream: `subscribe`'s facts (unless `existing=False`), then each new one as it is
    published, read under this context and allow-list."""
    return FactStream(memories, tag, scope, run_id=run_id, read_only_from_adapters=read_only_from_adapters,
                      existing=existing, timeout=timeout)
