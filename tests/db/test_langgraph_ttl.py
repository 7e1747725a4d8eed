"""The LangGraph store's TTL interface, ported from LangGraph's own store tests (test_store_ttl of
its Postgres store, and the sweep of its Redis store) without their sleeps.

LangGraph's test puts an item with a ttl, sleeps most of a ttl between reads that refresh (or do
not refresh) it, and finds it gone at the end. Here time passes on the database's clock instead:
`advance` moves every expiry that much closer (as the superuser, triggers off: expiry is
bookkeeping), so each step is exactly as far from expiry as in LangGraph's test, with an hour of
margin for however slow the machine is, and no test waits on the wall clock.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from helpers.delivery import EMBEDDER, POLICY

from pymem import Context
from pymem.admission import AdapterTrustPolicy
from pymem.errors import InvalidArguments
from pymem.integrity.verify import verify_store
from pymem.langgraph import PymemStore

TTL_MINUTES = 600.0  # ten hours: each step below keeps an hour of margin either side of expiry
TTL = timedelta(minutes=TTL_MINUTES)
MARGIN = timedelta(hours=1)


def advance(database, by: timedelta) -> None:
    """As if `by` passed: every expiry comes that much closer, by the database's clock."""
    with database.admin() as conn, conn.transaction():
        conn.execute("set local session_replication_role = replica")
        conn.execute("update pymem.memories set expires_at = expires_at - %s where expires_at is not null", (by,))


def remaining(database, key: str) -> timedelta | None:
    with database.admin() as conn:
        row = conn.execute("select expires_at - now() from pymem.memories where record ->> 'key' = %s",
                           (key,)).fetchone()
    return None if row is None else row[0]


def make(store, **kwargs) -> PymemStore:
    memories = store.bind(Context(tenant="acme", actor="graph", adapter="lg"))
    return PymemStore(memories, index={"dims": 384, "embed": EMBEDDER, "fields": ["foo"]}, policy=POLICY,
                      trust=AdapterTrustPolicy(trusted_adapters=frozenset({"lg"})), **kwargs)


@pytest.fixture
def graph(store):
    return make(store, ttl={"default_ttl": TTL_MINUTES, "refresh_on_read": True})


def test_store_ttl(graph, database, store):
    """LangGraph's test_store_ttl: a refreshing get and search keep the item; a read that does not
    refresh lets it expire."""
    assert graph.supports_ttl
    ns = ("foo",)
    graph.put(ns, key="item1", value={"foo": "bar"}, ttl=TTL_MINUTES)
    advance(database, TTL - MARGIN)
    assert graph.get(ns, key="item1", refresh_ttl=True) is not None
    assert remaining(database, "item1") > TTL - MARGIN  # refreshed: a whole ttl again
    advance(database, TTL - MARGIN)
    assert len(graph.search(ns, query="foo", refresh_ttl=True)) == 1
    advance(database, TTL - MARGIN)
    assert graph.get(ns, key="item1", refresh_ttl=False) is not None
    assert remaining(database, "item1") < MARGIN + timedelta(minutes=1)  # not refreshed
    advance(database, 2 * MARGIN)
    # now more than a ttl since the last refresh
    assert graph.search(ns, query="bar", refresh_ttl=False) == []
    assert graph.get(ns, key="item1") is None
    assert verify_store(store).clean


def test_store_ttl_async(graph, database):
    """The same through the async surface (abatch)."""
    ns = ("foo",)

    async def run():
        await graph.aput(ns, key="item1", value={"foo": "bar"}, ttl=TTL_MINUTES)
        advance(database, TTL - MARGIN)
        assert await graph.aget(ns, key="item1", refresh_ttl=True) is not None
        advance(database, TTL - MARGIN)
        assert len(await graph.asearch(ns, query="foo", refresh_ttl=True)) == 1
        advance(database, TTL - MARGIN)
        assert await graph.aget(ns, key="item1", refresh_ttl=False) is not None
        advance(database, 2 * MARGIN)
        assert await graph.asearch(ns, query="bar", refresh_ttl=False) == []

    asyncio.run(run())


def test_sweep_removes_expired_items_and_the_chain_stays_clean(graph, database, store):
    """LangGraph's Redis store test: after expiry a sweep removes the item."""
    ns = ("foo",)
    graph.put(ns, key="item1", value={"foo": "bar"}, ttl=TTL_MINUTES)
    graph.put(ns, key="item2", value={"foo": "baz"}, ttl=3 * TTL_MINUTES)
    assert graph.get(ns, key="item1", refresh_ttl=True) is not None
    assert len(graph.search(ns, query="foo", refresh_ttl=True)) == 2
    advance(database, TTL + MARGIN)
    assert graph.sweep_ttl() == 1
    assert [i.key for i in graph.search(ns, query="bar", refresh_ttl=False)] == ["item2"]
    assert remaining(database, "item1") is None
    assert verify_store(store).clean


def test_default_ttl_and_an_explicit_none(graph, database):
    ns = ("foo",)
    graph.put(ns, key="defaulted", value={"foo": "a"})  # TTLConfig's default_ttl
    graph.put(ns, key="forever", value={"foo": "b"}, ttl=None)  # no ttl: the tenant's default, here none
    assert TTL - MARGIN < remaining(database, "defaulted") <= TTL
    assert remaining(database, "forever") is None


def test_refresh_is_ignored_without_a_ttl_config(store, database):
    """As LangGraph documents: without a TTLConfig, refresh_ttl is ignored."""
    plain = make(store)
    ns = ("foo",)
    plain.put(ns, key="item1", value={"foo": "bar"}, ttl=TTL_MINUTES)
    advance(database, MARGIN)
    before = remaining(database, "item1")
    assert plain.get(ns, key="item1", refresh_ttl=True) is not None
    assert remaining(database, "item1") <= before


def test_a_rewrite_after_expiry_is_a_fresh_item(graph, database):
    ns = ("foo",)
    graph.put(ns, key="item1", value={"foo": "old"}, ttl=TTL_MINUTES)
    advance(database, TTL + MARGIN)
    assert graph.get(ns, key="item1") is None
    graph.put(ns, key="item1", value={"foo": "new"}, ttl=TTL_MINUTES)
    item = graph.get(ns, key="item1")
    assert item is not None and item.value == {"foo": "new"}


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), "10", 10 ** 9])
def test_a_bad_ttl_is_refused_and_nothing_is_written(graph, bad):
    ns = ("foo",)
    with pytest.raises(InvalidArguments):
        graph.put(ns, key="item1", value={"foo": "bar"}, ttl=bad)
    assert graph.get(ns, key="item1") is None


@pytest.mark.parametrize("config", [{"default_ttl": -1}, {"refresh_on_read": "yes"}, {"sweep": 1}, "60"])
def test_a_bad_ttl_config_is_refused(store, config):
    with pytest.raises(InvalidArguments):
        make(store, ttl=config)
