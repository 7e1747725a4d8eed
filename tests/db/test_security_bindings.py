"""Login bindings: a bound agent login is confined to its adapter, its tenants and its scope.

An agent that holds database credentials is the actor bindings exist to contain. Each attack below
runs as a real non-superuser login, through pymem.set_context and around it (settings written by
hand with set_config), and checks what reached the tables with the superuser.
"""

from __future__ import annotations

import json

import psycopg
import pytest
from click.testing import CliRunner
from helpers.database import AGENT_LOGIN, APP_LOGIN, PASSWORD, bind_login, login_dsn
from psycopg import errors as pgerr
from psycopg.types.json import Jsonb

from pymem.admin import bind_login as lib_bind_login
from pymem.admin import list_bindings, unbind_login
from pymem.context import Context
from pymem.errors import AccessDenied, InvalidArguments, NotFound

GROUP = "pymem_test_agents"          # a NOLOGIN group role
MEMBER = "pymem_test_group_member"   # a login in GROUP (and in pymem_app)
OTHER_GROUP = "pymem_test_agents_b"


def _ensure_roles(database) -> None:
    with database.admin() as conn:
        for name, sql in (
            (GROUP, f"create role {GROUP} nologin"),
            (OTHER_GROUP, f"create role {OTHER_GROUP} nologin"),
            (MEMBER, f"create role {MEMBER} login password '{PASSWORD}' in role pymem_app, {GROUP}"),
        ):
            if not conn.execute("select 1 from pg_roles where rolname = %s", (name,)).fetchone():
                conn.execute(sql)
        conn.execute(f"revoke {OTHER_GROUP} from {MEMBER}")


def set_ctx(conn, tenant, adapter=None, scope=None):
    conn.execute("select pymem.set_context(%s, 'agent', %s, %s, null)", (tenant, adapter, Jsonb(scope or {})))


def seed(database, tenant, mid, scope=None, adapter=None):
    with database.app() as conn:
        set_ctx(conn, tenant, adapter=adapter, scope=scope)
        conn.execute("insert into pymem.memories (tenant_id, id, scope, content, source_adapter)"
                     " values (%s, %s, %s, 'x', %s)", (tenant, mid, Jsonb(scope or {}), adapter))
        conn.commit()


def table_state(database):
    with database.admin() as conn:
        return conn.execute(
            "select (select count(*) from pymem.memories), (select count(*) from pymem.ledger),"
            " (select string_agg(tenant_id || '/' || id, ',' order by tenant_id, id) from pymem.memories)").fetchone()


@pytest.fixture
def tenants(database):
    seed(database, "acme", "a-op")
    seed(database, "acme", "a-proj", scope={"project": "a"})
    seed(database, "acme", "b-proj", scope={"project": "b"})
    seed(database, "globex", "g-op")
    seed(database, "globex", "g-codex", adapter="codex")
    return database


def test_a_bound_login_cannot_choose_another_tenant(tenants):
    database = tenants
    bind_login(database, AGENT_LOGIN, adapter="codex", tenants=["acme"])
    before = table_state(database)
    with psycopg.connect(login_dsn(database, AGENT_LOGIN)) as conn:
        with pytest.raises(pgerr.InsufficientPrivilege, match="not bound to tenant globex"):
            set_ctx(conn, "globex", adapter="codex")
        conn.rollback()
        # Around set_context: the tenant written by hand reads as unset, so every policy fails closed.
        conn.execute("select set_config('pymem.tenant', 'globex', true), set_config('pymem.adapter', 'codex', true)")
        assert conn.execute("select pymem._ctx_tenant()").fetchone()[0] is None
        assert conn.execute("select count(*) from pymem.memories").fetchone()[0] == 0
        assert conn.execute("select count(*) from pymem.ledger").fetchone()[0] == 0
        assert conn.execute("select count(*) from pymem.chain_heads").fetchone()[0] == 0
        assert conn.execute("select count(*) from pymem.delete_memories(array['g-op', 'g-codex'])").fetchone()[0] == 0
        assert conn.execute("update pymem.memories set content = 'pwned'").rowcount == 0
        with pytest.raises(pgerr.InsufficientPrivilege):
            conn.execute("insert into pymem.memories (tenant_id, id, source_adapter) values ('globex', 'evil', 'codex')")
        conn.rollback()
        with pytest.raises(pgerr.InsufficientPrivilege):
            conn.execute("select * from pymem.verify_chain('globex')")
        conn.rollback()
        # Its own tenant works as usual, operator rows included (it is bound, not blind).
        set_ctx(conn, "acme", adapter="codex")
        assert {r[0] for r in conn.execute("select id from pymem.memories")} == {"a-op", "a-proj", "b-proj"}
        conn.rollback()
    assert table_state(database) == before


