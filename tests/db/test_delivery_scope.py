"""Delivery stays inside the session's scope.

A session receives the memories of the scope it was started in and of that scope's ancestors:
tenant-wide memories reach every session, a user's memories only that user's sessions, a
sibling's never, whichever context delivers (an app delivers with a whole-tenant context). The
digest lists only sessions of the same scope or a narrower one. Tested with LangGraph items and
plain memories, as the app login and as a bound (and scoped) agent login; search, get and recall
for a context keep their own rule.
"""

from __future__ import annotations

import json

import psycopg
import pytest
from helpers.database import AGENT_LOGIN, bind_login, login_dsn
from helpers.delivery import EMBEDDER, POLICY, block_memory_ids, block_sessions, remember
from helpers.lessons import lesson

from pymem import Context, deliver, recall, start_session
from pymem.admission import AdapterTrustPolicy
from pymem.errors import UnknownSession
from pymem.langgraph import PymemStore
from pymem.lessons import LessonCache, deliver_with_lessons, lessons_for_task

QUERY = "what does the user like to drink in the morning"
DIM = 384


def _graph(memories):
    return PymemStore(memories, index={"dims": DIM, "embed": EMBEDDER, "fields": ["text"]}, policy=POLICY)


@pytest.fixture
def tenant(store):
    """acme: a tenant-wide memory, one memory (and one hot one) of user u1, one of u2, one of team t2,
    a LangGraph item under ("users", "u1"), and sessions of u1, u2 and the whole tenant."""
    whole = store.bind(Context(tenant="acme", actor="app"))
    u1 = store.bind(Context(tenant="acme", actor="app", scope={"user": "u1"}))
    u2 = store.bind(Context(tenant="acme", actor="app", scope={"user": "u2"}))
    team = store.bind(Context(tenant="acme", actor="app", scope={"team": "t2"}))
    start_session(u1, "s-u1", "chat", first_message="u1 private planning of the merger")
    start_session(u2, "s-u2-old", "chat", first_message="u2 asked about the coffee machine")
    start_session(whole, "s-tenant", "background", first_message="payroll for every employee")
    ids = {
        "tenant": remember(whole, "Everyone: the office kitchen serves coffee in the morning."),
        "u1": remember(u1, "The user u1 likes to drink green tea in the morning."),
        "u1-hot": remember(u1, "u1 is allergic to milk in drinks", tags=["hot"]),
        "u2": remember(u2, "The user u2 likes to drink espresso in the morning."),
        "team": remember(team, "Team t2 likes to drink cocoa in the morning."),
    }
    _graph(whole).put(("users", "u1"), "drink", {"text": "the user likes to drink matcha in the morning"})
    start_session(u2, "s-u2", "chat")
    start_session(whole, "s-all", "chat")
    return store, ids


def test_an_app_delivering_with_a_whole_tenant_context_keeps_to_the_sessions_scope(tenant):
    """The attack of the report: the app delivers u2's turn with a whole-tenant context."""
    store, ids = tenant
    whole = store.bind(Context(tenant="acme", actor="app"))
    block = deliver(whole, "s-u2", QUERY, top_k=10, floor=0.0, policy=POLICY, trust=AdapterTrustPolicy(),
                    embedder=EMBEDDER)
    got = set(block_memory_ids(block.text))
    assert ids["tenant"] in got and ids["u2"] in got
    assert not got & {ids["u1"], ids["u1-hot"], ids["team"]}, got
    assert "matcha" not in block.text and "green tea" not in block.text and "milk" not in block.text
    assert {i.id for i in block.items} == got
    # the digest: u2's own other session, never u1's nor the tenant-wide one
    assert block_sessions(block.text) == ["s-u2-old"]
    # a tenant-wide session receives only tenant-wide memories, and lists every session (it is the tenant's)
    block = deliver(whole, "s-all", QUERY, top_k=10, floor=0.0, policy=POLICY, trust=AdapterTrustPolicy(),
                    embedder=EMBEDDER)
    assert set(block_memory_ids(block.text)) == {ids["tenant"]}
    assert "matcha" not in block.text
    assert set(block_sessions(block.text)) == {"s-u1", "s-u2-old", "s-u2", "s-tenant"}


