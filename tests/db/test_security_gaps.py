"""Tenant-internal gaps, each reproduced as the attack that found it.

Planted idempotency keys, a forged created_at, a ledger readable beyond the context's scope and
read allow-list, blind writes past the allow-list, pooled sessions that carried state into the
next checkout, a table lock that stalls every tenant, and audit text that can be spoofed visually.
"""

from __future__ import annotations

import sys
import threading
import unicodedata

import psycopg
import pytest
from helpers.database import AGENT_LOGIN, APP_LOGIN, bind_login, login_dsn
from psycopg import errors as pgerr
from psycopg.types.json import Jsonb

from pymem.context import Context
from pymem.errors import ContextError
from pymem.vocabulary import is_plain_text


def set_ctx(conn, tenant, actor=None, adapter=None, scope=None, read_adapters=None):
    conn.execute("select pymem.set_context(%s, %s, %s, %s, %s::text[])",
                 (tenant, actor, adapter, Jsonb(scope or {}), read_adapters))


# -- idempotency keys belong to the adapter that wrote them -------------------------------------

def test_an_agent_cannot_plant_a_key_the_operator_would_replay(database, store):
    operator = store.bind(Context(tenant="acme", actor="ops"))
    agent = store.bind(Context(tenant="acme", actor="ops", adapter="codex"))  # claims the operator's actor
    # The agent plants the key the operator is about to use, with the same arguments...
    planted = agent.upsert_many([{"id": "m1", "content": "the agent's text"}], idempotency_key="nightly-1")
    assert planted == {"upserted": 1, "replayed": False}
    # ... and with other arguments, to force a conflict.
    agent.upsert_many([{"id": "m2", "content": "x"}], idempotency_key="nightly-2")
    # The operator's calls are its own: written, never replayed, never a conflict.
    assert operator.upsert_many([{"id": "m1", "content": "the agent's text"}], idempotency_key="nightly-1") == {
        "upserted": 1, "replayed": False}
    assert operator.upsert_many([{"id": "m9", "content": "y"}], idempotency_key="nightly-2") == {
        "upserted": 1, "replayed": False}
    assert operator.get("m9")["content"] == "y"
    # Raw SQL cannot file a key under another adapter either.
    with database.app() as conn:
        set_ctx(conn, "acme", actor="ops", adapter="codex")
        with pytest.raises(pgerr.InsufficientPrivilege):
            conn.execute("insert into pymem.idempotency_keys (tenant_id, verb, actor, key, digest, result, expires_at,"
                         " adapter) values ('acme', 'upsert_many', 'ops', 'k', 'd', '{}', now() + interval '1 h', '')")
        conn.rollback()
        set_ctx(conn, "acme", actor="ops", adapter="codex")
        assert conn.execute("select count(*) from pymem.idempotency_keys").fetchone()[0] == 2  # its own only
        conn.rollback()
    with database.admin() as conn:
        rows = conn.execute("select adapter, key from pymem.idempotency_keys order by adapter, key").fetchall()
    assert rows == [("", "nightly-1"), ("", "nightly-2"), ("codex", "nightly-1"), ("codex", "nightly-2")]


# -- created_at is the database's time ---------------------------------------------------------

def test_created_at_cannot_be_backdated(database, store):
    with database.app() as conn:
        set_ctx(conn, "acme")
        with pytest.raises(pgerr.InsufficientPrivilege):
            conn.execute("insert into pymem.memories (tenant_id, id, created_at) values ('acme', 'old', '2001-01-01')")
        conn.rollback()
    # A superuser's statement names it and still gets the database's time (and the chain records that).
    with database.admin() as conn:
        with conn.transaction():
            set_ctx(conn, "acme")
            conn.execute("insert into pymem.memories (tenant_id, id, created_at, valid_from)"
                         " values ('acme', 'old', '2001-01-01', '2001-01-01')")
        created, valid_from = conn.execute(
            "select created_at, valid_from from pymem.memories where id = 'old'").fetchone()
    assert created.year >= 2026 and valid_from.year == 2001  # the claim of time lives in valid_from
    assert store.bind(Context(tenant="acme")).get_row("old")["created_at"] == created
    with database.app() as conn:
        set_ctx(conn, "acme")
        assert conn.execute("select entries, problem from pymem.verify_chain('acme')").fetchone() == (1, None)


# -- the ledger follows scope and the read allow-list ------------------------------------------

@pytest.fixture
def scoped(store):
    red = store.bind(Context(tenant="acme", scope={"team": "red"}))
    blue = store.bind(Context(tenant="acme", scope={"team": "blue"}, adapter="codex"))
    red.add([{"id": "r1", "content": "red"}])
    blue.add([{"id": "b1", "content": "blue"}])
    return store