def test_a_bound_login_cannot_widen_its_scope(tenants):
    database = tenants
    bind_login(database, AGENT_LOGIN, adapter="codex", tenants=["acme"], scope={"project": "a"})
    before = table_state(database)
    with psycopg.connect(login_dsn(database, AGENT_LOGIN)) as conn:
        for scope in ({}, {"project": "b"}, {"team": "x"}):
            with pytest.raises(pgerr.InsufficientPrivilege, match="bound to scope"):
                set_ctx(conn, "acme", adapter="codex", scope=scope)
            conn.rollback()
        set_ctx(conn, "acme", adapter="codex", scope={"project": "a"})
        assert {r[0] for r in conn.execute("select id from pymem.memories")} == {"a-proj"}
        conn.rollback()
        # By hand: an empty scope is narrowed to the binding's; a contradicting one sees nothing.
        conn.execute("select set_config('pymem.tenant', 'acme', true), set_config('pymem.scope', '{}', true)")
        assert {r[0] for r in conn.execute("select id from pymem.memories")} == {"a-proj"}
        conn.rollback()
        conn.execute("select set_config('pymem.tenant', 'acme', true),"
                     " set_config('pymem.scope', '{\"project\": \"b\"}', true)")
        assert conn.execute("select count(*) from pymem.memories").fetchone()[0] == 0
        assert conn.execute("select count(*) from pymem.ledger").fetchone()[0] == 0
        with pytest.raises(pgerr.InsufficientPrivilege):
            conn.execute("insert into pymem.memories (tenant_id, id, scope, source_adapter)"
                         " values ('acme', 'evil', '{\"project\": \"b\"}', 'codex')")
        conn.rollback()
        conn.execute("select set_config('pymem.tenant', 'acme', true), set_config('pymem.scope', '{}', true)")
        with pytest.raises(pgerr.InsufficientPrivilege):
            conn.execute("insert into pymem.memories (tenant_id, id, scope, source_adapter)"
                         " values ('acme', 'evil', '{}', 'codex')")
        conn.rollback()
    assert table_state(database) == before


def test_binding_a_group_binds_its_member_logins(tenants):
    database = tenants
    _ensure_roles(database)
    bind_login(database, GROUP, adapter="claude", tenants=["acme"])
    member = login_dsn(database, MEMBER)
    before = table_state(database)
    with psycopg.connect(member) as conn:
        # The member cannot act as the operator (untagged, trusted rows) nor as another adapter...
        for adapter in (None, "codex"):
            with pytest.raises(pgerr.InsufficientPrivilege, match="bound to adapter claude"):
                set_ctx(conn, "acme", adapter=adapter)
            conn.rollback()
        conn.execute("select set_config('pymem.tenant', 'acme', true)")
        with pytest.raises(pgerr.InsufficientPrivilege):
            conn.execute("insert into pymem.memories (tenant_id, id) values ('acme', 'untagged')")
        conn.rollback()
        # ... nor in another tenant.
        with pytest.raises(pgerr.InsufficientPrivilege):
            set_ctx(conn, "globex", adapter="claude")
        conn.rollback()
    assert table_state(database) == before
    with psycopg.connect(member) as conn:
        set_ctx(conn, "acme", adapter="claude")
        conn.execute("insert into pymem.memories (tenant_id, id, source_adapter) values ('acme', 'ok', 'claude')")
        conn.commit()
    with database.admin() as conn:
        assert conn.execute("select source_adapter from pymem.memories where id = 'ok'").fetchone() == ("claude",)


