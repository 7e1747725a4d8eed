"""What only the async surface has to prove (the verbs' own behaviour is the parity run's:
tests/helpers/flavours.py): one event loop serves other calls while a verb waits for the server;
CPU work leaves the loop; a caller's AsyncConnection is joined and never committed; bad
connections, a busy pool and a cancelled call give typed errors and write nothing."""

from __future__ import annotations

import asyncio
import contextvars
import threading

import psycopg
import pytest
from helpers.lessons import EMBEDDER, POLICY, ctx

from pymem import Context, InvalidArguments, Provenance, aio
from pymem.admission import judge
from pymem.errors import PoolExhausted, ServerError
from pymem.lessons import list_lessons

DIM = 384
VEC = [1.0] + [0.0] * (DIM - 1)
BASE = "the billing service retries failed webhooks three times"


def chunk(memory_id: str) -> dict:
    return {"id": memory_id, "distillate": f"about {memory_id}", "embedding": VEC}


def written(database) -> tuple[int, int]:
    """(memories, ledger entries) across all tenants, bypassing RLS."""
    with database.admin() as conn:
        return conn.execute("select (select count(*) from pymem.memories), (select count(*) from pymem.ledger)"
                            ).fetchone()


async def opened(database, **overrides) -> aio.Store:
    return await aio.Store.open(database.settings(**overrides))


