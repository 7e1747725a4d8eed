"""Facts shared between the tasks of a run: publish with the context's adapter and a content hash,
subscribe through the strict adapter allow-list, and follow live through LISTEN/NOTIFY, where a
notification is never more than an id to read under the follower's own context."""

from __future__ import annotations

import hashlib

import pytest
from helpers.database import AGENT_LOGIN, bind_login, login_dsn
from helpers.flavours import publish, subscribe, sync_view

from pymem import AccessDenied, Context, InvalidArguments
from pymem.db import connect
from pymem.facts import follow as follow_
from pymem.integrity import verify_chain

pytestmark = pytest.mark.parity
follow = sync_view(follow_)  # a sync stream: the async run follows through its sync twin


@pytest.fixture
def run1(store):
    """Facts of run r-1 in acme: one by the operator (untagged), one each by agents a and b."""
    for adapter, value in ((None, "users: id, email"), ("agent-a", "orders: id, total"), ("agent-b", "poison")):
        publish(store.bind(Context(tenant="acme", adapter=adapter)), "api-schema", adapter or "operator", value,
                run_id="r-1", producer_task=f"t-{adapter or 'op'}")
    return store


def adapters(facts) -> list:
    return [f.source_adapter for f in facts]


def test_publish_records_adapter_producer_and_a_content_hash(store, database):
    fact = publish(store.bind(Context(tenant="acme", adapter="agent-a")), "api-schema", "users", "id, email",
                   run_id="r-1", producer_task="t-7")
    assert (fact.tag, fact.key, fact.value, fact.scope, fact.run_id, fact.producer_task, fact.source_adapter) == (
        "api-schema", "users", "id, email", "run", "r-1", "t-7", "agent-a")
    with database.admin() as conn:
        row = conn.execute("select kind, source_adapter, content_hash, embedding is null from pymem.memories"
                           " where id = %s", (fact.id,)).fetchone()
    assert row == ("shared_fact", "agent-a", bytes.fromhex(fact.content_hash), True)
    with store.pool.connection() as conn:
        assert verify_chain(conn, "acme").clean


def test_subscribe_honours_the_strict_allow_list(run1):
    acme = run1.bind(Context(tenant="acme"))
    assert adapters(subscribe(acme, "api-schema", run_id="r-1")) == [None, "agent-a", "agent-b"]
    assert adapters(subscribe(acme, "api-schema", run_id="r-1", read_only_from_adapters=["agent-a"])) == ["agent-a"]
    both = subscribe(acme, "api-schema", run_id="r-1", read_only_from_adapters=["agent-a", "agent-b"])
    assert adapters(both) == ["agent-a", "agent-b"]  # untagged rows excluded once a list is given
    assert subscribe(acme, "api-schema", run_id="r-1", read_only_from_adapters=[]) == []
    assert subscribe(acme, "api-schema", run_id="r-1", read_only_from_adapters=["nobody"]) == []
    # a list narrows the context's own allow-list, never widens it
    narrow = run1.bind(Context(tenant="acme", read_adapters=["agent-b"]))
    assert adapters(subscribe(narrow, "api-schema", run_id="r-1")) == ["agent-b"]
    assert subscribe(narrow, "api-schema", run_id="r-1", read_only_from_adapters=["agent-a"]) == []


def test_runs_tags_scopes_and_tenants_stay_apart(run1):
    acme = run1.bind(Context(tenant="acme"))
    assert subscribe(acme, "api-schema", run_id="r-2") == []
    assert subscribe(acme, "other-tag", run_id="r-1") == []
    assert subscribe(run1.bind(Context(tenant="globex")), "api-schema", run_id="r-1") == []
    shared = publish(acme, "conventions", "style", "black, 100 columns", scope="tenant")
    assert [f.id for f in subscribe(acme, "conventions", scope="tenant")] == [shared.id]
    assert subscribe(acme, "conventions", run_id="r-1") == []
    scoped = run1.bind(Context(tenant="acme", scope={"team": "billing"}))
    publish(scoped, "api-schema", "invoices", "id, amount", run_id="r-1")
    assert len(subscribe(acme, "api-schema", run_id="r-1")) == 4
    assert [f.key for f in subscribe(scoped, "api-schema", run_id="r-1")] == ["invoices"]


def test_a_bound_agent_login_publishes_as_its_adapter(database):
    bind_login(database, AGENT_LOGIN, adapter="agent-a", tenants=["acme"])
    agent = database.store(dsn=login_dsn(database, AGENT_LOGIN))
    try:
        fact = publish(agent.bind(Context(tenant="acme", adapter="agent-a")), "t", "k", "v", run_id="r")
        assert fact.source_adapter == "agent-a"
        with pytest.raises(AccessDenied):
            publish(agent.bind(Context(tenant="acme")), "t", "k", "untagged", run_id="r")
    finally:
        agent.close()