def test_a_login_in_two_bound_groups_is_bound_to_nothing(tenants):
    database = tenants
    _ensure_roles(database)
    with database.admin() as conn:
        conn.execute(f"grant {OTHER_GROUP} to {MEMBER}")
    try:
        bind_login(database, GROUP, adapter="claude", tenants=["acme"])
        bind_login(database, OTHER_GROUP, adapter="codex", tenants=["acme"])
        with psycopg.connect(login_dsn(database, MEMBER)) as conn:
            with pytest.raises(pgerr.InsufficientPrivilege, match="several bound roles"):
                set_ctx(conn, "acme", adapter="claude")
            conn.rollback()
            conn.execute("select set_config('pymem.tenant', 'acme', true)")
            assert conn.execute("select count(*) from pymem.memories").fetchone()[0] == 0
            conn.rollback()
        # Binding the login itself settles it.
        bind_login(database, MEMBER, adapter="claude", tenants=["acme"])
        with psycopg.connect(login_dsn(database, MEMBER)) as conn:
            set_ctx(conn, "acme", adapter="claude")
            assert conn.execute("select count(*) from pymem.memories").fetchone()[0] == 3
    finally:
        with database.admin() as conn:
            conn.execute(f"revoke {OTHER_GROUP} from {MEMBER}")


def test_the_python_path_refuses_outside_the_binding(tenants, store):
    bind_login(tenants, APP_LOGIN, adapter="codex", tenants=["acme"], scope={"project": "a"})
    with pytest.raises(AccessDenied):
        store.bind(Context(tenant="globex", adapter="codex", scope={"project": "a"})).get("g-op")
    with pytest.raises(AccessDenied):
        store.bind(Context(tenant="acme", adapter="codex")).upsert_many(
            [{"id": "x", "content": "c"}], idempotency_key="k")
    mem = store.bind(Context(tenant="acme", adapter="codex", scope={"project": "a"}))
    assert mem.get("a-proj") is not None and mem.get("b-proj") is None


def test_binding_management_and_its_log(database):
    _ensure_roles(database)
    with database.admin() as conn:
        with pytest.raises(InvalidArguments, match="at least one tenant"):
            lib_bind_login(conn, AGENT_LOGIN, adapter="codex")
        with pytest.raises(InvalidArguments, match="not both"):
            lib_bind_login(conn, AGENT_LOGIN, adapter="codex", tenants=["acme"], all_tenants=True)
        with pytest.raises(NotFound):
            lib_bind_login(conn, "no_such_role_anywhere", adapter="codex", tenants=["acme"])
        with pytest.raises(InvalidArguments, match="superuser"):
            lib_bind_login(conn, "postgres", adapter="codex", tenants=["acme"])
        with pytest.raises(InvalidArguments):
            lib_bind_login(conn, AGENT_LOGIN, adapter="co\u202edex", tenants=["acme"])
        assert list_bindings(conn) == []
        # The database refuses the same by raw SQL: a binding without tenants, a superuser.
        with pytest.raises(pgerr.CheckViolation):
            conn.execute("insert into pymem.login_bindings (role_name, adapter) values (%s, 'codex')", (AGENT_LOGIN,))
        with pytest.raises(pgerr.InvalidParameterValue):
            conn.execute("insert into pymem.login_bindings (role_name, adapter, all_tenants) values ('postgres', 'x', true)")

        b = lib_bind_login(conn, AGENT_LOGIN, adapter="codex", tenants=["acme", "acme", "globex"],
                           scope={"project": "a"})
        assert (b.role, b.adapter, b.tenants, dict(b.scope)) == (AGENT_LOGIN, "codex", ("acme", "globex"), {"project": "a"})
        b = lib_bind_login(conn, GROUP, adapter="claude", all_tenants=True)
        assert b.all_tenants and b.tenants is None
        assert [x.role for x in list_bindings(conn)] == sorted([AGENT_LOGIN, GROUP])
        assert unbind_login(conn, GROUP) is True and unbind_login(conn, GROUP) is False
        conn.execute("truncate pymem.login_bindings")
        log = conn.execute("select event, role_name, adapter, tenants, all_tenants, changed_by"
                           " from pymem.binding_log order by seq").fetchall()
        assert log == [
            ("login.bound", AGENT_LOGIN, "codex", ["acme", "globex"], False, "postgres"),
            ("login.bound", GROUP, "claude", None, True, "postgres"),
            ("login.unbound", GROUP, None, None, None, "postgres"),
            ("login.unbound", AGENT_LOGIN, None, None, None, "postgres"),
        ]
        # The log is append-only, even for the superuser and in replica mode.
        for sql in ("delete from pymem.binding_log", "update pymem.binding_log set role_name = 'x'",
                    "truncate pymem.binding_log"):
            with pytest.raises(pgerr.InsufficientPrivilege, match="append-only"):
                with conn.transaction():
                    conn.execute("set local session_replication_role = replica")
                    conn.execute(sql)
    # The auditor reads bindings and their log; the app login reads neither.
    with psycopg.connect(database.auditor_dsn) as conn:
        assert conn.execute("select count(*) from pymem.binding_log").fetchone()[0] == 4
    with psycopg.connect(database.app_dsn) as conn:
        for sql in ("select * from pymem.login_bindings", "select * from pymem.binding_log"):
            with pytest.raises(pgerr.InsufficientPrivilege):
                conn.execute(sql)
            conn.rollback()


