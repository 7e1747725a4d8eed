"""One verb call, one pool checkout: a `deliver` (library, and over HTTP) takes the pool's
connection once and reads in one snapshot; a LangGraph batch runs in one transaction. Counted by
the pool's own statistics and, for round trips, by a counting proxy on the wire."""

from __future__ import annotations

import threading

import psycopg
import pytest
from helpers.lessons import EMBEDDER, GATE, ctx
from helpers.service import KEY, call, running, token
from langgraph.store.base import GetOp, PutOp, SearchOp

from benchmarks.wire import WireCounter
from pymem import Provenance, admit, deliver, start_session
from pymem.langgraph import PymemStore
from pymem.storage.endpoints import Endpoints
from pymem.storage.store import Store


def _seed(mem) -> None:
    start_session(mem, "s-0", "chat", first_message="deploys")
    start_session(mem, "s-1", "chat", first_message="older")
    for i in range(8):
        admit(mem, {"content": f"The deploy of service {i} runs at noon.", **({"tags": ["hot"]} if i < 2 else {})},
              Provenance("user_asserted", session_id="s-1"), **GATE)


def _requests(store) -> int:
    return store.pool.get_stats().get("requests_num", 0)


def test_one_deliver_takes_one_checkout_and_few_round_trips(database):
    with WireCounter(database.app_dsn) as wire:
        settings = database.settings()
        store = Store(Endpoints(app=wire.proxied(database.app_dsn), admin=database.admin_dsn), settings)
        try:
            mem = store.bind(ctx())
            _seed(mem)
            deliver(mem, "s-0", "deploy noon", embedder=EMBEDDER)  # warm: the pool full, plans cached
            before = _requests(store)
            wire.reset()
            delivered = deliver(mem, "s-0", "deploy noon", embedder=EMBEDDER)
            counts = wire.counts()
            assert _requests(store) - before == 1
            assert delivered.items and delivered.digest
            # 31 on the wire before: six checkouts, each with its reset, BEGIN, context and COMMIT
            assert counts["round_trips"] <= 16, counts
            assert counts["connections"] == 0
        finally:
            store.close()


def test_one_http_deliver_takes_one_checkout(store):
    from pymem.server.app import build_app
    from pymem.service.auth import TokenVerifier

    mem = store.bind(ctx())
    _seed(mem)
    with running(build_app(store, tokens=TokenVerifier.hs256(KEY), embedder=EMBEDDER)) as url:
        jwt = token("acme", "tester")
        status, _ = call(url, "deliver", {"session_id": "s-0", "query": "deploy noon"}, token=jwt)
        assert status == 200
        before = _requests(store)
        status, body = call(url, "deliver", {"session_id": "s-0", "query": "deploy noon"}, token=jwt)
        assert status == 200 and body["result"]["items"], body
        assert _requests(store) - before == 1


def test_a_langgraph_batch_is_one_transaction(store):
    mem = store.bind(ctx())
    graph = PymemStore(mem)
    graph.batch([PutOp(("users", "u1"), "a", {"text": "first"})])
    before = _requests(store)
    results = graph.batch([GetOp(("users", "u1"), "a"), SearchOp(("users",), None, limit=5),
                           PutOp(("users", "u1"), "b", {"text": "second"}), PutOp(("users", "u1"), "a", None)])
    assert _requests(store) - before == 1
    assert results[0].value == {"text": "first"} and [i.key for i in results[1]] == ["a"]
    assert graph.batch([GetOp(("users", "u1"), "a"), GetOp(("users", "u1"), "b")])[0] is None


def test_a_deliver_reads_one_snapshot_while_writers_commit(database, store):
    """A memory written while a delivery reads is in all of its block or none of it: the reads of
    one deliver share one snapshot (REPEATABLE READ, READ ONLY) on pymem's own connection."""
    mem = store.bind(ctx())
    _seed(mem)
    with store.pool.connection() as conn:
        with store.transaction(mem.ctx, conn, snapshot=True) as c:
            first = c.execute("select count(*) from pymem.memories").fetchone()[0]
            done = threading.Event()

            def writer():
                admit(mem, {"content": "Written during the snapshot."}, Provenance("user_asserted"), **GATE)
                done.set()

            thread = threading.Thread(target=writer)
            thread.start()
            thread.join(60)
            assert done.is_set()
            assert c.execute("select count(*) from pymem.memories").fetchone()[0] == first
            assert c.execute("show transaction_isolation").fetchone()[0] == "repeatable read"
    with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
        with store.pool.connection() as conn, store.transaction(mem.ctx, conn, snapshot=True) as c:
            c.execute("insert into pymem.sessions (tenant_id, id, surface) values ('acme', 'x', 'chat')")
