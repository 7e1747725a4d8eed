"""The service under contention, on a real uvicorn server and a real Postgres: a tenant at its call
limit, a held chain-head lock, an exhausted pool and a database that goes away each fail fast with
their own typed code (and Retry-After where a retry helps), other tenants unaffected; and the edge
cases of hostile input (sub-normal vectors, a 1 MiB note without whitespace, oversized queries,
50,000 argument names, `"tags": {}`) refused with a typed error and nothing written."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from helpers.database import DIM, with_user
from helpers.service import KEY, call, request, running, token

from pymem import Context, InvalidArguments
from pymem.admission import gate
from pymem.client import Client
from pymem.errors import LockTimeout, PoolExhausted, TenantBusy
from pymem.server.app import build_app
from pymem.service.auth import TokenVerifier
from pymem.storage.endpoints import Endpoints
from pymem.storage.store import Store


def vec(i: int) -> list[float]:
    v = [0.0] * DIM
    v[i % DIM] = 1.0
    return v


def _store(database, *, pool_size: int = 8, **settings) -> Store:
    s = database.settings(**settings)
    return Store(Endpoints(app=s.dsn, admin=s.admin_dsn), s, pool_size=pool_size)


def _seed(store: Store, tenant: str) -> None:
    store.bind(Context(tenant=tenant)).upsert_many([{"id": "seed", "content": "x", "embedding": vec(0)}],
                                                    idempotency_key=f"seed-{tenant}")


class _HeldHead:
    """An open transaction of the administrative login holding tenant's chain-head row."""

    def __init__(self, database, tenant: str):
        self.conn = database.admin()
        self.conn.autocommit = False
        self.conn.execute("select 1 from pymem.chain_heads where tenant_id = %s for update", (tenant,))

    def release(self) -> None:
        self.conn.rollback()
        self.conn.close()


def _count(database, tenant: str) -> int:
    with database.admin() as conn:
        return conn.execute("select count(*) from pymem.memories where tenant_id = %s", (tenant,)).fetchone()[0]


def _upsert(url: str, tenant: str, key: str, i: int = 1):
    return call(url, "upsert_many", {"records": [{"id": key, "content": "n", "embedding": vec(i)}]},
                token=token(tenant=tenant), idempotency_key=key)


def test_a_held_chain_head_fails_the_call_in_the_lock_timeout_and_other_tenants_go_on(database):
    store = _store(database, lock_timeout_ms=1500)
    _seed(store, "held")
    _seed(store, "free")
    held = _HeldHead(database, "held")
    try:
        with running(build_app(store, tokens=TokenVerifier.hs256(KEY), per_tenant=0)) as url:
            results = {}

            def blocked():
                results["blocked"] = (time.monotonic(), *_upsert(url, "held", "h1"))

            started = time.monotonic()
            t = threading.Thread(target=blocked)
            t.start()
            time.sleep(0.3)
            status, body = _upsert(url, "free", "f1")  # another tenant's write does not wait
            assert status == 200 and body["result"]["upserted"] == 1
            t.join(30)
            ended, status, body = results["blocked"]
            assert (status, body["error"]["code"]) == (503, "lock_timeout")
            assert ended - started < 15, "the blocked call failed within its lock timeout, not when the lock went"
    finally:
        held.release()
        store.close()
    assert _count(database, "held") == 1 and _count(database, "free") == 2  # nothing of the failed call


def test_a_tenant_beyond_its_limit_gets_429_with_retry_after_and_others_do_not(database):
    store = _store(database, lock_timeout_ms=8000)
    _seed(store, "busy")
    _seed(store, "calm")
    held = _HeldHead(database, "busy")
    try:
        app = build_app(store, tokens=TokenVerifier.hs256(KEY), per_tenant=1)
        with running(app) as url:
            t = threading.Thread(target=_upsert, args=(url, "busy", "b1"))
            t.start()
            limits = app.state.runtime.service.limits
            deadline = time.monotonic() + 10
            while limits.running("busy") < 1:  # the upsert runs, waiting on the held lock
                assert time.monotonic() < deadline
                time.sleep(0.02)
            status, headers, body = request(url, "POST", "/v1/call", {"verb": "get", "args": {"id": "seed"}},
                                            token=token(tenant="busy"))
            assert status == 429 and body["error"]["code"] == "tenant_busy"
            assert int(headers["retry-after"]) >= 1 and body["error"]["details"]["retry_after"] > 0
            status, got = call(url, "get", {"id": "seed"}, token=token(tenant="calm"))
            assert status == 200 and got["result"]["id"] == "seed"
            with Client(url, token(tenant="busy")) as client, pytest.raises(TenantBusy) as caught:
                client.get("seed")
            assert caught.value.retry_after and caught.value.retry_after >= 1
            t.join(30)
    finally:
        held.release()
        store.close()


