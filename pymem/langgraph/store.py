"""PymemStore: a LangGraph `BaseStore` whose items are pymem memories.

Tenancy comes from the bound context, never from a namespace: the store is built from a
`Memories` (`store.bind(ctx)`), so row-level security isolates tenants (and the context's scope,
and its adapter) whatever namespace a graph names. Namespaces map onto scope axes
(pymem.langgraph.namespaces), so a namespace prefix is a scope containment the database applies,
and a semantic search under a prefix is `pymem.search` with that scope filter: its top k counts
only the rows inside the prefix, however few they are.

Every put goes through the write gate (unless the store is built with `gate=False`): the value is
judged with the store's provenance (origin `model_inferred` unless configured) under the
admission policy in force; a refusal is audited in the tenant's hash chain before
MemoryAdmissionError reaches the graph, and nothing of the batch is written. Admitted items carry
their provenance, origin, capped confidence and the policy's fingerprint on the row. Puts, updates
and deletes are rows written and deleted through pymem's one write path, so the ledger chains each.

Reads return only the store's own items (kind `langgraph`, written by the context's adapter, shaped
as the store wrote them), each re-judged like `recall` under the admission policy and the adapter
trust policy in force now: a row the policy now withholds is not returned (pymem.langgraph.reading).

Batches behave like LangGraph's in-memory store: the reads of a batch see the store as it was
before the batch; its writes are applied together (the last write to an item wins). A batch, its
reads and its writes, is one transaction on one connection. Without a query, a search returns items
namespace by namespace, in the order each
namespace and each item were first put (an update keeps an item's place; a namespace that has
lost every item starts afresh).
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg
from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    PutOp,
    SearchItem,
    SearchOp,
    TTLConfig,
)
from pgvector import Vector
from psycopg.rows import class_row
from psycopg.types.json import Jsonb

from .. import bridge, queries
from ..admission.gate import bind_provenance, judge_or_refuse
from ..admission.judge import Decision
from ..admission.policy import AdmissionPolicy, admission_policy_in_force
from ..admission.provenance import Provenance, parse_origin
from ..admission.quarantine import hold_row
from ..admission.trust import AdapterTrustPolicy, active_trust_policy
from ..aio.store import Memories as AsyncMemories
from ..context import Context
from ..errors import AccessDenied, InvalidArguments
from ..storage.memories import Memories
from ..storage.retention import purge_expired, refresh_expiry
from ..storage.rows import MemoryRow, check_row, write_rows
from ..storage.search import SearchHit, check_text_query, run_search
from ..vocabulary import MAX_NAME, MAX_TOP_K, MAX_TTL_SECONDS, is_plain_text
from . import namespaces as ns
from .filters import compile_filter
from .indexing import Index, combine
from .reading import KIND, believed, own_record

__all__ = ["PymemStore", "KIND"]

#: The most puts one batch may write (one transaction).
MAX_PUTS = 10_000
#: The source the store's provenance names unless told otherwise.
SOURCE = "langgraph"
#: Ranks are the database clock in microseconds times this, plus the op's place in its batch.
_RANK_SCALE = 1_000_000


@dataclass
class _Put:
    ordinal: int
    op: PutOp
    id: str
    texts: list[str] = field(default_factory=list)
    vector: list[float] | None = None
    ttl: _dt.timedelta | None = None


@dataclass
class _Reader:
    """What one batch's reads believe: the store's own items, under the policies read for it."""

    name: str
    writer: str | None
    policy: AdmissionPolicy
    trust: AdapterTrustPolicy

    def own(self, row: SearchHit) -> dict[str, Any] | None:
        """The item a row holds, with its namespace key, if the store wrote it and it is believed now."""
        if row.source_adapter != self.writer:
            return None
        record = own_record(row, self.name)
        if record is None or not believed(row, record, self.policy, self.trust):
            return None
        record["namespace_key"] = (tuple(record["namespace"]), record["key"])
        return record


@dataclass
class _Plan:
    ops: list[Any]
    gets: list[tuple[int, GetOp, str]] = field(default_factory=list)
    searches: list[tuple[int, SearchOp, list[dict[str, Any]]]] = field(default_factory=list)
    lists: list[tuple[int, ListNamespacesOp]] = field(default_factory=list)
    puts: dict[tuple[tuple[str, ...], str], _Put] = field(default_factory=dict)
    first_touch: dict[tuple[str, ...], int] = field(default_factory=dict)
    query_vectors: dict[str, list[float]] = field(default_factory=dict)


class PymemStore(BaseStore):
    """A LangGraph store on pymem, bound to one context.

    memories: a bound `Memories` (`store.bind(Context(tenant=..., actor=...))`); its context is
        the store's tenant, actor, adapter and scope for every operation. Bound on a
        `pymem.aio.Store`, the async methods (`abatch`, `aget`, `aput`, ...) run on its async pool
        without a thread per batch; its sync methods are then for other threads than the loop's.
    index: LangGraph's index configuration ({"dims", "embed", "fields"}); without one, items
        are not embedded and a search's query is ignored, as in LangGraph. `dims` must be the
        pymem store's embedding dimension.
    name: which LangGraph store of the tenant this is (the `lg_store` scope axis).
    origin / provenance: the provenance every put carries (default: origin `model_inferred`,
        source "langgraph"); its adapter is the context's.
    gate: judge every put with the write gate (default True); False writes without judging
        (the rows still carry the provenance and origin, but no confidence or policy).
    policy: the AdmissionPolicy; default: the store's policy in force (pymem.config), at each batch. Puts are
        judged under it, and so is every item read back (a row it now withholds is not returned).
    trust: the AdapterTrustPolicy reads apply; default: the store's in force (pymem.config), at each batch (the
        store's own adapter must be trusted for its items to be returned; untagged rows are by default).
    hybrid: rank a search's query by its words as well as its vector (pymem.search's hybrid
        ranking; default True); False ranks by cosine alone, in LangGraph's own order.
    ttl: LangGraph's TTLConfig ({"default_ttl": minutes, "refresh_on_read": bool,
        "sweep_interval_minutes": minutes}). A put's ttl (minutes) becomes the memory's ttl; the
        database dates its expiry with its own clock, within the tenant's maximum (pymem's
        retention policy), and a put without one takes the tenant's default. An expired item is
        gone from every read at once; `sweep_ttl` deletes the expired rows (pymem.purge_expired).
        With a TTLConfig, a get or search with refresh_ttl restarts its items' clocks (a chained
        write each); without one, refresh_ttl is ignored, as in LangGraph.
    """

    supports_ttl = True

    def __init__(self, memories: Memories | AsyncMemories, *, index: Mapping[str, Any] | None = None,
                 name: str = "default", origin: str = "model_inferred",
                 provenance: Provenance | Mapping[str, Any] | None = None, gate: bool = True,
                 policy: AdmissionPolicy | None = None,
                 trust: AdapterTrustPolicy | None = None, hybrid: bool = True,
                 ttl: TTLConfig | None = None):
        #: the async store's memories, when built on one (pymem.aio): abatch runs on its pool
        self.async_memories = memories if isinstance(memories, AsyncMemories) else None
        if self.async_memories is not None:
            memories = self.async_memories.bridged
        if not isinstance(memories, Memories):
            raise InvalidArguments("PymemStore needs a bound Memories: store.bind(Context(tenant=...)), of a "
                                   "pymem.Store or a pymem.aio.Store")
        if not isinstance(name, str) or not name or len(name) > MAX_NAME or not is_plain_text(name) \
                or name != name.strip():
            raise InvalidArguments(f"the store name must be 1 to {MAX_NAME} plain characters")
        if policy is not None and not isinstance(policy, AdmissionPolicy):
            raise InvalidArguments(f"policy must be an AdmissionPolicy, not {type(policy).__name__}")
        if trust is not None and not isinstance(trust, AdapterTrustPolicy):
            raise InvalidArguments(f"trust must be an AdapterTrustPolicy, not {type(trust).__name__}")
        self.memories = memories
        self.name = name
        self.index = Index(index, store_dim=memories.store.embedding_dim) if index is not None else None
        self.provenance = bind_provenance(provenance if provenance is not None
                                          else Provenance(parse_origin(origin), source=SOURCE),
                                          memories.ctx.adapter)
        self.gate = bool(gate)
        self.policy = policy
        self.trust = trust
        if not isinstance(hybrid, bool):
            raise InvalidArguments("hybrid must be true or false")
        self.hybrid = hybrid
        self.ttl_config = _ttl_config(ttl)

    @property
    def ctx(self) -> Context:
        return self.memories.ctx

    # -- the BaseStore contract ---------------------------------------------------------------

    def batch(self, ops: Iterable[Any]) -> list[Any]:
        if self.async_memories is not None:
            return self._batch_on_loop(ops)
        plan = self._plan(ops)
        if self.index is not None:
            self._embed_puts(plan, self.index.embeddings.embed_documents)
            for query in self._queries(plan):
                plan.query_vectors[query] = self._vector(self.index.embeddings.embed_query(query))
        return self._run(plan)

    async def abatch(self, ops: Iterable[Any]) -> list[Any]:
        plan = self._plan(ops)
        if self.index is not None:
            texts = [t for put in plan.puts.values() for t in put.texts]
            vectors = await self.index.embeddings.aembed_documents(texts) if texts else []
            self._embed_puts(plan, lambda _texts: vectors)
            for query in self._queries(plan):
                plan.query_vectors[query] = self._vector(await self.index.embeddings.aembed_query(query))
        if self.async_memories is not None:
            return await bridge.run(self._run, plan)  # on the async pool, its waits awaited here
        return await asyncio.to_thread(self._run, plan)

    def _batch_on_loop(self, ops: Iterable[Any]) -> list[Any]:
        """A sync batch of a store built on pymem.aio: run by the async store's event loop, from
        another thread (as LangGraph's own async stores do); on that loop's thread it could only
        block the loop, so it is refused."""
        assert self.async_memories is not None
        loop = self.async_memories.store.loop
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop or loop.is_closed() or not loop.is_running():
            raise InvalidArguments("a PymemStore on a pymem.aio store takes sync calls only from another thread "
                                   "while its event loop runs: await the a* methods (aget, aput, asearch, abatch)")
        return asyncio.run_coroutine_threadsafe(self.abatch(ops), loop).result()

    # -- planning: checks and ids, before anything is embedded or sent -----------------------

    def _plan(self, ops: Iterable[Any]) -> _Plan:
        plan = _Plan(ops=list(ops))
        scope = self.ctx.scope
        for i, op in enumerate(plan.ops):
            if isinstance(op, GetOp):
                namespace = _namespace(op.namespace, "get")
                plan.gets.append((i, op, ns.item_id(self.name, scope, namespace, _key(op.key))))
            elif isinstance(op, SearchOp):
                _namespace(op.namespace_prefix, "search", allow_empty=True)
                _count(op.limit, "limit")
                _count(op.offset, "offset")
                if op.query is not None and not isinstance(op.query, str):
                    raise InvalidArguments("a search query must be a string")
                plan.searches.append((i, op, compile_filter(op.filter)))
            elif isinstance(op, ListNamespacesOp):
                for condition in op.match_conditions or ():
                    _namespace(condition.path, "namespace match", allow_empty=True)
                    if condition.match_type not in ("prefix", "suffix"):
                        raise InvalidArguments(f"unsupported namespace match type {condition.match_type!r}")
                if op.max_depth is not None:
                    _count(op.max_depth, "max_depth")
                _count(op.limit, "limit")
                _count(op.offset, "offset")
                plan.lists.append((i, op))
            elif isinstance(op, PutOp):
                namespace = _namespace(op.namespace, "put", writing=True)
                key = _key(op.key)
                if op.value is not None and not isinstance(op.value, Mapping):
                    raise InvalidArguments(f"a put's value must be an object (or None to delete), "
                                           f"got {type(op.value).__name__}")
                ttl = _minutes(op.ttl, "a put's ttl")
                plan.first_touch.setdefault(namespace, i)
                put = plan.puts.get((namespace, key))
                if put is None:
                    plan.puts[(namespace, key)] = _Put(i, op, ns.item_id(self.name, scope, namespace, key), ttl=ttl)
                else:  # the last write wins, in the place of the first (as LangGraph's in-memory store)
                    put.op, put.ttl = op, ttl
            else:
                raise InvalidArguments(f"unknown store operation: {type(op).__name__}")
        if len(plan.puts) > MAX_PUTS:
            raise InvalidArguments(f"at most {MAX_PUTS} puts per batch, got {len(plan.puts)}")
        if self.index is not None:
            for put in plan.puts.values():
                if put.op.value is not None:
                    put.texts = self.index.texts(put.op.value, put.op.index)
        return plan

    def _queries(self, plan: _Plan) -> list[str]:
        return list(dict.fromkeys(op.query for _, op, _ in plan.searches if op.query))

    def _embed_puts(self, plan: _Plan, embed: Callable[[list[str]], Any]) -> None:
        texts = [t for put in plan.puts.values() for t in put.texts]
        if not texts:
            return
        assert self.index is not None  # texts to embed come only from an index's fields
        vectors = self.index.check_vectors(embed(texts), len(texts))
        at = 0
        for put in plan.puts.values():
            put.vector = combine(vectors[at:at + len(put.texts)])
            at += len(put.texts)

    def _vector(self, vector: Any) -> list[float]:
        assert self.index is not None  # a query vector is made only for a store with an index
        return self.index.check_vectors([vector], 1)[0]

    # -- running: reads first (the store as it was), then the writes in one transaction ------

    def _reader(self) -> _Reader:
        return _Reader(self.name, self.ctx.adapter,
                       self.policy if self.policy is not None
                       else admission_policy_in_force(self.memories.store.settings),
                       self.trust if self.trust is not None else active_trust_policy(self.memories.store.settings))

    def _run(self, plan: _Plan) -> list[Any]:
        # the whole batch, reads and writes, in one transaction on one connection
        with self.memories.store.transaction(self.ctx) as c:
            return self._run_in(plan, c)

    def _run_in(self, plan: _Plan, c: psycopg.Connection) -> list[Any]:
        results: list[Any] = [None] * len(plan.ops)
        refresh: list[str] = []
        reader = self._reader() if plan.gets or plan.searches or plan.lists else None
        if plan.gets:
            ids = list(dict.fromkeys(item_id for _, _, item_id in plan.gets))
            with self.memories.store.transaction(self.ctx, c) as t, t.cursor(row_factory=class_row(SearchHit)) as cur:
                cur.execute(queries.query("langgraph_get"), (self.ctx.tenant, ids))
                rows = cur.fetchall()
            assert reader is not None  # made above for a plan with reads
            found = {r["namespace_key"]: r for r in map(reader.own, rows) if r is not None}
            for i, op, item_id in plan.gets:
                record = found.get((tuple(op.namespace), op.key))
                results[i] = _item(record) if record is not None else None
                if record is not None and op.refresh_ttl:
                    refresh.append(item_id)
        for i, search, conditions in plan.searches:
            assert reader is not None
            results[i] = self._search(reader, search, conditions,
                                      plan.query_vectors.get(search.query) if search.query else None, c)
            if search.refresh_ttl:
                refresh += [ns.item_id(self.name, self.ctx.scope, tuple(x.namespace), x.key) for x in results[i]]
        if refresh and self.ttl_config is not None:
            # after every read of the batch, which saw the store as it was
            refresh_expiry(self.memories, list(dict.fromkeys(refresh)), conn=c)
        for i, listing in plan.lists:
            assert reader is not None
            results[i] = self._list_namespaces(reader, listing, c)
        if plan.puts:
            self._write(plan, c)
        return results

    def _search(self, reader: _Reader, op: SearchOp, conditions: list[dict[str, Any]],
                vector: list[float] | None, c: psycopg.Connection) -> list[SearchItem]:
        if op.limit == 0:
            return []
        scope = ns.prefix_scope(self.name, tuple(op.namespace_prefix))
        if vector is None:
            return [_search_item(r, None) for r, _ in
                    self._items(reader, None, scope, conditions, "all", op.limit, op.offset, c)]
        ranked = None
        if not conditions and op.offset + op.limit <= MAX_TOP_K:
            # with hybrid, the query's words and its vector, fused inside pymem.search (scores stay cosine)
            ranked = self._ranked(reader, vector, scope, op.offset + op.limit, c,
                                  text=op.query if self.hybrid else None)
        if ranked is not None:
            scored = ranked[op.offset:]
        else:
            scored = self._items(reader, vector, scope, conditions, "embedded", op.limit, op.offset, c)
        out = [_search_item(r, score) for r, score in scored]
        if len(out) < op.limit:
            # As LangGraph's in-memory store: items that have no vector (put with index=False, or
            # without text under the indexed fields) fill what the ranked ones left.
            out += [_search_item(r, None) for r, _ in
                    self._items(reader, None, scope, conditions, "unembedded", op.limit - len(out), 0, c)]
        return out

    def _ranked(self, reader: _Reader, vector: list[float], scope: dict[str, str],
                want: int, c: psycopg.Connection, *,
                text: str | None = None) -> list[tuple[dict[str, Any], float]] | None:
        """The `want` best own, believed items by pymem.search (which counts every row in the scope,
        the store's or not): asks for more while rows that are not believed items crowd them out;
        None when even MAX_TOP_K rows do not hold enough (then the store's query ranks them)."""
        fetch = want
        while True:
            with self.memories.store.transaction(self.ctx, c) as t:
                hits = run_search(t, vector, fetch, scope, include_superseded=False, with_vectors=False,
                                  text=check_text_query(text))
            kept = [(r, h.score) for h in hits if (r := reader.own(h)) is not None]
            if len(kept) >= want or len(hits) < fetch:
                return kept[:want]
            if fetch >= MAX_TOP_K:
                return None
            fetch = min(MAX_TOP_K, fetch * 4)

    def _items(self, reader: _Reader, vector: list[float] | None, scope: dict[str, str],
               conditions: list[dict[str, Any]], which: str, limit: int,
               offset: int, c: psycopg.Connection) -> list[tuple[dict[str, Any], float]]:
        """The store's own, believed items under `scope` in the query's order, paged after judging
        (so `offset` counts items returned, not rows read): asks for more while some are withheld."""
        want = offset + limit
        ask = want
        while True:
            params = (Vector(vector) if vector is not None else None, self.ctx.tenant, Jsonb(scope), Jsonb(conditions),
                      Jsonb(conditions), which, ask, 0)
            with self.memories.store.transaction(self.ctx, c) as t, t.cursor(row_factory=class_row(SearchHit)) as cur:
                cur.execute(queries.query("langgraph_items"), params, prepare=False)
                rows = cur.fetchall()
            kept = [(r, h.score) for h in rows if (r := reader.own(h)) is not None]
            if len(kept) >= want or len(rows) < ask:
                return kept[offset:want]
            ask *= 4

    def _list_namespaces(self, reader: _Reader, op: ListNamespacesOp,
                         conn: psycopg.Connection) -> list[tuple[str, ...]]:
        if reader.trust.verdict(reader.writer) is not None:
            return []  # the store's adapter is not trusted: none of its items is returned, nor their namespaces
        conditions = ns.conditions_of(op.match_conditions)
        prefix = next((path for kind, path in conditions if kind == "prefix"), ())
        scope = ns.prefix_scope(self.name, prefix, wildcards=True)
        with self.memories.store.transaction(self.ctx, conn) as c:
            rows = c.execute(queries.query("langgraph_namespaces"), (self.ctx.tenant, Jsonb(scope))).fetchall()
        found = [tuple(r[0]) for r in rows if isinstance(r[0], list)]
        return ns.select_namespaces(found, conditions, op.max_depth, op.limit, op.offset)

    def _write(self, plan: _Plan, conn: psycopg.Connection) -> None:
        ctx, store = self.ctx, self.memories.store
        writes = [p for p in plan.puts.values() if p.op.value is not None]
        deletes = [p.id for p in plan.puts.values() if p.op.value is None]
        for put in writes:
            self._check_confinement(tuple(put.op.namespace))
        decisions = {}
        if self.gate and writes:
            policy = self.policy if self.policy is not None else admission_policy_in_force(self.memories.store.settings)
            for put in writes:
                decisions[put.id] = judge_or_refuse(self.memories, {"value": put.op.value}, self.provenance, policy,
                                                    conn=conn, hold=True)
        # A put the gate holds is not written as an item: it waits in the quarantine under the
        # item's id (released, it becomes the item). The value it replaces goes, as a put's would.
        held = [p for p in writes if decisions.get(p.id) is not None and decisions[p.id].held]
        writes = [p for p in writes if p not in held]
        with store.transaction(ctx, conn) as c:
            state = c.execute(queries.query("langgraph_write_state"),
                              (ctx.tenant, [p.id for p in writes + held])).fetchall()
            now = state[0][0]
            kept = {row[1]: row[2:] for row in state if row[1] is not None}
            ns_ranks: dict[tuple[str, ...], Any] = {}
            for put in writes + held:
                if put.id in kept and kept[put.id][2] is not None:
                    ns_ranks.setdefault(tuple(put.op.namespace), kept[put.id][2])
            base = _micros(now) * _RANK_SCALE
            for put in writes + held:
                namespace = tuple(put.op.namespace)
                if namespace not in ns_ranks:
                    row = c.execute(queries.query("langgraph_namespace_rank"),
                                    (ctx.tenant, Jsonb(ns.namespace_scope(self.name, namespace)))).fetchone()
                    ns_ranks[namespace] = row[0] if row is not None and row[0] is not None \
                        else base + plan.first_touch[namespace]
            rows = []
            for put in writes + held:
                created, rank, _ = kept.get(put.id, (None, None, None))
                rows.append(self._row(put, decisions.get(put.id), now, created, rank if rank is not None
                                      else base + put.ordinal, ns_ranks[tuple(put.op.namespace)]))
            deletes += [p.id for p in held if p.id in kept]
            if deletes:
                self.memories.delete_many(deletes, conn=c)
            if rows[:len(writes)]:
                write_rows(c, ctx, rows[:len(writes)], replace=True, whole=True)
            for put, row in zip(held, rows[len(writes):], strict=True):
                decision = decisions[put.id]
                assert decision is not None
                hold_row(c, ctx, row, decision)

    def sweep_ttl(self) -> int:
        """Delete the expired memories this store's context may delete (pymem.purge_expired: each a
        chained memory.delete event); returns how many. Expired items are already gone from every
        read: sweeping only reclaims their rows."""
        return purge_expired(self.memories)

    def _check_confinement(self, namespace: tuple[str, ...]) -> None:
        """A context whose scope names the store's axes may write only inside them."""
        axes = ns.namespace_scope(self.name, namespace)
        for axis, value in self.ctx.scope.items():
            if ns.is_reserved_axis(axis) and axes.get(axis) != value:
                raise AccessDenied("this context's scope confines it to other namespaces (or another store) "
                                   f"than the one written: its scope names {axis}")

    def _row(self, put: _Put, decision: Decision | None, now: _dt.datetime, created: Any, rank: Any,
             ns_rank: Any) -> MemoryRow:
        namespace = tuple(put.op.namespace)
        assert put.op.value is not None  # a row is made for a put with a value (a delete has none)
        record = {"namespace": list(namespace), "key": put.op.key, "value": dict(put.op.value),
                  "created_at": created if isinstance(created, str) else now.isoformat(),
                  "updated_at": now.isoformat(), "rank": rank, "ns_rank": ns_rank}
        provenance = self.provenance
        settings = self.memories.store.settings
        return check_row(
            dim=self.memories.store.embedding_dim, max_content_bytes=settings.max_content_bytes,
            default_scope=self.ctx.scope, where="the put",
            id=put.id, scope={**self.ctx.scope, **ns.namespace_scope(self.name, namespace)}, kind=KIND,
            content=_content(put.texts, settings.max_content_bytes), record=record, embedding=put.vector, ttl=put.ttl,
            origin=provenance.origin.value, provenance=provenance.to_json(),
            injection_source=provenance.injection_source,
            confidence=decision.confidence if decision is not None else None,
            policy_fingerprint=decision.policy_fingerprint if decision is not None else None)


# -- helpers ----------------------------------------------------------------------------------


def _namespace(namespace: Any, what: str, *, allow_empty: bool = False, writing: bool = False) -> tuple[str, ...]:
    if isinstance(namespace, str) or not isinstance(namespace, (tuple, list)):
        raise InvalidNamespaceError(f"a {what} namespace must be a tuple of strings")
    labels: tuple[str, ...] = tuple(namespace)
    if not labels and not allow_empty:
        raise InvalidNamespaceError("a namespace cannot be empty")
    for label in labels:
        if not isinstance(label, str) or not label:
            raise InvalidNamespaceError("namespace labels must be non-empty strings")
        if "." in label or "\x00" in label:
            raise InvalidNamespaceError("namespace labels cannot contain periods ('.') or NUL bytes")
    if writing and labels[0] == "langgraph":
        raise InvalidNamespaceError('the root label of a namespace cannot be "langgraph"')
    return labels


def _minutes(value: Any, what: str) -> _dt.timedelta | None:
    """LangGraph's ttl (minutes, a positive number) as a timedelta; None stays None."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not 0 < value * 60 <= MAX_TTL_SECONDS:
        raise InvalidArguments(f"{what} must be a positive number of minutes, at most {MAX_TTL_SECONDS // 60} "
                               "(or None)")
    return _dt.timedelta(minutes=value)


def _ttl_config(config: Any) -> TTLConfig | None:
    """A checked TTLConfig: default_ttl (minutes) and sweep_interval_minutes positive or None,
    refresh_on_read a bool; no other key."""
    if config is None:
        return None
    if not isinstance(config, Mapping):
        raise InvalidArguments(f"ttl must be a TTLConfig mapping, not {type(config).__name__}")
    unknown = set(config) - {"default_ttl", "refresh_on_read", "sweep_interval_minutes"}
    if unknown:
        raise InvalidArguments(f"unknown TTLConfig keys: {', '.join(sorted(map(str, unknown)))}")
    _minutes(config.get("default_ttl"), "default_ttl")
    _minutes(config.get("sweep_interval_minutes"), "sweep_interval_minutes")
    if not isinstance(config.get("refresh_on_read", True), bool):
        raise InvalidArguments("refresh_on_read must be true or false")
    return TTLConfig(**config)  # type: ignore[typeddict-item]


def _key(key: Any) -> str:
    if not isinstance(key, str):
        raise InvalidArguments(f"an item key must be a string, got {type(key).__name__}")
    if "\x00" in key:
        raise InvalidArguments("an item key cannot contain a NUL byte")
    return key


def _count(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidArguments(f"{what} must be an integer >= 0")
    return value


def _micros(moment: _dt.datetime) -> int:
    delta = moment - _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _content(texts: Sequence[str], max_bytes: int) -> str | None:
    """What the row's content column holds: the item's embedded texts (recall and audits read it),
    cut at the content limit; the value itself is kept whole in the record."""
    if not texts:
        return None
    data = "\n".join(texts).encode("utf-8", "surrogatepass")
    return data[:max_bytes].decode("utf-8", "ignore").replace("\x00", "")


def _times(record: Mapping[str, Any]) -> tuple[_dt.datetime, _dt.datetime]:
    return _dt.datetime.fromisoformat(record["created_at"]), _dt.datetime.fromisoformat(record["updated_at"])


def _item(record: Mapping[str, Any]) -> Item:
    created, updated = _times(record)
    return Item(value=record["value"], key=record["key"], namespace=tuple(record["namespace"]),
                created_at=created, updated_at=updated)


def _search_item(record: Mapping[str, Any], score: float | None) -> SearchItem:
    created, updated = _times(record)
    return SearchItem(namespace=tuple(record["namespace"]), key=record["key"], value=record["value"],
                      created_at=created, updated_at=updated, score=float(score) if score is not None else None)