def test_a_users_context_receives_the_tenant_wide_memories_and_its_own(tenant):
    store, ids = tenant
    u2 = store.bind(Context(tenant="acme", actor="app", scope={"user": "u2"}))
    u1 = store.bind(Context(tenant="acme", actor="app", scope={"user": "u1"}))
    block = deliver(u2, "s-u2", QUERY, top_k=10, floor=0.0, policy=POLICY, trust=AdapterTrustPolicy(),
                    embedder=EMBEDDER)
    assert set(block_memory_ids(block.text)) == {ids["tenant"], ids["u2"]}
    start_session(u1, "s-u1-new", "chat")
    block = deliver(u1, "s-u1-new", QUERY, top_k=10, floor=0.0, policy=POLICY, trust=AdapterTrustPolicy(),
                    embedder=EMBEDDER)
    assert set(block_memory_ids(block.text)) == {ids["tenant"], ids["u1"], ids["u1-hot"]}
    assert [i.id for i in block.items if i.section == "hot"] == [ids["u1-hot"]]
    assert block_sessions(block.text) == ["s-u1"]
    # a LangGraph item sits in scopes of its own (lg_store, ns...): no ordinary session receives it
    assert "matcha" not in block.text
    # the context's own reads keep their rule: u2 still cannot search, get or recall the tenant-wide row
    assert u2.get(ids["tenant"]) is None
    assert ids["tenant"] not in {k.id for k in recall(u2, QUERY, top_k=10, policy=POLICY, embedder=EMBEDDER).kept}


def test_lessons_reach_only_the_sessions_that_receive_their_scope(tenant):
    store, _ = tenant
    whole = store.bind(Context(tenant="acme", actor="app"))
    u1 = store.bind(Context(tenant="acme", actor="app", scope={"user": "u1"}))
    shared = lesson(whole, "Run migrations with a lock timeout", ["db"])
    private = lesson(u1, "u1 runs migrations on Fridays only", ["db"])
    out = deliver_with_lessons(whole, "s-u2", None, ["db"], policy=POLICY, trust=AdapterTrustPolicy(), cache=None)
    assert [lesson.id for lesson in out.lessons] == [shared.id]
    out = deliver_with_lessons(u1, "s-u1", None, ["db"], policy=POLICY, trust=AdapterTrustPolicy(), cache=None)
    assert {lesson.id for lesson in out.lessons} == {shared.id, private.id}
    # lessons picked for the whole tenant and handed to deliver: u1's is left out of u2's turn
    picked = lessons_for_task(whole, ["db"], policy=POLICY, trust=AdapterTrustPolicy(), cache=None)
    assert {lesson.id for lesson in picked.lessons} == {shared.id, private.id}
    out = deliver(whole, "s-u2", None, lessons=picked.lessons, policy=POLICY, trust=AdapterTrustPolicy())
    assert [lesson.id for lesson in out.lessons] == [shared.id]
    # a session not started yet is an error, and no empty answer is kept for it in the cache
    cache = LessonCache()
    with pytest.raises(UnknownSession):
        lessons_for_task(whole, ["db"], policy=POLICY, trust=AdapterTrustPolicy(), cache=cache, session_id="s-later")
    start_session(whole, "s-later", "chat")
    later = lessons_for_task(whole, ["db"], policy=POLICY, trust=AdapterTrustPolicy(), cache=cache,
                             session_id="s-later")
    assert [lesson.id for lesson in later.lessons] == [shared.id]


def test_a_bound_scoped_agent_receives_its_scope_and_its_ancestors_and_cannot_open_a_sibling(tenant, database):
    """An agent login bound to user u2: tenant-wide and u2's memories reach its sessions; a branch it
    names itself ({"team": "t2"} added to its context) does not open."""
    _store, ids = tenant
    bind_login(database, AGENT_LOGIN, adapter="codex", tenants=["acme"], scope={"user": "u2"})
    agent_store = database.store(dsn=login_dsn(database, AGENT_LOGIN))
    try:
        trust = AdapterTrustPolicy(trusted_adapters={"codex"})
        agent = agent_store.bind(Context(tenant="acme", actor="agent", adapter="codex", scope={"user": "u2"}))
        own = remember(agent, "The user u2 drinks espresso with sugar in the morning.")
        start_session(agent, "a-u2", "chat")
        block = deliver(agent, "a-u2", QUERY, top_k=10, floor=0.0, policy=POLICY, trust=trust, embedder=EMBEDDER)
        assert set(block_memory_ids(block.text)) == {ids["tenant"], ids["u2"], own}
        assert set(block_sessions(block.text)) == {"s-u2-old", "s-u2"}
        # the agent adds an axis of its own choosing: the team's branch stays closed to it
        wider = agent_store.bind(Context(tenant="acme", actor="agent", adapter="codex",
                                         scope={"user": "u2", "team": "t2"}))
        start_session(wider, "a-u2-t2", "chat")
        block = deliver(wider, "a-u2-t2", QUERY, top_k=10, floor=0.0, policy=POLICY, trust=trust,
                        embedder=EMBEDDER)
        got = set(block_memory_ids(block.text))
        assert ids["team"] not in got and "cocoa" not in block.text
        assert got == {ids["tenant"], ids["u2"], own}
        # and no session of another user is reachable at all
        with pytest.raises(UnknownSession):
            deliver(agent, "s-u1", QUERY, policy=POLICY, trust=trust, embedder=EMBEDDER)
    finally:
        agent_store.close()