def test_an_exhausted_pool_fails_the_surplus_fast_with_its_own_code(database):
    store = _store(database, pool_size=2, pool_wait=1.0, lock_timeout_ms=20_000)
    for tenant in ("p1", "p2", "p3"):
        _seed(store, tenant)
    holds = [_HeldHead(database, "p1"), _HeldHead(database, "p2")]
    threads = []
    try:
        with running(build_app(store, tokens=TokenVerifier.hs256(KEY), per_tenant=0)) as url:
            for tenant in ("p1", "p2"):  # each takes one of the two connections and waits on its lock
                threads.append(threading.Thread(target=_upsert, args=(url, tenant, f"{tenant}-x")))
                threads[-1].start()
            time.sleep(0.5)
            started = time.monotonic()
            status, headers, body = request(url, "POST", "/v1/call", {"verb": "get", "args": {"id": "seed"}},
                                            token=token(tenant="p3"))
            waited = time.monotonic() - started
            assert (status, body["error"]["code"]) == (503, "pool_saturated")
            assert int(headers["retry-after"]) >= 1
            assert waited < 10, "the surplus is refused after the pool wait, not after the blocked calls"
            with Client(url, token(tenant="p3")) as client, pytest.raises(PoolExhausted):
                client.get("seed")
            for h in holds:
                h.release()
            holds = []
            for t in threads:
                t.join(30)
            assert call(url, "get", {"id": "seed"}, token=token(tenant="p3"))[0] == 200
    finally:
        for h in holds:
            h.release()
        store.close()


def _server_admin(database):
    """A superuser connection to the server's `postgres` database (to change the test database)."""
    from urllib.parse import urlsplit

    import psycopg

    return psycopg.connect(with_user(database.admin_dsn, urlsplit(database.admin_dsn).username or "postgres",
                                     database="postgres"), autocommit=True)


def test_readyz_answers_within_a_second_while_the_database_refuses_connections(database, store):
    with running(build_app(store, tokens=TokenVerifier.hs256(KEY), probe_interval=0.2)) as url:
        assert request(url, "GET", "/readyz")[0] == 200
        with _server_admin(database) as admin:
            admin.execute(f'alter database "{database.name}" allow_connections false')
            admin.execute("select pg_terminate_backend(pid) from pg_stat_activity where datname = %s and pid <> "
                          "pg_backend_pid()", (database.name,))
        try:
            deadline = time.monotonic() + 10
            while True:
                started = time.monotonic()
                status, _, body = request(url, "GET", "/readyz")
                assert time.monotonic() - started < 1.0, "a readiness probe answers at once"
                if status == 503 or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            assert status == 503 and body["health"]["database"]["reachable"] is False
            status, got = call(url, "get", {"id": "x"}, token=token())
            assert status == 503 and got["error"]["code"] == "database_unavailable"
            assert request(url, "GET", "/healthz")[0] == 200
        finally:
            with _server_admin(database) as admin:
                admin.execute(f'alter database "{database.name}" allow_connections true')
        deadline = time.monotonic() + 20
        while request(url, "GET", "/readyz")[0] != 200:
            assert time.monotonic() < deadline, "the service came back by itself"
            time.sleep(0.2)
        assert call(url, "get", {"id": "x"}, token=token())[0] == 200


# -- hostile input --------------------------------------------------------------------------------------

@pytest.fixture
def url(store):
    with running(build_app(store, tokens=TokenVerifier.hs256(KEY))) as base:
        yield base


