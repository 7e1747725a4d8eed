"""Retention: a memory with a ttl disappears from every read path once it expires, a purge deletes
it as chained events (verification stays clean), and the expiry is the database's to date.

Expiry is made to happen without waiting on the machine: `expire` backdates a row's expires_at
as the superuser (triggers off, so no event is chained; expires_at is bookkeeping, not hashed),
and the one test that waits for a real ttl polls the database's own clock, never a budget.
"""

from __future__ import annotations

import time
from datetime import timedelta

import psycopg
import pytest
from helpers.database import AGENT_LOGIN, bind_login, login_dsn
from helpers.delivery import EMBEDDER, POLICY, TRUST, remember
from helpers.lessons import lesson

from pymem import Context, deliver, recall, start_session
from pymem.errors import AccessDenied, InvalidArguments
from pymem.integrity.independent import verify_independently
from pymem.integrity.verify import verify_store
from pymem.langgraph import PymemStore
from pymem.lessons import lessons_for_task
from pymem.recall import recall_session
from pymem.storage.retention import purge_expired, refresh_expiry, retention_policy, set_retention

DIM = 384
QUERY = "what does the user like to drink in the morning"


def expire(database, *ids: str) -> None:
    """Move these memories' expiry into the past, by the database's clock (superuser, triggers off)."""
    with database.admin() as conn, conn.transaction():
        conn.execute("set local session_replication_role = replica")
        conn.execute("update pymem.memories set expires_at = now() - interval '1 second' where id = any(%s)",
                      (list(ids),))


def expiry_of(database, memory_id: str):
    with database.admin() as conn:
        return conn.execute("select ttl, expires_at, updated_at from pymem.memories where id = %s",
                            (memory_id,)).fetchone()


def clean(store, database) -> None:
    report = verify_store(store)
    assert report.clean, report.first_problem
    with psycopg.connect(database.admin_dsn) as conn:
        independent = verify_independently(conn)
    assert independent.clean, independent.first_problem


def _graph(memories, **kwargs):
    return PymemStore(memories, index={"dims": DIM, "embed": EMBEDDER, "fields": ["text"]}, policy=POLICY,
                      trust=TRUST, **kwargs)


@pytest.fixture
def acme(store):
    whole = store.bind(Context(tenant="acme", actor="app"))
    u1 = store.bind(Context(tenant="acme", actor="app", scope={"user": "u1"}))
    start_session(u1, "s-u1", "chat", first_message="what to drink")
    ids = {
        "keep": remember(whole, "Everyone: the office kitchen serves coffee in the morning."),
        "gone": remember(whole, "The user likes to drink green tea in the morning."),
        "hot": remember(u1, "u1 likes to drink oat milk in the morning", tags=["hot"]),
        "lesson": lesson(whole, "prefer tea suggestions in the morning", ["drinks"]).id,
    }
    return store, whole, u1, ids


def test_the_database_dates_the_expiry_from_the_writers_ttl(store, database):
    mem = store.bind(Context(tenant="acme", actor="app"))
    (mid,) = mem.add([{"content": "short lived", "ttl": 3600}])
    ttl, expires_at, written = expiry_of(database, mid)
    assert ttl == timedelta(hours=1) and expires_at == written + timedelta(hours=1)
    (never,) = mem.add([{"content": "no ttl, no policy"}])
    assert expiry_of(database, never)[:2] == (None, None)
    # the expiry is not the writer's to name: the app login has no privilege on the column
    with database.app() as conn:
        conn.execute("select pymem.set_context('acme', 'app')")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("insert into pymem.memories (tenant_id, id, content, expires_at)"
                         " values ('acme', 'forever', 'x', 'infinity')")


@pytest.mark.parametrize("bad", [0, -5, float("nan"), float("inf"), "3600", True, 10 ** 12])
def test_a_bad_ttl_is_refused_and_nothing_is_written(store, bad):
    mem = store.bind(Context(tenant="acme", actor="app"))
    with pytest.raises(InvalidArguments):
        mem.add([{"id": "x", "content": "x", "ttl": bad}])
    with pytest.raises(InvalidArguments):
        mem.upsert_many([{"id": "y", "content": "y"}], idempotency_key="k", ttl=bad)
    assert mem.get_many(["x", "y"]) == []