def test_the_ledger_shows_only_what_the_context_could_read(database, scoped):
    with database.app() as conn:
        set_ctx(conn, "acme", scope={"team": "red"})
        assert [r[0] for r in conn.execute("select memory_id from pymem.ledger order by seq")] == ["r1"]
        assert [r[0] for r in conn.execute("select memory_id from pymem.memory_history")] == ["r1"]
        with pytest.raises(pgerr.InsufficientPrivilege, match="whole-tenant context"):
            conn.execute("select * from pymem.verify_chain('acme')")
        conn.rollback()
        set_ctx(conn, "acme", read_adapters=["codex"])
        assert [r[0] for r in conn.execute("select memory_id from pymem.ledger order by seq")] == ["b1"]
        with pytest.raises(pgerr.InsufficientPrivilege, match="whole-tenant context"):
            conn.execute("select * from pymem.verify_chain('acme')")
        conn.rollback()
        set_ctx(conn, "acme", read_adapters=[])
        assert conn.execute("select count(*) from pymem.ledger").fetchone()[0] == 0
        conn.rollback()
        set_ctx(conn, "acme")
        assert sorted(r[0] for r in conn.execute("select memory_id from pymem.ledger")) == ["b1", "r1"]
        assert conn.execute("select count(*), min(problem) from pymem.verify_chain('acme')").fetchone() == (1, None)
        conn.rollback()


def test_refusal_events_follow_the_refused_writes_scope(database, store):
    from pymem import Provenance, admit
    from pymem.errors import MemoryAdmissionError

    red = store.bind(Context(tenant="acme", scope={"team": "red"}))
    with pytest.raises(MemoryAdmissionError):
        admit(red, "a blog says so", Provenance("retrieved_content"))
    with database.app() as conn:
        set_ctx(conn, "acme", scope={"team": "blue"})
        assert conn.execute("select count(*) from pymem.audit_refusals").fetchone()[0] == 0
        conn.rollback()
        set_ctx(conn, "acme", scope={"team": "red"})
        assert conn.execute("select count(*) from pymem.audit_refusals").fetchone()[0] == 1
        conn.rollback()


# -- the read allow-list binds writes ------------------------------------------------------------

def test_a_blind_context_cannot_update_or_delete(database, scoped):
    with database.app() as conn:
        for allow in ([], ["gemini"]):
            set_ctx(conn, "acme", read_adapters=allow)
            assert conn.execute("update pymem.memories set importance = 0.5").rowcount == 0
            assert conn.execute("select count(*) from pymem.delete_memories(array['r1', 'b1'])").fetchone()[0] == 0
            conn.commit()
        set_ctx(conn, "acme", read_adapters=["codex"])
        assert conn.execute("select count(*) from pymem.delete_memories(array['r1', 'b1'])").fetchone()[0] == 1
        conn.rollback()
    assert scoped.bind(Context(tenant="acme", read_adapters=[])).delete_many(["r1", "b1"]) == {"deleted": 0}
    assert scoped.bind(Context(tenant="acme")).get_many(["r1", "b1"]) != []
    with database.admin() as conn:
        assert conn.execute("select count(*), max(revision) from pymem.memories").fetchone() == (2, 1)


# -- pooled connections are reset on return -------------------------------------------------------

def test_a_session_setting_does_not_survive_the_pool(store, database):
    with store.pool.connection() as conn:
        conn.execute("select set_config('pymem.tenant', 'acme', false)")  # session level, by mistake
        conn.execute("select set_config('pymem.scope', '{}', false)")
        conn.commit()
    store.bind(Context(tenant="acme")).add([{"id": "m1", "content": "x"}])
    for _ in range(store.pool.max_size + 1):  # whichever connection the pool hands out
        with store.pool.connection() as conn:
            assert conn.execute("select current_setting('pymem.tenant', true)").fetchone()[0] in ("", None)
            assert conn.execute("select count(*) from pymem.memories").fetchone()[0] == 0
            conn.rollback()


def test_a_held_cursor_does_not_survive_the_pool(store):
    store.bind(Context(tenant="acme")).add([{"id": "a1", "content": "acme secret"}])
    with store.pool.connection() as conn:
        with conn.transaction():
            set_ctx(conn, "acme")
            conn.execute("declare leak cursor with hold for select content from pymem.memories")
        conn.execute("create temp table stash as select 1 as x")
        conn.execute("select pg_advisory_lock(42)")
        conn.commit()
    for _ in range(store.pool.max_size + 1):
        with store.pool.connection() as conn:
            with conn.transaction():
                set_ctx(conn, "globex")
                with pytest.raises(pgerr.InvalidCursorName), conn.transaction():
                    conn.execute("fetch all from leak")
                with pytest.raises(pgerr.UndefinedTable), conn.transaction():
                    conn.execute("select * from stash")
            assert conn.execute("select count(*) from pg_locks where locktype = 'advisory'"
                                " and pid = pg_backend_pid()").fetchone()[0] == 0
            conn.rollback()


