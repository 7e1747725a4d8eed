"""pymem behind a real PgBouncer in transaction mode (tests named *pgbouncer*; skipped, with the
reason, where pgbouncer is not installed).

Without the setting, psycopg's server-side prepared statements meet other clients' server
connections and collide (DuplicatePreparedStatement, "prepared statement does not exist", "bind
message supplies N parameters"); with PYMEM_POOLER=transaction the same load runs clean. The
isolation, delivery and LangGraph suites are run whole through PgBouncer
(PYMEM_TEST_POOLER=pgbouncer re-points every test's app connections at it)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from helpers.database import with_user
from helpers.lessons import EMBEDDER
from helpers.pgbouncer import through

from pymem import Context
from pymem.errors import ServerError
from pymem.facts import follow, publish

THREADS, ROUNDS = 6, 30
REPO = Path(__file__).resolve().parents[2]


def _load(store) -> list[str]:
    """6 threads x 30 rounds of writes, reads, pages and searches, each thread its own tenant."""
    errors: list[str] = []
    lock = threading.Lock()
    vector = EMBEDDER.embed(["a note"])[0]

    def work(n: int) -> None:
        mem = store.bind(Context(tenant=f"t{n}", actor="load"))
        for r in range(ROUNDS):
            try:
                mem.upsert_many([{"id": f"r{r}", "content": f"note {r}", "embedding": vector}],
                                idempotency_key=f"k{n}-{r}")
                assert mem.get(f"r{r}")["revision"] == 1
                mem.list_chunks(limit=5)
                assert mem.search(vector, top_k=3)
            except Exception as exc:  # noqa: BLE001 - every failure is counted by its kind
                with lock:
                    errors.append(f"{type(exc).__name__}: {str(exc)[:80]}")

    threads = [threading.Thread(target=work, args=(n,)) for n in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)
    return errors


@pytest.fixture
def bounced(database, pgbouncer_address):
    """`database` with its app login reaching it through PgBouncer."""
    return database, through(database.app_dsn if database.pooler is None else database.direct_app_dsn,
                             *pgbouncer_address)


def test_pgbouncer_without_the_pooler_setting_prepared_statements_collide(bounced):
    database, dsn = bounced
    store = database.store(dsn=dsn, pooler=None)
    try:
        errors = _load(store)
    finally:
        store.close()
    assert errors, "6 threads x 30 rounds through PgBouncer in transaction mode raised nothing without the setting"
    assert any("prepared statement" in e or "DuplicatePreparedStatement" in e or "bind message" in e
               for e in errors), errors[:5]


def test_pgbouncer_with_the_pooler_setting_the_same_load_runs_clean(bounced):
    database, dsn = bounced
    store = database.store(dsn=dsn, pooler="transaction")
    try:
        assert _load(store) == []
        # nothing was prepared on the server: no statement named by psycopg exists on any connection
        with database.admin() as admin:
            assert admin.execute("select count(*) from pymem.memories").fetchone()[0] == THREADS * ROUNDS
    finally:
        store.close()


def test_pgbouncer_the_async_store_runs_the_same_load_clean(bounced):
    """pymem.aio through PgBouncer in transaction mode with the pooler setting: 6 tasks on one
    event loop x 30 rounds of writes, reads, pages and searches, no error, nothing prepared."""
    import asyncio

    from pymem import aio

    database, dsn = bounced
    vector = EMBEDDER.embed(["a note"])[0]
    errors: list[str] = []

    async def work(store, n: int) -> None:
        mem = store.bind(Context(tenant=f"t{n}", actor="load"))
        for r in range(ROUNDS):
            try:
                await mem.upsert_many([{"id": f"r{r}", "content": f"note {r}", "embedding": vector}],
                                      idempotency_key=f"k{n}-{r}")
                assert (await mem.get(f"r{r}"))["revision"] == 1
                await mem.list_chunks(limit=5)
                assert await mem.search(vector, top_k=3)
            except Exception as exc:  # noqa: BLE001 - every failure is counted by its kind
                errors.append(f"{type(exc).__name__}: {str(exc)[:80]}")

    async def main() -> None:
        store = await aio.Store.open(database.settings(dsn=dsn, pooler="transaction"))
        try:
            await asyncio.gather(*(work(store, n) for n in range(THREADS)))
        finally:
            await store.close()

    asyncio.run(main())
    assert errors == []
    with database.admin() as admin:
        assert admin.execute("select count(*) from pymem.memories").fetchone()[0] == THREADS * ROUNDS


def test_pgbouncer_a_superuser_login_is_refused_with_a_clear_error(bounced, server_dsn):
    database, _ = bounced
    superuser = through(with_user(server_dsn, "postgres", database=database.name), *_address(bounced))
    with pytest.raises(ServerError, match="SET ROLE"):
        database.store(dsn=superuser, pooler="transaction")


def _address(bounced):
    from urllib.parse import urlsplit

    parts = urlsplit(bounced[1])
    return parts.hostname, parts.port


def test_pgbouncer_following_facts_needs_a_direct_connection(bounced):
    database, dsn = bounced
    store = database.store(dsn=dsn, pooler="transaction", direct_dsn=None)
    try:
        mem = store.bind(Context(tenant="acme", actor="a"))
        with pytest.raises(ServerError, match="PYMEM_DIRECT_DSN"):
            follow(mem, "build", "tenant")
    finally:
        store.close()
    direct = database.direct_app_dsn or database.app_dsn
    store = database.store(dsn=dsn, pooler="transaction", direct_dsn=direct)
    try:
        mem = store.bind(Context(tenant="acme", actor="a"))
        with follow(mem, "build", "tenant", timeout=30) as stream:
            publish(mem, "build", "status", "green", "tenant")
            assert stream.next(30).value == "green"
    finally:
        store.close()


@pytest.mark.slow
def test_pgbouncer_isolation_delivery_and_langgraph_suites_pass_through_it(pgbouncer_address):
    """The isolation, delivery and LangGraph test files, run whole with every app connection
    through PgBouncer in transaction mode and the pooler setting on."""
    files = ["tests/db/test_isolation.py", "tests/db/test_delivery.py", "tests/db/test_langgraph_store.py",
             "tests/db/test_langgraph_isolation.py", "tests/db/test_caller_transaction.py"]
    env = {**os.environ, "PYMEM_TEST_POOLER": "pgbouncer"}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *files],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=3600)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert " passed" in done.stdout and "skipped" not in done.stdout.splitlines()[-1], done.stdout[-2000:]