def test_an_expired_memory_is_gone_from_every_read_path(acme, database):
    store, whole, u1, ids = acme
    graph = _graph(whole, ttl={"default_ttl": 60})
    graph.put(("users", "u1"), "drink", {"text": "the user likes to drink matcha in the morning"})
    with database.admin() as conn:
        (item_id,) = conn.execute("select id from pymem.memories where kind = 'langgraph'").fetchone()
    chunk_vec = EMBEDDER.embed_one(QUERY)
    whole.upsert_many([{"id": "chunk", "content": "the user likes to drink water in the morning",
                        "embedding": chunk_vec, "scope": {"user": "u1"}}], idempotency_key="c1")
    everything = [ids["gone"], ids["hot"], ids["lesson"], item_id, "chunk"]

    def reads():
        seen = set()
        seen |= {i for i in everything if whole.get(i) is not None}
        seen |= {r.get("id") or r.get("chunk_id") for r in whole.list_chunks(limit=100)["chunks"]}
        seen |= {h["chunk_id"] for h in whole.search(chunk_vec, top_k=20)}
        seen |= {h["chunk_id"] for h in whole.search(chunk_vec, top_k=20, scope_filter={"user": "u1"})}
        kept = recall(whole, QUERY, top_k=20, policy=POLICY, trust=TRUST, embedder=EMBEDDER)
        seen |= {m.id for m in kept.kept} | {w.id for w in kept.withheld}
        kept = recall(whole, QUERY, top_k=20, policy=POLICY, trust=TRUST, embedder=EMBEDDER, hybrid=False,
                      scope_filter={"user": "u1"})
        seen |= {m.id for m in kept.kept} | {w.id for w in kept.withheld}
        session = recall_session(u1, "s-u1", QUERY, top_k=20, policy=POLICY, trust=TRUST, embedder=EMBEDDER)
        seen |= {m.id for m in session.kept} | {w.id for w in session.withheld}
        delivery = deliver(u1, "s-u1", QUERY, policy=POLICY, trust=TRUST, embedder=EMBEDDER)
        seen |= {i.id for i in delivery.items}
        seen |= {x.id for x in lessons_for_task(whole, ["drinks"], cache=None).lessons}
        seen |= {x.id for x in lessons_for_task(u1, ["drinks"], cache=None, session_id="s-u1").lessons}
        if graph.get(("users", "u1"), "drink") is not None:
            seen.add(item_id)
        if graph.search(("users",), query="drink"):
            seen.add(item_id)
        with database.app() as conn:  # a raw SELECT under the read policy
            conn.execute("select pymem.set_context('acme', 'app')")
            seen |= {r[0] for r in conn.execute("select id from pymem.memories")}
        return seen

    before = reads()
    assert set(everything) <= before  # every path finds them while they live
    expire(database, *everything)
    after = reads()
    assert not set(everything) & after, set(everything) & after
    assert ids["keep"] in after
    clean(store, database)


def test_a_real_ttl_expires_by_the_databases_clock(store, database):
    mem = store.bind(Context(tenant="acme", actor="app"))
    (mid,) = mem.add([{"content": "one second", "ttl": 1}])
    assert mem.get(mid) is not None or expiry_of(database, mid)[1] is not None
    with database.admin() as conn:  # wait on the database's clock, however slow the machine
        while conn.execute("select clock_timestamp() <= %s", (expiry_of(database, mid)[1],)).fetchone()[0]:
            time.sleep(0.1)
    assert mem.get(mid) is None and mem.get_many([mid]) == []


def test_purge_deletes_expired_memories_as_chained_events(acme, database):
    store, whole, _, ids = acme
    expire(database, ids["gone"], ids["hot"])
    assert purge_expired(whole, batch=1) == 2  # two transactions of one
    with database.admin() as conn:
        left = {r[0] for r in conn.execute("select id from pymem.memories")}
        events = conn.execute("select event, memory_id from pymem.ledger where event in"
                              " ('memory.delete', 'retention.purged') order by seq").fetchall()
    assert ids["gone"] not in left and ids["hot"] not in left and ids["keep"] in left
    assert sorted(m for e, m in events if e == "memory.delete") == sorted([ids["gone"], ids["hot"]])
    assert [e for e, _ in events].count("retention.purged") == 2
    assert purge_expired(whole) == 0
    clean(store, database)


def test_the_purge_for_a_scheduler_purges_every_tenant(store, database):
    for tenant in ("acme", "globex"):
        mem = store.bind(Context(tenant=tenant, actor="app"))
        mem.add([{"id": "old", "content": "old", "ttl": 60}, {"id": "new", "content": "new", "ttl": 60}])
    expire(database, "old")
    with database.admin() as conn:
        rows = conn.execute("select * from pymem.purge_expired_all()").fetchall()
        assert sorted(rows) == [("acme", 1), ("globex", 1)]
        assert conn.execute("select count(*) from pymem.memories where id = 'new'").fetchone()[0] == 2
    clean(store, database)