def test_a_bound_agent_store_receives_no_langgraph_item_of_another_user(tenant, database):
    _store, ids = tenant
    bind_login(database, AGENT_LOGIN, adapter="codex", tenants=["acme"])
    agent_store = database.store(dsn=login_dsn(database, AGENT_LOGIN))
    try:
        trust = AdapterTrustPolicy(trusted_adapters={"codex"})
        agent = agent_store.bind(Context(tenant="acme", actor="agent", adapter="codex"))
        _graph(agent).put(("users", "u1"), "drink2", {"text": "the user likes to drink oolong in the morning"})
        u2 = agent_store.bind(Context(tenant="acme", actor="agent", adapter="codex", scope={"user": "u2"}))
        start_session(u2, "a-u2", "chat")
        block = deliver(agent, "a-u2", QUERY, top_k=10, floor=0.0, policy=POLICY, trust=trust, embedder=EMBEDDER)
        assert "oolong" not in block.text and "matcha" not in block.text
        assert set(block_memory_ids(block.text)) == {ids["tenant"], ids["u2"]}
    finally:
        agent_store.close()


def test_an_injection_record_names_only_what_the_session_receives(tenant, database):
    """pymem.record_injection as the app login, raw: a whole-tenant context can see u1's memory, but
    u2's session does not receive it, so a record of u2's turn cannot name it (nor u1's session)."""
    _, ids = tenant
    call = ("select pymem.record_injection(%s, 0, %s, '{}', %s, repeat('a', 64), 1, 10, 0, 'approx', null, null)")
    with database.app() as conn:
        conn.execute("select pymem.set_context('acme', 'app', null, '{}'::jsonb, null)")
        before = conn.execute("select count(*) from pymem.ledger where event = 'delivery.injected'").fetchone()[0]
        for memory_ids, sessions in (([ids["u1"]], []), ([ids["team"]], []), ([ids["tenant"]], ["s-u1"]),
                                     ([ids["tenant"]], ["s-tenant"])):
            with pytest.raises(psycopg.errors.InvalidParameterValue):
                conn.execute(call, ("s-u2", memory_ids, sessions))
            conn.rollback()
            conn.execute("select pymem.set_context('acme', 'app', null, '{}'::jsonb, null)")
        assert conn.execute("select count(*) from pymem.ledger where event = 'delivery.injected'").fetchone()[0] == before
        seq = conn.execute(call, ("s-u2", [ids["tenant"], ids["u2"]], ["s-u2-old"])).fetchone()[0]
        assert seq > 0