def test_a_subnormal_vector_is_refused_like_a_zero_one(url, store, database):
    tiny = [1e-46] * DIM
    mem = store.bind(Context(tenant="acme"))
    with pytest.raises(InvalidArguments, match="too small"):
        mem.upsert_many([{"id": "t", "content": "x", "embedding": tiny}], idempotency_key="k")
    with pytest.raises(InvalidArguments, match="too small"):
        mem.search([1e-30] + [0.0] * (DIM - 1), top_k=3)
    status, got = call(url, "upsert_many", {"records": [{"id": "t", "embedding": tiny}]}, token=token(),
                       idempotency_key="k2")
    assert (status, got["error"]["code"]) == (400, "invalid_arguments")
    status, got = call(url, "search", {"vector": tiny, "top_k": 3}, token=token())
    assert (status, got["error"]["code"]) == (400, "invalid_arguments")
    assert _count(database, "acme") == 0


def test_a_mebibyte_without_whitespace_is_refused_before_it_is_judged(url, database, monkeypatch):
    judged = []
    real = gate.judge_or_refuse
    monkeypatch.setattr(gate, "judge_or_refuse", lambda *a, **k: judged.append(1) or real(*a, **k))
    status, got = call(url, "remember", {"record": "a" * (1 << 20), "provenance": {"origin": "user_asserted"}},
                       token=token())
    assert (status, got["error"]["code"]) == (400, "invalid_arguments") and "limit" in got["error"]["message"]
    assert judged == [], "the size is checked before the content is scanned"
    assert request(url, "GET", "/healthz")[0] == 200
    with database.admin() as conn:
        assert conn.execute("select count(*) from pymem.ledger where tenant_id = 'acme'").fetchone()[0] == 0


@pytest.mark.parametrize("query", ["q" * 9000, "where is\x00it"])
def test_recall_and_deliver_queries_are_bounded_and_nul_free(url, store, query):
    mem = store.bind(Context(tenant="acme"))
    with pytest.raises(InvalidArguments):
        from pymem import recall
        recall(mem, query)
    status, got = call(url, "recall", {"query": query}, token=token())
    assert (status, got["error"]["code"]) == (400, "invalid_arguments")
    assert call(url, "start_session", {"session_id": "s1", "surface": "cli"}, token=token())[0] == 200
    status, got = call(url, "deliver", {"session_id": "s1", "query": query}, token=token())
    assert (status, got["error"]["code"]) == (400, "invalid_arguments")


def test_an_error_reply_stays_small_whatever_the_request_held(url):
    args = {f"name{i}": 1 for i in range(50_000)}
    status, _, body = request(url, "POST", "/v1/call", {"verb": "get", "args": args}, token=token())
    assert status == 400 and body["error"]["code"] == "invalid_arguments"
    assert len(body["error"]["message"]) <= 1000 and "and 49990 more" in body["error"]["message"]


def test_review_correction_tags_must_be_a_list(url, kstore, database):
    args = {"rule_text": "Use tabs.", "subject": "src/*.py", "base_commit": "a" * 40, "assertion": "true",
            "tags": {}}
    status, got = call(url, "file_review_correction", args, token=token(actor="alice"))
    assert (status, got["error"]["code"]) == (400, "invalid_arguments")
    from pymem.conventions import file_review_correction
    with pytest.raises(InvalidArguments, match="tags"):
        file_review_correction(kstore.bind(Context(tenant="acme", actor="alice")), "Use tabs.", "src/*.py", "a" * 40,
                               "true", tags={})
    assert _count(database, "acme") == 0


def test_the_codes_of_contention_are_distinct():
    from pymem.errors import ServerError, StatementTimeout, TransactionConflict
    from pymem.service.wire import code_for, status_for

    codes = {cls: code_for(cls("x")) for cls in (TenantBusy, PoolExhausted, LockTimeout, StatementTimeout,
                                                  TransactionConflict, ServerError)}
    assert len(set(codes.values())) == len(codes)
    assert status_for(codes[TransactionConflict]) == 409 and status_for(codes[TenantBusy]) == 429