def test_an_app_login_cannot_run_the_schedulers_purge(database):
    with database.app() as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute("select * from pymem.purge_expired_all()")


def test_writing_an_expired_id_writes_it_afresh(store, database):
    mem = store.bind(Context(tenant="acme", actor="app"))
    mem.add([{"id": "m", "content": "first", "ttl": 60}])
    mem.upsert_many([{"id": "c", "content": "chunk"}], idempotency_key="k1", ttl=60)
    expire(database, "m", "c")
    mem.add([{"id": "m", "content": "second"}])
    mem.upsert_many([{"id": "c", "content": "chunk again"}], idempotency_key="k2")
    assert mem.get_row("m")["content"] == "second" and mem.get_row("m")["revision"] == 1
    assert mem.get("c")["content"] == "chunk again"
    clean(store, database)


def test_the_tenant_policy_gives_the_default_and_bounds_every_writer(store, database):
    operator = store.bind(Context(tenant="acme", actor="ops"))
    seq = set_retention(operator, default_ttl=3600, max_ttl=86400)
    policy = retention_policy(operator)
    assert (policy.default_ttl, policy.max_ttl) == (timedelta(hours=1), timedelta(days=1)) and seq > 0
    (mid,) = operator.add([{"content": "takes the default"}])
    assert expiry_of(database, mid)[0] == timedelta(hours=1)
    with pytest.raises(InvalidArguments, match="maximum"):
        operator.add([{"id": "long", "content": "too long", "ttl": 2 * 86400}])
    assert operator.get("long") is None
    with pytest.raises(InvalidArguments):
        set_retention(operator, default_ttl=7200, max_ttl=3600)
    set_retention(operator)  # both None: no policy
    assert retention_policy(operator) is None
    clean(store, database)


def test_a_bound_agent_cannot_set_the_policy_nor_exceed_it(store, database):
    operator = store.bind(Context(tenant="acme", actor="ops"))
    set_retention(operator, max_ttl=3600)
    bind_login(database, AGENT_LOGIN, adapter="codex", tenants=["acme"])
    with psycopg.connect(login_dsn(database, AGENT_LOGIN)) as conn:
        conn.execute("select pymem.set_context('acme', 'agent', 'codex')")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("select pymem.set_retention(null, null)")
    with psycopg.connect(login_dsn(database, AGENT_LOGIN)) as conn:
        conn.execute("select pymem.set_context('acme', 'agent', 'codex')")
        # a ttl beyond the tenant's maximum, or no ttl at all (never expiring), is not the agent's to choose
        with pytest.raises(psycopg.errors.IntervalFieldOverflow):
            conn.execute("insert into pymem.memories (tenant_id, id, content, source_adapter, ttl)"
                         " values ('acme', 'a1', 'x', 'codex', interval '10 years')")
    with psycopg.connect(login_dsn(database, AGENT_LOGIN)) as conn:
        conn.execute("select pymem.set_context('acme', 'agent', 'codex')")
        conn.execute("insert into pymem.memories (tenant_id, id, content, source_adapter)"
                     " values ('acme', 'a2', 'x', 'codex')")
        assert conn.execute("select ttl from pymem.memories where id = 'a2'").fetchone()[0] == timedelta(hours=1)
        conn.commit()
        conn.execute("select pymem.set_context('acme', 'agent', 'codex')")
        # nor can it push the expiry out by writing the column, or by an update of its ttl
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("update pymem.memories set expires_at = 'infinity' where id = 'a2'")
    with psycopg.connect(login_dsn(database, AGENT_LOGIN)) as conn:
        conn.execute("select pymem.set_context('acme', 'agent', 'codex')")
        with pytest.raises(psycopg.errors.IntervalFieldOverflow):
            conn.execute("update pymem.memories set ttl = interval '2 hours' where id = 'a2'")
    with database.admin() as conn:
        assert conn.execute("select count(*) from pymem.memories where id = 'a1'").fetchone()[0] == 0
        assert conn.execute("select ttl from pymem.memories where id = 'a2'").fetchone()[0] == timedelta(hours=1)