def test_the_session_reads_return_nothing_outside_what_the_session_receives(tenant, database):
    """The definer reads are callable by the app: another tenant's session, a session the context
    cannot see, an incognito one, or a context without a tenant get nothing; the read allow-list
    applies; a login without a pymem role cannot call them."""
    _, ids = tenant
    vector = json.dumps(EMBEDDER.embed([QUERY])[0])
    search = "select id from pymem.session_search(%s, %s::text::vector, 100)"
    hot = "select id from pymem.session_hot(%s, 100)"
    receives = "select pymem.session_receives(%s, %s)"
    every = list(ids.values())
    with database.app() as conn:
        conn.execute("select pymem.set_context('acme', 'app', null, '{}'::jsonb, null)")
        assert {r[0] for r in conn.execute(search, ("s-u2", vector))} == {ids["tenant"], ids["u2"]}
        assert conn.execute(receives, ("s-u2", every)).fetchone()[0] == [ids["tenant"], ids["u2"]]
        conn.execute("select pymem.set_context('acme', 'app', null, '{}'::jsonb, array['nobody'])")
        assert conn.execute(search, ("s-u2", vector)).fetchall() == []  # every row here is untagged
        conn.rollback()
        # u1's context cannot see u2's session: nothing, however it asks
        conn.execute("select pymem.set_context('acme', 'app', null, '{\"user\": \"u1\"}'::jsonb, null)")
        assert conn.execute(search, ("s-u2", vector)).fetchall() == []
        assert conn.execute(hot, ("s-u2",)).fetchall() == []
        assert conn.execute(receives, ("s-u2", every)).fetchone()[0] == []
        conn.rollback()
        conn.execute("select pymem.set_context('other', 'app', null, '{}'::jsonb, null)")
        assert conn.execute(search, ("s-u2", vector)).fetchall() == []
        assert conn.execute(receives, ("s-u2", every)).fetchone()[0] == []
        conn.rollback()
        assert conn.execute(search, ("s-u2", vector)).fetchall() == []  # no context at all
        conn.rollback()
        for bad in (0, 1001, None):
            with pytest.raises(psycopg.errors.InvalidParameterValue):
                conn.execute("select * from pymem.session_search('s-u2', %s::text::vector, %s)", (vector, bad))
            conn.rollback()
    # the session-wide login with no pymem role (tests/conftest.py): kept, later tests use it
    with database.admin() as admin:
        admin.execute(f"grant connect on database \"{database.name}\" to pymem_test_stranger")
    try:
        with psycopg.connect(login_dsn(database, "pymem_test_stranger")) as conn:
            for sql, args in ((search, ("s-u2", vector)), (hot, ("s-u2",)), (receives, ("s-u2", every))):
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    conn.execute(sql, args)
                conn.rollback()
    finally:
        with database.admin() as admin:
            admin.execute(f"revoke connect on database \"{database.name}\" from pymem_test_stranger")


@pytest.mark.parametrize("plan", ["exact", "hnsw"])
def test_both_plans_of_the_session_search_return_the_same_rows(tenant, database, plan):
    _, ids = tenant
    vector = json.dumps(EMBEDDER.embed([QUERY])[0])
    with database.app() as conn:
        conn.execute("select pymem.set_context('acme', 'app', null, '{}'::jsonb, null)")
        rows = conn.execute("select id from pymem.session_search(%s, %s::text::vector, 2, %s)",
                            ("s-u2", vector, plan)).fetchall()
        assert {r[0] for r in rows} == {ids["tenant"], ids["u2"]}


def test_a_session_of_many_axes_and_a_tenant_of_many_rows_keep_the_rule(store, database):
    """The other branches of the reads: a session scope of more than 8 axes (its ancestors found
    among the tenant's scopes rather than enumerated), and more than 2,000 rows in the scopes a
    session receives (hot memories read newest first rather than by scope key)."""
    axes = {f"a{i}": f"v{i}" for i in range(9)}
    wide = store.bind(Context(tenant="acme", actor="app", scope=axes))
    start_session(wide, "s-wide", "chat")
    whole = store.bind(Context(tenant="acme", actor="app"))
    start_session(whole, "s-all", "chat")
    near = remember(store.bind(Context(tenant="acme", actor="app", scope={"a1": "v1", "a8": "v8"})),
                    "the user likes to drink tea in the morning")
    far = remember(store.bind(Context(tenant="acme", actor="app", scope={"a1": "other"})),
                   "the user likes to drink cola in the morning")
    with database.app() as conn:
        conn.execute("select pymem.set_context('acme', 'app', null, '{}'::jsonb, null)")
        conn.execute("insert into pymem.memories (tenant_id, id, content, tags, embedding)"
                     " select 'acme', 'bulk-' || g, 'filler ' || g, case when g % 500 = 0 then array['hot'] else '{}'::text[] end,"
                     " ('[' || array_to_string(array(select random() - 0.5 + g * 0 from generate_series(1, 384)), ',')"
                     " || ']')::vector from generate_series(1, 2100) g")
        conn.commit()
    hot_ids = {f"bulk-{g}" for g in range(500, 2101, 500)}
    with database.app() as conn:
        conn.execute("select pymem.set_context('acme', 'app', null, '{}'::jsonb, null)")
        assert {r[0] for r in conn.execute("select id from pymem.session_hot('s-wide', 100)")} == hot_ids
        assert {r[0] for r in conn.execute("select id from pymem.session_hot('s-all', 100)")} == hot_ids
        vector = json.dumps(EMBEDDER.embed([QUERY])[0])
        for plan in ("auto", "exact", "hnsw"):
            ids = [r[0] for r in conn.execute("select id from pymem.session_search('s-wide', %s::text::vector, 3, %s)",
                                              (vector, plan))]
            assert ids[0] == near and far not in ids and len(ids) == 3, plan
        assert conn.execute("select pymem.session_receives('s-wide', %s)", ([near, far],)).fetchone()[0] == [near]
