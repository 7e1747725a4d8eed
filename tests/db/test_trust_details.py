"""The small seams of trust, each reproduced as the login that would use it: injection records that
name what the writer cannot read, fact channels any login could listen to or replay into, an
erasure by hand that kept (or rewrote) the content or un-erased a row, token claims of the wrong
type, and publish(conn=) leaving the caller's transaction without its read allow-list."""

from __future__ import annotations

import hashlib
import time

import psycopg
import pytest
from helpers.database import AGENT_LOGIN, STRANGER_LOGIN, bind_login, login_dsn
from helpers.service import KEY
from psycopg import errors as pgerr
from psycopg.types.json import Jsonb

from pymem import Context
from pymem.db import connect
from pymem.errors import Unauthenticated
from pymem.facts import follow, publish
from pymem.integrity import verify_chain
from pymem.service.auth import TokenVerifier, context_from_claims


def _seed(database, tenant, mid, adapter=None, scope=None):
    with database.app() as conn:
        conn.execute("select pymem.set_context(%s, 'seed', %s, %s)", (tenant, adapter, Jsonb(scope or {})))
        conn.execute("insert into pymem.memories (tenant_id, id, content, source_adapter, scope)"
                     " values (%s, %s, 'x', %s, %s)", (tenant, mid, adapter, Jsonb(scope or {})))
        conn.commit()


def _ledger(database) -> int:
    with database.admin() as conn:
        return conn.execute("select count(*) from pymem.ledger").fetchone()[0]


# -- injection records -------------------------------------------------------------------------------