def test_a_bound_agent_purges_only_its_own_rows_and_no_other_tenant(store, database):
    operator = store.bind(Context(tenant="acme", actor="ops"))
    operator.add([{"id": "ops-old", "content": "x", "ttl": 60}])
    store.bind(Context(tenant="globex", actor="ops")).add([{"id": "globex-old", "content": "x", "ttl": 60}])
    bind_login(database, AGENT_LOGIN, adapter="codex", tenants=["acme"])
    with psycopg.connect(login_dsn(database, AGENT_LOGIN)) as conn:
        conn.execute("select pymem.set_context('acme', 'agent', 'codex')")
        conn.execute("insert into pymem.memories (tenant_id, id, content, source_adapter, ttl)"
                      " values ('acme', 'codex-old', 'x', 'codex', interval '60 seconds')")
        conn.commit()
    expire(database, "ops-old", "globex-old", "codex-old")
    with psycopg.connect(login_dsn(database, AGENT_LOGIN)) as conn:
        conn.execute("select pymem.set_context('acme', 'agent', 'codex')")
        assert conn.execute("select pymem.purge_expired()").fetchone()[0] == 1
        conn.commit()
        with pytest.raises(psycopg.errors.InsufficientPrivilege):  # globex is outside its binding
            conn.execute("select pymem.set_context('globex', 'agent', 'codex')")
    with psycopg.connect(login_dsn(database, AGENT_LOGIN)) as conn:
        # a tenant set by hand outside the binding reads as unset: nothing to purge, nothing purged
        conn.execute("select set_config('pymem.tenant', 'globex', true)")
        with pytest.raises(psycopg.errors.InvalidParameterValue):
            conn.execute("select pymem.purge_expired()")
    with database.admin() as conn:
        assert {r[0] for r in conn.execute("select id from pymem.memories")} == {"ops-old", "globex-old"}
    clean(store, database)


def test_a_write_restarts_the_clock_and_refresh_restarts_it_without_reviving(store, database):
    mem = store.bind(Context(tenant="acme", actor="app"))
    mem.add([{"id": "a", "content": "a", "ttl": 600}, {"id": "b", "content": "b", "ttl": 600}])
    with store.transaction(mem.ctx) as conn:  # any write: the database dates the expiry anew
        conn.execute("update pymem.memories set tags = '{x}' where id = 'a'")
    first = expiry_of(database, "a")
    assert first[1] == first[2] + timedelta(minutes=10)
    expire(database, "b")
    assert refresh_expiry(mem, ["a", "b"]) == 1  # the expired one stays expired
    again = expiry_of(database, "a")
    assert again[1] == again[2] + timedelta(minutes=10) and again[2] >= first[2]
    assert mem.get("b") is None
    clean(store, database)


def test_bad_input_to_the_retention_verbs_changes_nothing(store):
    operator = store.bind(Context(tenant="acme", actor="ops"))
    for bad in ({"default_ttl": -1}, {"max_ttl": "1 day"}, {"default_ttl": 10 ** 12}):
        with pytest.raises(InvalidArguments):
            set_retention(operator, **bad)
    with pytest.raises(InvalidArguments):
        purge_expired(operator, batch=0)
    assert retention_policy(operator) is None
    agent = store.bind(Context(tenant="acme", actor="a", adapter="codex"))
    with pytest.raises(AccessDenied):
        set_retention(agent, default_ttl=60)
    scoped = store.bind(Context(tenant="acme", actor="ops", scope={"user": "u1"}))
    with pytest.raises(AccessDenied):
        set_retention(scoped, default_ttl=60)
    assert retention_policy(operator) is None
    with store.transaction(operator.ctx) as conn:
        assert conn.execute("select count(*) from pymem.ledger where event = 'retention.set'").fetchone()[0] == 0


def test_the_commands_set_the_policy_and_purge(store, database, monkeypatch):
    from helpers.cli import cli_runner

    run = cli_runner(database, monkeypatch)
    assert "no retention policy" in run("retention", "show").output
    result = run("retention", "set", "--default-ttl", "3600", "--max-ttl", "86400", "--actor", "ops")
    assert result.exit_code == 0, result.output
    assert "default ttl 3600s, maximum ttl 86400s" in run("retention", "show").output
    refused = run("retention", "set", "--default-ttl", "60", "--adapter", "codex")
    assert refused.exit_code != 0 and "operator" in refused.output
    remembered = run("remember", "--origin", "user_asserted", "--ttl", "60", "--id", "m1", "short lived")
    assert remembered.exit_code == 0, remembered.output
    for tenant in ("acme", "globex"):
        store.bind(Context(tenant=tenant, actor="app")).add([{"id": "old", "content": "x", "ttl": 60}])
    expire(database, "old", "m1")
    purged = run("purge", "--json")
    assert purged.exit_code == 0 and '"purged": 2' in purged.output  # acme's two
    everywhere = run("purge", "--all-tenants", "--json")
    assert everywhere.exit_code == 0 and '"globex": 1' in everywhere.output, everywhere.output
    assert run("purge", "--all-tenants", "--tenant", "acme").exit_code == 2
    assert run("verify").exit_code == 0