async def waiting_on_a_lock(database, deadline: float = 60.0) -> None:
    """Until a backend of this database waits for a lock (the verb under test reached the server)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + deadline
    while loop.time() < end:
        with database.admin() as conn:
            if conn.execute("select count(*) from pg_stat_activity where datname = %s and wait_event_type = 'Lock'",
                            (database.name,)).fetchone()[0]:
                return
        await asyncio.sleep(0.05)
    raise AssertionError("no backend ever waited for the lock")


def test_the_loop_serves_other_calls_while_a_verb_waits_for_the_server(database):
    async def main():
        store = await opened(database)
        try:
            mem = store.bind(Context(tenant="acme", actor="a"))
            await mem.upsert_many([chunk("held"), chunk("free")], idempotency_key="seed")
            async with await psycopg.AsyncConnection.connect(database.app_dsn) as holder:
                # the caller's transaction updates "held" and keeps its row lock
                await mem.upsert_many([chunk("held")], idempotency_key="hold", conn=holder)
                blocked = asyncio.create_task(mem.upsert_many([chunk("held")], idempotency_key="blocked"))
                await waiting_on_a_lock(database)
                # the same loop answers another call meanwhile, and the blocked one is still waiting
                assert (await mem.get("free"))["revision"] == 1
                assert not blocked.done()
                await holder.commit()
            assert await blocked == {"upserted": 1, "replayed": False}
            assert (await mem.get("held"))["revision"] == 3
        finally:
            await store.close()
    asyncio.run(main())


def test_cpu_work_runs_off_the_loop_and_sees_the_callers_context(database, monkeypatch):
    seen: list[tuple[str, int, str | None]] = []
    request = contextvars.ContextVar("request", default=None)
    check, embed = judge.content_check, type(EMBEDDER).embed

    def watched_check(*args):
        seen.append(("check", threading.get_ident(), request.get()))
        return check(*args)

    def watched_embed(self, texts):
        seen.append(("embed", threading.get_ident(), request.get()))
        return embed(self, texts)

    monkeypatch.setattr(judge, "content_check", watched_check)
    monkeypatch.setattr(type(EMBEDDER), "embed", watched_embed)

    async def main():
        request.set("r-1")
        store = await opened(database)
        try:
            mem = store.bind(Context(tenant="acme", actor="a"))
            await aio.admit(mem, "Ivan likes green tea", Provenance("user_asserted"), policy=POLICY, embedder=EMBEDDER)
            return threading.get_ident()
        finally:
            await store.close()
    loop_thread = asyncio.run(main())
    assert {what for what, _, _ in seen} == {"check", "embed"}
    assert all(thread != loop_thread for _, thread, _ in seen)
    assert all(value == "r-1" for _, _, value in seen)


def test_a_callers_async_connection_is_joined_never_committed(database):
    async def main():
        store = await opened(database)
        try:
            mem = store.bind(Context(tenant="acme", actor="a"))
            async with await psycopg.AsyncConnection.connect(database.app_dsn) as conn:
                await aio.admit(mem, "rolled back with the caller", Provenance("user_asserted"), embedder=EMBEDDER,
                                conn=conn)
                await mem.upsert_many([chunk("gone")], idempotency_key="k", conn=conn)
                assert (await mem.get("gone", conn=conn))["revision"] == 1
                await conn.rollback()
                assert written(database) == (0, 0)
                await mem.upsert_many([chunk("kept")], idempotency_key="k", conn=conn)
                await conn.commit()
            assert (await mem.get("kept"))["revision"] == 1
            # autocommit: the verb's own transaction, committed
            async with await psycopg.AsyncConnection.connect(database.app_dsn, autocommit=True) as conn:
                await mem.upsert_many([chunk("auto")], idempotency_key="k2", conn=conn)
            assert (await mem.get("auto"))["revision"] == 1
        finally:
            await store.close()
    asyncio.run(main())


def test_a_connection_it_cannot_join_is_refused_with_a_typed_error_and_nothing_written(database):
    async def main():
        store = await opened(database)
        try:
            mem = store.bind(Context(tenant="acme", actor="a"))
            with psycopg.connect(database.app_dsn) as sync_conn:
                with pytest.raises(InvalidArguments, match="AsyncConnection"):
                    await mem.upsert_many([chunk("a")], idempotency_key="k", conn=sync_conn)
            with pytest.raises(InvalidArguments, match="AsyncConnection"):
                await aio.admit(mem, "x", Provenance("user_asserted"), conn="not a connection")
            with pytest.raises(InvalidArguments, match=r"pymem\.aio Memories"):
                await aio.admit(object(), "x", Provenance("user_asserted"))
            conn = await psycopg.AsyncConnection.connect(database.app_dsn)
            try:
                with pytest.raises(psycopg.errors.DivisionByZero):
                    await conn.execute("select 1 / 0")
                with pytest.raises(InvalidArguments, match="already failed"):
                    await mem.upsert_many([chunk("a")], idempotency_key="k", conn=conn)
            finally:
                await conn.close()
            with pytest.raises(ServerError, match="closed"):
                await mem.upsert_many([chunk("a")], idempotency_key="k", conn=conn)
        finally:
            await store.close()
        assert written(database) == (0, 0)
    asyncio.run(main())


def test_a_busy_pool_fails_after_its_wait_with_pool_exhausted(database):
    async def main():
        store = await aio.Store.open(database.settings(pool_wait=0.5), pool_size=1)
        try:
            mem = store.bind(Context(tenant="acme", actor="a"))
            async with store.connection():  # the pool's only connection
                with pytest.raises(PoolExhausted) as info:
                    await mem.upsert_many([chunk("a")], idempotency_key="k")
                assert info.value.retry_after
            assert await mem.upsert_many([chunk("a")], idempotency_key="k") == {"upserted": 1, "replayed": False}
        finally:
            await store.close()
    asyncio.run(main())
    assert written(database) == (1, 1)


def test_a_cancelled_call_writes_nothing_and_leaves_the_store_usable(database):
    async def main():
        store = await opened(database)
        try:
            mem = store.bind(Context(tenant="acme", actor="a"))
            await mem.upsert_many([chunk("held")], idempotency_key="seed")
            async with await psycopg.AsyncConnection.connect(database.app_dsn) as holder:
                await mem.upsert_many([chunk("held")], idempotency_key="hold", conn=holder)
                task = asyncio.create_task(mem.upsert_many([chunk("held"), chunk("new")], idempotency_key="cancelled"))
                await waiting_on_a_lock(database)
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
                await holder.rollback()
            assert await mem.get("new") is None
            assert (await mem.get("held"))["revision"] == 1
            # every connection of the pool still works
            results = await asyncio.gather(*(mem.upsert_many([chunk(f"n{i}")], idempotency_key=f"n{i}")
                                             for i in range(8)))
            assert all(r["upserted"] == 1 for r in results)
        finally:
            await store.close()
    asyncio.run(main())
    with database.admin() as conn:
        assert conn.execute("select count(*) from pymem.idempotency_keys where key = 'cancelled'").fetchone()[0] == 0


def test_eight_tasks_filing_at_once_lose_and_duplicate_nothing(database):
    """The async counterpart of the eight threads of tests/db/test_lessons.py: one loop, eight
    tasks, each filing the shared near-duplicate lesson and one of its own."""
    async def main():
        store = await opened(database)
        try:
            acme = store.bind(ctx())

            async def work(i: int) -> None:
                await aio.file_lesson(acme, BASE, ["webhooks", "billing"], "project", 0.5 + i / 20,
                                      origin="operator", policy=POLICY, embedder=EMBEDDER)
                await aio.file_lesson(acme, f"Worker {i} learned lesson number {i} about queue {i}", [f"w{i}"],
                                      "project", 0.8, origin="operator", policy=POLICY, embedder=EMBEDDER)
            await asyncio.gather(*(work(i) for i in range(8)))
        finally:
            await store.close()
    asyncio.run(main())
    with database.store() as store:
        found = list_lessons(store.bind(ctx()))
    shared = [x for x in found if x.tags == ["billing", "webhooks"]]
    assert len(shared) == 1 and shared[0].version == 8
    assert sorted(x.tags[0] for x in found if x not in shared) == [f"w{i}" for i in range(8)]


def test_a_bridged_connection_cannot_be_used_outside_an_awaited_call(database):
    from pymem.aio.connection import bridged

    async def main():
        async with await psycopg.AsyncConnection.connect(database.app_dsn) as conn:
            with pytest.raises(RuntimeError, match="outside an awaited"):
                bridged(conn).execute("select 1")
            assert (await (await conn.execute("select 1")).fetchone()) == (1,)
    asyncio.run(main())