def test_a_role_switch_does_not_survive_the_pool(store, database):
    with store.pool.connection() as conn:
        conn.execute("set role pymem_app")  # allowed: the login is a member
        conn.commit()
    for _ in range(store.pool.max_size + 1):
        with store.pool.connection() as conn:
            assert conn.execute("select current_user = session_user").fetchone()[0]
            conn.rollback()


# -- no login can lock a table against every tenant ----------------------------------------------

@pytest.mark.parametrize("login", [APP_LOGIN, AGENT_LOGIN])
@pytest.mark.parametrize("table", ["memories", "idempotency_keys", "ledger", "chain_heads"])
def test_no_login_can_lock_a_table_exclusively(database, login, table):
    bind_login(database, AGENT_LOGIN, adapter="codex", tenants=["acme"])
    with psycopg.connect(login_dsn(database, login)) as conn:
        for mode in ("access exclusive", "exclusive", "share row exclusive", "share", "share update exclusive",
                     "row exclusive"):
            with pytest.raises(pgerr.InsufficientPrivilege):
                conn.execute(f"lock table pymem.{table} in {mode} mode nowait")
            conn.rollback()
        with pytest.raises(pgerr.InsufficientPrivilege):
            conn.execute(f"truncate pymem.{table}")
        conn.rollback()


def test_writers_of_other_tenants_do_not_wait_on_a_weak_lock(database, store):
    """What a login can still hold (ACCESS SHARE; the locks of its own open write) blocks no other
    tenant's writer."""
    bind_login(database, AGENT_LOGIN, adapter="codex", tenants=["acme"])
    with psycopg.connect(login_dsn(database, AGENT_LOGIN)) as holder:
        holder.execute("lock table pymem.memories in access share mode")
        holder.execute("lock table pymem.ledger in access share mode")
        set_ctx(holder, "acme", adapter="codex")
        holder.execute("insert into pymem.memories (tenant_id, id, source_adapter) values ('acme', 'open', 'codex')")
        done = threading.Event()

        def write():
            store.bind(Context(tenant="globex")).add([{"content": "still writing"}])
            done.set()

        t = threading.Thread(target=write)
        t.start()
        t.join(timeout=30)
        holder.rollback()
    assert done.is_set()


# -- audit text cannot be spoofed visually -------------------------------------------------------

SPOOFS = ["crm\u202etxt.exe", "ch\u200bat", "\u2066reason\u2069", "a\u2028b", "a\u0085b", "\ufeffsource", "x\u00ady"]
GOOD = ("user_asserted", "crm", "instruction-shaped content", "sig.x", "sha256:" + "0" * 64, None)


def test_record_refusal_refuses_format_characters(database):
    with database.app() as conn:
        for spoof in SPOOFS:
            for index in (1, 2):  # source, reason
                args = list(GOOD)
                args[index] = spoof
                set_ctx(conn, "acme")
                with pytest.raises(pgerr.InvalidParameterValue):
                    conn.execute("select pymem.record_refusal(%s, %s, %s, %s, %s, %s)", args)
                conn.rollback()
            for field in ("tenant", "actor", "adapter"):
                ctx = {"tenant": "acme", "actor": None, "adapter": None}
                ctx[field] = spoof
                with pytest.raises(pgerr.InvalidParameterValue):
                    set_ctx(conn, **ctx)
                conn.rollback()
    with database.admin() as conn:
        assert conn.execute("select count(*) from pymem.ledger").fetchone()[0] == 0


def test_the_database_and_python_agree_on_plain_text(database):
    """Every control and format character Python knows (and the line/paragraph separators) is
    refused by pymem._is_plain_text; ordinary letters, marks and spaces are not."""
    unplain = [chr(c) for c in range(sys.maxunicode + 1)
               if unicodedata.category(chr(c)) in ("Cc", "Cf", "Zl", "Zp") and c != 0]
    plain = ["a", "é", "名", "\u0301", " ", "\u00a0", "😀", "\u05d0"]
    with database.admin() as conn:
        bad = conn.execute("select c from unnest(%s::text[]) c where pymem._is_plain_text(c)", (unplain,)).fetchall()
        good = conn.execute("select c from unnest(%s::text[]) c where not pymem._is_plain_text(c)", (plain,)).fetchall()
    assert [hex(ord(c)) for (c,) in bad] == []
    assert good == []
    assert not any(is_plain_text(c) for c in unplain) and all(is_plain_text(c) for c in plain)
    with pytest.raises(ContextError):
        Context(tenant="acme", actor="ops\u202e")


def test_a_spoofed_source_is_cleaned_before_it_is_audited(database, store):
    from pymem import Provenance, admit
    from pymem.errors import MemoryAdmissionError

    with pytest.raises(MemoryAdmissionError) as refused:
        admit(store.bind(Context(tenant="acme")), "a blog says so",
              Provenance("retrieved_content", source="web\u202eevil"))
    assert refused.value.audit_seq == 1
    with database.admin() as conn:
        (tool,) = conn.execute("select tool from pymem.audit_refusals").fetchone()
    assert tool == "memory.write:web evil"