def test_the_definer_reads_leave_an_expired_row_out(store, database):
    """The functions that apply the read policy themselves (the owner's rights: the read policy does
    not filter for them) must drop an expired row too, each called directly as the app login, both
    plans where a function has two."""
    mem = store.bind(Context(tenant="acme", actor="app"))
    start_session(store.bind(Context(tenant="acme", actor="app", scope={"user": "u1"})), "s1", "chat")
    vec = EMBEDDER.embed_one("green tea in the morning")
    rows = [{"id": f"m{i}", "content": f"green tea in the morning {i}", "embedding": vec, "tags": ["hot"],
             "scope": {"user": "u1"}} for i in range(3)]
    mem.add(rows)
    lesson(mem, "green tea lessons for the morning", ["drinks"])
    with database.admin() as conn:
        lesson_id = conn.execute("select id from pymem.memories where kind = 'lesson'").fetchone()[0]
    ids = ["m0", "m1", "m2", lesson_id]
    calls = {
        "session_hot": "select id from pymem.session_hot('s1', 100)",
        "session_search exact": "select id from pymem.session_search('s1', %(v)s::vector, 10, 'exact')",
        "session_search hnsw": "select id from pymem.session_search('s1', %(v)s::vector, 10, 'hnsw')",
        "session_search_hybrid": "select id from pymem.session_search_hybrid('s1', %(v)s::vector, 'green tea', 10, 'exact')",
        "session_lessons": "select id from pymem.session_lessons('s1', '{drinks}', 10)",
        "session_receives": "select unnest(pymem.session_receives('s1', %(ids)s))",
        "_search_in_scope": "select unnest(pymem._search_in_scope(%(v)s::vector, 10, '{\"user\": \"u1\"}', false, null))",
        "_text_candidates": "select id from pymem._text_candidates('green tea', 10, '{}', false)",
    }

    def found():
        out = {}
        with database.app() as conn:
            conn.execute("select pymem.set_context('acme', 'app')")
            for name, sql in calls.items():
                out[name] = {r[0] for r in conn.execute(sql, {"v": str(vec), "ids": ids})}
        return out

    before = found()
    assert all(before[name] & {"m0", "m1", "m2", lesson_id} for name in calls), before
    expire(database, "m1", lesson_id)
    after = found()
    leaked = {name: seen & {"m1", lesson_id} for name, seen in after.items() if seen & {"m1", lesson_id}}
    assert not leaked, leaked
    assert all(after[name] for name in calls if name != "session_lessons"), after


def test_the_vector_rankings_leave_an_expired_row_out_for_a_caller_the_read_policy_shows_it(store, database):
    """pymem._vector_ranking runs with its caller's rights: for the app the read policy hides an
    expired row, but the owner's policy shows every row (the session searches run their ranking as
    the owner). Each of its plans (exact, HNSW, scoped) leaves the expired row out itself."""
    mem = store.bind(Context(tenant="acme", actor="app"))
    vec = EMBEDDER.embed_one("green tea in the morning")
    mem.add([{"id": f"m{i}", "content": f"green tea in the morning {i}", "embedding": vec,
              "scope": {"user": "u1"}} for i in range(3)])
    expire(database, "m1")
    with database.admin() as conn, conn.transaction():
        conn.execute("set local role pymem_owner")
        conn.execute("select pymem.set_context('acme', 'app')")
        assert conn.execute("select count(*) from pymem.memories where id = 'm1'").fetchone()[0] == 1
        for plan, scope_filter in (("exact", "{}"), ("hnsw", "{}"), ("exact", '{"user": "u1"}')):
            found = {r[0] for r in conn.execute(
                "select id from pymem._vector_ranking(%s::vector, 10, %s::jsonb, false, %s, 2000, null, 20000)",
                (str(vec), scope_filter, plan))}
            assert found == {"m0", "m2"}, (plan, scope_filter, found)