@pytest.mark.parametrize("kwargs", [
    dict(tag=""), dict(tag="a\nb"), dict(key=""), dict(value=b"bytes"), dict(value=None), dict(scope="global"),
    dict(run_id=None), dict(producer_task="x" * 201),
], ids=lambda k: next(iter(k)))
def test_bad_input_is_refused_and_changes_nothing(store, database, kwargs):
    args = dict(tag="t", key="k", value="v", scope="run", run_id="r-1", producer_task=None)
    args.update(kwargs)
    with pytest.raises(InvalidArguments):
        publish(store.bind(Context(tenant="acme")), args.pop("tag"), args.pop("key"), args.pop("value"), **args)
    with database.admin() as conn:
        assert conn.execute("select count(*) from pymem.ledger").fetchone()[0] == 0


# -- follow ---------------------------------------------------------------------------------------

def test_follow_receives_a_fact_published_from_another_connection(run1, database):
    acme = run1.bind(Context(tenant="acme"))
    other = database.store()  # another pool: other connections, as another process would have
    try:
        with follow(acme, "api-schema", run_id="r-1") as stream:
            assert [f.key for f in (stream.next(0), stream.next(0), stream.next(0))] == ["operator", "agent-a",
                                                                                        "agent-b"]
            assert stream.next(0) is None  # nothing new yet, and no waiting
            published = publish(other.bind(Context(tenant="acme", adapter="agent-a")), "api-schema", "payments",
                                "id, state", run_id="r-1")
            got = stream.next(timeout=30)
        assert got is not None and (got.id, got.value, got.source_adapter) == (published.id, "id, state", "agent-a")
        assert stream.notifications >= 1
    finally:
        other.close()


def test_follow_applies_the_allow_list_and_the_run(run1, database):
    acme = run1.bind(Context(tenant="acme"))
    writer_b = run1.bind(Context(tenant="acme", adapter="agent-b"))
    writer_a = run1.bind(Context(tenant="acme", adapter="agent-a"))
    with follow(acme, "api-schema", run_id="r-1", read_only_from_adapters=["agent-a"], existing=False) as stream:
        publish(writer_b, "api-schema", "x", "from b", run_id="r-1")
        publish(writer_a, "api-schema", "y", "from a, other run", run_id="r-2")
        wanted = publish(writer_a, "api-schema", "z", "from a", run_id="r-1")
        got = stream.next(timeout=30)
        # the other adapter's fact and the other run's are never delivered, however the three
        # notifications were read (one by one, or after all three commits: the follower reads
        # what the chain holds after its cursor, so how many count as ignored depends on timing)
        assert stream.next(timeout=1) is None
    assert got.id == wanted.id
    assert stream.notifications >= 1 and stream.ignored <= 2


def test_a_notification_about_another_tenant_is_never_delivered_as_a_fact(store, database):
    """Anyone may NOTIFY any channel: a payload naming another tenant's fact (or anything else)
    is read under the follower's context and comes to nothing."""
    acme = store.bind(Context(tenant="acme"))
    secret = publish(store.bind(Context(tenant="globex")), "api-schema", "secret", "globex only", run_id="r-1")
    with follow(acme, "api-schema", run_id="r-1") as stream:
        assert stream.next(0) is None
        with connect(database.app_dsn, autocommit=True) as conn:
            with conn.transaction():
                conn.execute("select pymem.set_context('acme')")
                channel = conn.execute("select pymem.fact_channel('acme')").fetchone()[0]
            conn.execute("select pg_notify(%s, %s)", (channel, secret.id))
            conn.execute("select pg_notify(%s, %s)", (channel, "not-even-an-id"))
        genuine = publish(acme, "api-schema", "public", "acme's", run_id="r-1")
        got = stream.next(timeout=30)
        assert got.id == genuine.id and stream.next(0) is None
    assert stream.ignored == 2 and stream.notifications == 3


def test_the_channel_names_a_keyed_digest_not_the_tenant(database):
    with connect(database.app_dsn) as conn:
        conn.execute("select pymem.set_context('acme')")
        channel = conn.execute("select pymem.fact_channel('acme')").fetchone()[0]
    # keyed by the installation's secret: not the tenant, not a digest anyone could compute
    assert channel.startswith("pymem_facts_") and "acme" not in channel
    assert channel != "pymem_facts_" + hashlib.sha256(b"acme").hexdigest()[:32]