def test_heavy_calls_share_a_bound_that_small_calls_never_wait_for(database):
    """A tenant's 2,000-row batches or 64 KiB notes take the CPU of as many backends as it may run
    calls; the service runs at most `heavy_calls` of them at once. With the one slot taken, a
    heavy call is refused after the pool wait (503 pool_saturated, nothing written) while another
    tenant's small calls are answered; once the slot is free the same call succeeds."""
    store = _store(database, pool_wait=1.0)
    _seed(store, "calm")
    records = [{"id": f"r{i}", "content": "n", "embedding": vec(i)} for i in range(150)]
    app = build_app(store, tokens=TokenVerifier.hs256(KEY), per_tenant=0, heavy_calls=1)
    try:
        with running(app) as url:
            lane = app.state.runtime.service.heavy
            with lane.slot("someone-else", True):  # the one slot, held as a running heavy call holds it
                status, headers, body = request(url, "POST", "/v1/call",
                                                {"verb": "upsert_many", "args": {"records": records},
                                                 "idempotency_key": "big"}, token=token(tenant="heavy"))
                assert (status, body["error"]["code"]) == (503, "pool_saturated")
                assert int(headers["retry-after"]) >= 1
                assert _count(database, "heavy") == 0
                status, got = call(url, "get", {"id": "seed"}, token=token(tenant="calm"))
                assert status == 200 and got["result"]["id"] == "seed"
                status, got = _upsert(url, "calm", "small")  # a one-row write is light
                assert status == 200
            status, got = call(url, "upsert_many", {"records": records}, token=token(tenant="heavy"),
                               idempotency_key="big")
            assert status == 200 and got["result"]["upserted"] == 150
            assert lane.running() == 0
    finally:
        store.close()
    assert _count(database, "heavy") == 150 and _count(database, "calm") == 2


def test_a_statement_past_the_statement_timeout_fails_with_its_own_code(database):
    """A statement that runs past --statement-timeout is cancelled: 503 statement_timeout, nothing
    written. (Here the statement waits on a held row with a lock timeout longer than the statement
    timeout, so it is the statement timeout that ends it.)"""
    store = _store(database, lock_timeout_ms=60_000, statement_timeout_ms=1000)
    _seed(store, "slow")
    held = _HeldHead(database, "slow")
    try:
        with running(build_app(store, tokens=TokenVerifier.hs256(KEY), per_tenant=0)) as url:
            status, headers, body = request(url, "POST", "/v1/call",
                                            {"verb": "upsert_many", "idempotency_key": "s1",
                                             "args": {"records": [{"id": "s1", "content": "n", "embedding": vec(1)}]}},
                                            token=token(tenant="slow"))
            assert (status, body["error"]["code"]) == (503, "statement_timeout")
            assert int(headers["retry-after"]) >= 1
    finally:
        held.release()
        store.close()
    assert _count(database, "slow") == 1


def test_an_mcp_call_of_a_tenant_at_its_limit_is_refused_tenant_busy(database):
    import anyio
    import httpx2
    from mcp import Client as McpClient
    from mcp.client.streamable_http import streamable_http_client

    store = _store(database, lock_timeout_ms=20_000)
    _seed(store, "busy")
    held = _HeldHead(database, "busy")
    try:
        app = build_app(store, tokens=TokenVerifier.hs256(KEY), per_tenant=1)
        with running(app) as url:
            t = threading.Thread(target=_upsert, args=(url, "busy", "b1"))
            t.start()
            limits = app.state.runtime.service.limits
            deadline = time.monotonic() + 30
            while limits.running("busy") < 1:  # the upsert runs, waiting on the held lock
                assert time.monotonic() < deadline
                time.sleep(0.02)

            async def remember() -> Any:
                async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token(tenant='busy')}"}) as http:
                    async with McpClient(streamable_http_client(url + "/mcp", http_client=http)) as client:
                        return await client.call_tool("remember", {"content": "Ships on Tuesdays",
                                                                   "origin": "user_asserted", "id": "mcp-1"})

            out = anyio.run(remember)
            text = " ".join(getattr(block, "text", "") for block in out.content)
            assert out.is_error and "tenant_busy" in text
            held.release()
            held = None
            t.join(60)
    finally:
        if held is not None:
            held.release()
        store.close()
    with database.admin() as conn:
        assert conn.execute("select count(*) from pymem.memories where id = 'mcp-1'").fetchone()[0] == 0