def test_an_injection_record_names_only_what_the_writers_allow_list_admits(database):
    _seed(database, "acme", "op-row")
    _seed(database, "acme", "codex-row", adapter="codex")
    _seed(database, "acme", "claude-row", adapter="claude")
    with database.app() as conn:
        conn.execute("select pymem.set_context('acme', 'ops', 'codex')")  # a session the allow-list admits
        conn.execute("insert into pymem.sessions (tenant_id, id, surface) values ('acme', 's1', 'chat')")
        conn.commit()
    before = _ledger(database)
    args = ["s1", 1, None, [], [], "0" * 64, 10, 100, 0, "approx", None, None, []]
    with database.app() as conn:
        for ids in (["claude-row"], ["op-row"], ["codex-row", "claude-row"]):
            conn.execute("select pymem.set_context('acme', 'ops', null, '{}', array['codex'])")
            with pytest.raises(pgerr.InvalidParameterValue, match="not a live memory this session receives"):
                conn.execute("select pymem.record_injection(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                             [*args[:2], ids, *args[3:]])
            conn.rollback()
        assert _ledger(database) == before
        conn.execute("select pymem.set_context('acme', 'ops', null, '{}', array['codex'])")
        conn.execute("select pymem.record_injection(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                     [*args[:2], ["codex-row"], *args[3:]])
        conn.commit()
    assert _ledger(database) == before + 1


# -- fact channels ---------------------------------------------------------------------------------

def test_no_other_login_can_name_a_tenants_fact_channel(store, database):
    bind_login(database, AGENT_LOGIN, adapter="codex", tenants=["globex"])
    with psycopg.connect(login_dsn(database, AGENT_LOGIN)) as agent:
        agent.execute("select pymem.set_context('globex', 'agent', 'codex')")
        with pytest.raises(pgerr.InsufficientPrivilege):
            agent.execute("select pymem.fact_channel('acme')")
        agent.rollback()
        with pytest.raises(pgerr.InsufficientPrivilege):  # nor compute it: the secret is out of reach
            agent.execute("select secret from pymem.installation_secrets")
        agent.rollback()
        with pytest.raises(pgerr.InsufficientPrivilege):
            agent.execute("select pymem._fact_channel('acme')")
    with psycopg.connect(login_dsn(database, STRANGER_LOGIN)) as stranger:
        with pytest.raises(pgerr.InsufficientPrivilege):
            stranger.execute("select pymem.fact_channel('acme')")


def test_a_listener_on_a_computed_channel_hears_nothing_and_the_real_one_carries_no_id(store, database):
    acme = store.bind(Context(tenant="acme"))
    with database.app() as conn:
        conn.execute("select pymem.set_context('acme')")
        real = conn.execute("select pymem.fact_channel('acme')").fetchone()[0]
    guessed = "pymem_facts_" + hashlib.sha256(b"acme").hexdigest()[:32]  # what any login used to compute
    with psycopg.connect(login_dsn(database, STRANGER_LOGIN), autocommit=True) as stranger, \
            psycopg.connect(database.admin_dsn, autocommit=True) as admin:
        stranger.execute(f'listen "{guessed}"')
        admin.execute(f'listen "{real}"')
        fact = publish(acme, "api-schema", "users", "id, email", run_id="r-1")
        assert list(stranger.notifies(timeout=1, stop_after=1)) == []
        [heard] = list(admin.notifies(timeout=30, stop_after=1))
        assert heard.payload == "" and fact.id not in heard.payload


def test_a_replayed_notification_delivers_no_old_fact(store, database):
    acme = store.bind(Context(tenant="acme"))
    old = publish(acme, "api-schema", "users", "id, email", run_id="r-1")
    with database.app() as conn:
        conn.execute("select pymem.set_context('acme')")
        channel = conn.execute("select pymem.fact_channel('acme')").fetchone()[0]
    with follow(acme, "api-schema", run_id="r-1", existing=False) as stream:
        with psycopg.connect(database.admin_dsn, autocommit=True) as anyone:
            for payload in (old.id, "", "x"):
                anyone.execute("select pg_notify(%s, %s)", (channel, payload))
        assert stream.next(timeout=5) is None
        assert stream.notifications >= 1
        new = publish(acme, "api-schema", "orders", "id, total", run_id="r-1")
        got = stream.next(timeout=30)
        assert got is not None and got.id == new.id
        assert stream.next(0) is None


# -- erasure -------------------------------------------------------------------------------------

def _row(database, mid):
    with database.admin() as conn:
        return conn.execute("select content, record, embedding, erased_at, content_hash from pymem.memories"
                            " where id = %s", (mid,)).fetchone()


def test_an_erasure_by_hand_is_complete_and_final(store, database):
    mem = store.bind(Context(tenant="acme"))
    mem.add([{"id": "m1", "content": "card 4111 1111 1111 1111", "record": {"note": "card"},
              "embedding": [0.1] * 384, "tags": ["pii"]}])
    content_hash = _row(database, "m1")[4]
    with database.app() as conn:
        conn.execute("select pymem.set_context('acme')")
        # the app keeps the content, and even rewrites it, while marking the row erased
        conn.execute("update pymem.memories set erased_at = '2001-01-01', content = 'rewritten'"
                     " where tenant_id = 'acme' and id = 'm1'")
        conn.commit()
    content, record, embedding, erased_at, kept_hash = _row(database, "m1")
    assert (content, record, embedding) == (None, None, None)
    assert erased_at.year > 2001 and kept_hash == content_hash  # the database's time; the hash of what was erased
    with database.app() as conn:
        for sql in ("update pymem.memories set erased_at = null where id = 'm1'",
                    "update pymem.memories set erased_at = null, content = 'back' where id = 'm1'",
                    "update pymem.memories set content = 'again' where id = 'm1'"):
            conn.execute("select pymem.set_context('acme')")
            with pytest.raises(pgerr.InvalidParameterValue, match="erased memory cannot be changed"):
                conn.execute(sql)
            conn.rollback()
        # an erasure that would change anything else (here the tags) is refused whole
        mem.add([{"id": "m2", "content": "y", "tags": ["a"]}])
        conn.execute("select pymem.set_context('acme')")
        with pytest.raises(pgerr.InvalidParameterValue, match="changes nothing else"):
            conn.execute("update pymem.memories set erased_at = now(), tags = '{b}' where id = 'm2'")
        conn.rollback()
    assert _row(database, "m1")[0:4] == (None, None, None, erased_at)
    with store.pool.connection() as conn:
        assert verify_chain(conn, "acme").clean


# -- token claims ----------------------------------------------------------------------------------

@pytest.mark.parametrize("claims", [
    {"scope": ""}, {"scope": []}, {"scope": 0}, {"scope": None}, {"scope": "project=a"},
    {"adapter": ""}, {"adapter": 0}, {"adapter": None}, {"adapter": ["codex"]},
    {"read_adapters": "codex"}, {"read_adapters": {"codex": True}},
], ids=repr)
def test_token_claims_of_the_wrong_type_are_refused(claims):
    with pytest.raises(Unauthenticated) as info:
        context_from_claims({"tenant": "acme", "actor": "a", **claims})
    assert info.value.code == "token_claims"
    verifier = TokenVerifier.hs256(KEY)
    with pytest.raises(Unauthenticated) as info:
        verifier.verify(_raw_token(claims))
    assert info.value.code == "token_claims"


def _raw_token(extra: dict) -> str:
    import jwt

    now = int(time.time())
    return jwt.encode({"tenant": "acme", "actor": "a", "iat": now, "exp": now + 600, **extra}, KEY, algorithm="HS256")


@pytest.mark.parametrize("name", ["exp", "nbf", "iat"])
def test_a_time_claim_that_is_not_a_number_is_refused(name):
    import jwt

    now = int(time.time())
    body = {"tenant": "acme", "actor": "a", "iat": now, "exp": now + 600}
    body[name] = str(body.get(name, now))
    with pytest.raises(Unauthenticated) as info:
        TokenVerifier.hs256(KEY).verify(jwt.encode(body, KEY, algorithm="HS256"))
    assert info.value.code in ("token_claims", "token_malformed")
    body[name] = True
    with pytest.raises(Unauthenticated):
        TokenVerifier.hs256(KEY).verify(jwt.encode(body, KEY, algorithm="HS256"))


def test_well_typed_claims_still_make_their_context():
    ctx = context_from_claims({"tenant": "acme", "actor": "a", "adapter": "codex", "scope": {"project": "a"},
                               "read_adapters": ["codex"]})
    assert (ctx.adapter, dict(ctx.scope), ctx.read_adapters) == ("codex", {"project": "a"}, ("codex",))
    assert context_from_claims({"tenant": "acme", "actor": "a", "scope": {}}).scope == {}


# -- publish(conn=) --------------------------------------------------------------------------------

def test_publish_in_the_callers_transaction_leaves_its_allow_list_in_force(store, database):
    _seed(database, "acme", "op-row")
    _seed(database, "acme", "claude-row", adapter="claude")
    agent = store.bind(Context(tenant="acme", adapter="codex", read_adapters=("codex",)))
    with connect(database.app_dsn) as conn:
        with conn.transaction():
            publish(agent, "api-schema", "users", "id, email", run_id="r-1", conn=conn)
            visible = conn.execute("select id from pymem.memories order by id").fetchall()
            assert conn.execute("select pymem._ctx_read_adapters()").fetchone()[0] == ["codex"]
    # the fact itself (codex's) only; neither the operator's row nor claude's
    assert len(visible) == 1 and visible[0][0] not in ("op-row", "claude-row")