def test_binding_commands(database, monkeypatch):
    from pymem.cli import main

    env = {"PYMEM_DSN": database.app_dsn, "PYMEM_ADMIN_DSN": database.admin_dsn}
    run = CliRunner().invoke
    result = run(main, ["db", "bind-login", AGENT_LOGIN, "--adapter", "codex", "--tenant", "acme",
                        "--scope", "project=a", "--json"], env=env)
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["tenants"] == ["acme"]
    result = run(main, ["db", "bind-login", AGENT_LOGIN, "--adapter", "codex"], env=env)
    assert result.exit_code == 2 and "at least one tenant" in result.output
    result = run(main, ["db", "bindings"], env=env)
    assert result.exit_code == 0 and f"{AGENT_LOGIN}: adapter codex; tenants: acme; scope: project=a" in result.output
    result = run(main, ["db", "bindings", "--json"], env=env)
    assert [b["role"] for b in json.loads(result.output)] == [AGENT_LOGIN]
    # The binding holds for the login at once.
    with psycopg.connect(login_dsn(database, AGENT_LOGIN)) as conn:
        with pytest.raises(pgerr.InsufficientPrivilege):
            set_ctx(conn, "globex", adapter="codex", scope={"project": "a"})
    assert run(main, ["db", "unbind-login", AGENT_LOGIN], env=env).exit_code == 0
    result = run(main, ["db", "unbind-login", AGENT_LOGIN], env=env)
    assert result.exit_code == 1 and "has no binding" in result.output
    assert "no bindings" in run(main, ["db", "bindings"], env=env).output


def test_an_adapter_name_as_long_as_the_database_allows_binds(database):
    """The binding table allows adapter names of up to 200 characters (the vocabulary's MAX_NAME,
    as everywhere else an adapter is named); the library refused a valid one over 100."""
    from pymem.vocabulary import MAX_NAME

    longest = "a" * MAX_NAME
    with database.admin() as conn:
        check = conn.execute("select pg_get_constraintdef(oid) from pg_constraint where conrelid = "
                             "'pymem.login_bindings'::regclass and pg_get_constraintdef(oid) like '%length(adapter)%'"
                             ).fetchone()[0]
        assert f"<= {MAX_NAME}" in check
        try:
            b = lib_bind_login(conn, AGENT_LOGIN, adapter=longest, tenants=["acme"])
            assert b.adapter == longest
            assert [x.adapter for x in list_bindings(conn)] == [longest]
            with pytest.raises(InvalidArguments, match=f"at most {MAX_NAME} characters"):
                lib_bind_login(conn, AGENT_LOGIN, adapter=longest + "a", tenants=["acme"])
            assert [x.adapter for x in list_bindings(conn)] == [longest]  # the refusal changed nothing
        finally:
            unbind_login(conn, AGENT_LOGIN)
            conn.commit()
