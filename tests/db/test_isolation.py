"""Row-level isolation, tested as the app login (a non-superuser member of pymem_app).

Every test drives the policies through raw SQL (`select pymem.set_context(...)` inside a
transaction) and, where there is one, through the Python path (Context + store.bind(...)).
Seeding also goes through the app login with a proper context; the superuser connection is only
used to count what really reached the tables.
"""

from __future__ import annotations

import psycopg
import pytest
from psycopg import errors as pgerr
from psycopg.types.json import Jsonb

from pymem.context import Context
from pymem.errors import AccessDenied, ContextError

RLS_REFUSED = pgerr.InsufficientPrivilege  # "new row violates row-level security policy" is 42501


# -- helpers ------------------------------------------------------------------------------------

def set_ctx(conn, tenant, actor=None, adapter=None, scope=None, read_adapters=None):
    conn.execute(
        "select pymem.set_context(%s, %s, %s, %s, %s::text[])",
        (tenant, actor, adapter, Jsonb(scope or {}), read_adapters),
    )


def insert(conn, tenant, mid, *, scope=None, adapter=None, content="x"):
    conn.execute(
        "insert into pymem.memories (tenant_id, id, scope, content, source_adapter) values (%s, %s, %s, %s, %s)",
        (tenant, mid, Jsonb(scope or {}), content, adapter),
    )


def seed(database, tenant, mid, *, scope=None, adapter=None, content="x"):
    """One committed row, written by the app login in a context that is allowed to write it."""
    with database.app() as conn:
        set_ctx(conn, tenant, adapter=adapter, scope=scope)
        insert(conn, tenant, mid, scope=scope, adapter=adapter, content=content)
        conn.commit()


def delete(conn, *ids) -> int:
    """Delete through pymem.delete_memories (logins hold no DELETE privilege); how many went."""
    return conn.execute("select count(*) from pymem.delete_memories(%s)", (list(ids),)).fetchone()[0]


def visible_ids(conn, **ctx) -> set[str]:
    with conn.transaction():
        if ctx:
            set_ctx(conn, **ctx)
        return {r[0] for r in conn.execute("select id from pymem.memories")}


def admin_rows(database, sql="select tenant_id, id, content, source_adapter from pymem.memories order by 1, 2"):
    with database.admin() as conn:
        return conn.execute(sql).fetchall()


def counts(database):
    with database.admin() as conn:
        return conn.execute(
            "select (select count(*) from pymem.memories), (select count(*) from pymem.ledger),"
            " (select count(*) from pymem.chain_heads)"
        ).fetchone()


def refused(conn, sql, params=None, exc=RLS_REFUSED):
    """Run `sql` in a savepoint and require it to fail with `exc`."""
    with pytest.raises(exc), conn.transaction():
        conn.execute(sql, params)


@pytest.fixture
def two_tenants(database):
    seed(database, "acme", "a1", content="acme one")
    seed(database, "acme", "a2", content="acme two")
    seed(database, "globex", "g1", content="globex secret")
    return database


def test_app_login_is_not_privileged(database):
    with database.app() as conn:
        row = conn.execute(
            "select rolsuper, rolbypassrls, pg_has_role(current_user, 'pymem_app', 'member'),"
            " pg_has_role(current_user, 'pymem_owner', 'member')"
            " from pg_roles where rolname = current_user"
        ).fetchone()
    assert row == (False, False, True, False)


# -- tenant ------------------------------------------------------------------------------------

def test_cross_tenant_select(two_tenants):
    with two_tenants.app() as conn:
        assert visible_ids(conn, tenant="acme") == {"a1", "a2"}
        assert visible_ids(conn, tenant="globex") == {"g1"}
        assert visible_ids(conn, tenant="nobody") == set()
        with conn.transaction():
            set_ctx(conn, "acme")
            # Naming the other tenant explicitly does not help.
            assert conn.execute("select count(*) from pymem.memories where tenant_id = 'globex'").fetchone()[0] == 0
            assert conn.execute("select count(*) from pymem.memories where content like '%secret%'").fetchone()[0] == 0
            # Its ledger and chain head are invisible too.
            assert conn.execute("select distinct tenant_id from pymem.ledger").fetchall() == [("acme",)]
            assert conn.execute("select tenant_id from pymem.chain_heads").fetchall() == [("acme",)]


def test_cross_tenant_insert_refused(two_tenants):
    before = counts(two_tenants)
    with two_tenants.app() as conn:
        set_ctx(conn, "acme")
        refused(conn, "insert into pymem.memories (tenant_id, id, content) values ('globex', 'evil', 'x')")
        # Upserting over the other tenant's key is refused too (the row is invisible, the insert is checked).
        refused(conn, "insert into pymem.memories (tenant_id, id, content) values ('globex', 'g1', 'x')"
                      " on conflict (tenant_id, id) do update set content = 'pwned'")
        conn.commit()
    assert counts(two_tenants) == before
    assert ("globex", "g1", "globex secret", None) in admin_rows(two_tenants)


def test_cross_tenant_update_and_delete_affect_nothing(two_tenants):
    before = admin_rows(two_tenants)
    with two_tenants.app() as conn:
        set_ctx(conn, "acme")
        assert conn.execute("update pymem.memories set content = 'pwned' where tenant_id = 'globex'").rowcount == 0
        assert conn.execute("update pymem.memories set content = 'pwned' where id = 'g1'").rowcount == 0
        assert delete(conn, "g1") == 0
        refused(conn, "delete from pymem.memories where id = 'g1'")  # no DELETE privilege at all
        # Moving an own row into the other tenant is refused (policy WITH CHECK, and the key trigger).
        with pytest.raises((RLS_REFUSED, pgerr.InvalidParameterValue)), conn.transaction():
            conn.execute("update pymem.memories set tenant_id = 'globex' where id = 'a1'")
        conn.commit()
    assert admin_rows(two_tenants) == before


def test_cross_tenant_python_path(store, database):
    acme = store.bind(Context(tenant="acme", actor="u1"))
    globex = store.bind(Context(tenant="globex", actor="u2"))
    (aid,) = acme.add([{"id": "shared-id", "content": "acme's"}])
    (gid,) = globex.add([{"id": "shared-id", "content": "globex's"}])
    assert aid == gid == "shared-id"  # ids are per tenant
    assert acme.get_row("shared-id")["content"] == "acme's"
    assert globex.get_row("shared-id")["content"] == "globex's"
    (only_acme,) = acme.add([{"content": "private"}])
    assert globex.get_row(only_acme) is None
    assert store.bind(tenant="initech").get_row(only_acme) is None


# -- scope -------------------------------------------------------------------------------------

def test_scope_containment(database):
    seed(database, "acme", "pu", scope={"project": "a", "user": "u"})
    seed(database, "acme", "p", scope={"project": "a"})
    seed(database, "acme", "none", scope={})
    with database.app() as conn:
        assert visible_ids(conn, tenant="acme", scope={"project": "a"}) == {"pu", "p"}
        assert visible_ids(conn, tenant="acme", scope={}) == {"pu", "p", "none"}
        assert visible_ids(conn, tenant="acme", scope={"project": "b"}) == set()
        assert visible_ids(conn, tenant="acme", scope={"project": "a", "user": "u"}) == {"pu"}
        assert visible_ids(conn, tenant="acme", scope={"project": "a", "user": "v"}) == set()
        assert visible_ids(conn, tenant="acme", scope={"user": "u"}) == {"pu"}


def test_write_outside_context_scope_refused(database):
    seed(database, "acme", "pb", scope={"project": "b"})
    before = admin_rows(database, "select id, scope::text, content from pymem.memories order by id")
    with database.app() as conn:
        set_ctx(conn, "acme", scope={"project": "a"})
        refused(conn, "insert into pymem.memories (tenant_id, id, scope) values ('acme', 'x', %s)",
                (Jsonb({"project": "b"}),))
        refused(conn, "insert into pymem.memories (tenant_id, id, scope) values ('acme', 'x', '{}')")
        # Out-of-scope rows cannot be changed or deleted.
        assert conn.execute("update pymem.memories set content = 'y' where id = 'pb'").rowcount == 0
        assert delete(conn, "pb") == 0
        # An in-scope row cannot be moved out of the scope.
        insert(conn, "acme", "pa", scope={"project": "a", "user": "u"})
        refused(conn, "update pymem.memories set scope = '{\"project\": \"b\"}' where id = 'pa'")
        refused(conn, "update pymem.memories set scope = '{}' where id = 'pa'")
        conn.rollback()
    assert admin_rows(database, "select id, scope::text, content from pymem.memories order by id") == before


def test_scope_python_path(store, database):
    mem = store.bind(Context(tenant="acme", scope={"project": "a"}))
    (mid,) = mem.add([{"content": "in scope"}])  # defaults to the context scope
    assert mem.get_row(mid)["scope"] == {"project": "a"}
    (mid2,) = mem.add([{"content": "narrower", "scope": {"project": "a", "user": "u"}}])
    assert store.bind(tenant="acme", scope={"project": "b"}).get_row(mid) is None
    assert store.bind(tenant="acme").get_row(mid2)["content"] == "narrower"
    before = counts(database)
    with pytest.raises(AccessDenied):
        mem.add([{"content": "elsewhere", "scope": {"project": "b"}}])
    with pytest.raises(AccessDenied):
        mem.add([{"content": "wider", "scope": {}}])
    assert counts(database) == before


# -- adapter -----------------------------------------------------------------------------------

def test_adapter_write_check(database):
    with database.app() as conn:
        set_ctx(conn, "acme", adapter="codex")
        refused(conn, "insert into pymem.memories (tenant_id, id) values ('acme', 'untagged')")
        refused(conn, "insert into pymem.memories (tenant_id, id, source_adapter) values ('acme', 'c', 'claude')")
        insert(conn, "acme", "own", adapter="codex")
        conn.commit()

        set_ctx(conn, "acme")  # operator
        insert(conn, "acme", "op")
        refused(conn, "insert into pymem.memories (tenant_id, id, source_adapter) values ('acme', 'fake', 'codex')")
        conn.commit()
    assert admin_rows(database, "select id, source_adapter from pymem.memories order by id") == [
        ("op", None), ("own", "codex")]


def test_adapter_updates_and_deletes_only_its_own_rows(database):
    seed(database, "acme", "op")
    seed(database, "acme", "cx", adapter="codex")
    seed(database, "acme", "cl", adapter="claude")
    with database.app() as conn:
        set_ctx(conn, "acme", adapter="codex")
        assert conn.execute("update pymem.memories set content = 'by codex'").rowcount == 1
        # It cannot hand its row to another adapter or make it untagged (trusted).
        refused(conn, "update pymem.memories set source_adapter = 'claude' where id = 'cx'")
        refused(conn, "update pymem.memories set source_adapter = null where id = 'cx'")
        assert delete(conn, "op", "cl") == 0
        conn.commit()
    assert admin_rows(database, "select id, content from pymem.memories order by id") == [
        ("cl", "x"), ("cx", "by codex"), ("op", "x")]

    with database.app() as conn:
        set_ctx(conn, "acme", adapter="codex")
        assert delete(conn, "op", "cx", "cl") == 1
        conn.commit()
        # The operator may change any row of the tenant, and the changed row then carries its
        # (NULL) tag: keeping another adapter's tag is refused, taking the row over is allowed.
        set_ctx(conn, "acme")
        refused(conn, "update pymem.memories set content = 'op edit' where id = 'cl'")
        assert conn.execute(
            "update pymem.memories set content = 'op edit', source_adapter = null where id = 'cl'").rowcount == 1
        assert conn.execute("update pymem.memories set content = 'op' where id = 'op'").rowcount == 1
        conn.commit()
    assert admin_rows(database, "select id, content, source_adapter from pymem.memories order by id") == [
        ("cl", "op edit", None), ("op", "op", None)]
    with database.app() as conn:
        set_ctx(conn, "acme")
        assert delete(conn, "op", "cl") == 2  # ... and delete any row
        conn.commit()
    assert admin_rows(database) == []


def test_adapter_python_path(store, database):
    codex = store.bind(Context(tenant="acme", adapter="codex"))
    (mid,) = codex.add([{"content": "from codex"}])
    assert codex.get_row(mid)["source_adapter"] == "codex"
    (oid,) = store.bind(Context(tenant="acme")).add([{"content": "operator"}])
    assert store.bind(Context(tenant="acme")).get_row(oid)["source_adapter"] is None
    # The row dict cannot choose its own tag.
    from pymem.errors import InvalidArguments
    with pytest.raises(InvalidArguments):
        codex.add([{"content": "x", "source_adapter": "claude"}])


# -- read allow-list ---------------------------------------------------------------------------

def test_read_allow_list(database):
    seed(database, "acme", "op")
    seed(database, "acme", "cx", adapter="codex")
    seed(database, "acme", "cl", adapter="claude")
    with database.app() as conn:
        assert visible_ids(conn, tenant="acme") == {"op", "cx", "cl"}
        assert visible_ids(conn, tenant="acme", read_adapters=["codex"]) == {"cx"}
        assert visible_ids(conn, tenant="acme", read_adapters=["codex", "claude"]) == {"cx", "cl"}
        assert visible_ids(conn, tenant="acme", read_adapters=["gemini"]) == set()
        assert visible_ids(conn, tenant="acme", read_adapters=[]) == set()


def test_read_allow_list_python_path(store, database):
    seed(database, "acme", "op")
    seed(database, "acme", "cx", adapter="codex")
    assert store.bind(Context(tenant="acme")).get_row("op") is not None
    only_codex = store.bind(Context(tenant="acme", read_adapters=["codex"]))
    assert only_codex.get_row("cx") is not None
    assert only_codex.get_row("op") is None  # untagged rows are excluded by a list
    nothing = store.bind(Context(tenant="acme", read_adapters=()))
    assert nothing.get_row("cx") is None and nothing.get_row("op") is None


# -- unset context fails closed ----------------------------------------------------------------

def test_no_context_fails_closed(two_tenants):
    before = counts(two_tenants)
    with two_tenants.app() as conn:
        assert conn.execute("select count(*) from pymem.memories").fetchone()[0] == 0
        assert conn.execute("select count(*) from pymem.ledger").fetchone()[0] == 0
        assert conn.execute("select count(*) from pymem.chain_heads").fetchone()[0] == 0
        refused(conn, "insert into pymem.memories (tenant_id, id) values ('acme', 'x')")
        assert conn.execute("update pymem.memories set content = 'y'").rowcount == 0
        assert delete(conn, "a1", "a2", "g1") == 0
        # Verifying every tenant needs the auditor role.
        refused(conn, "select * from pymem.verify_chain()")
        conn.commit()
    assert counts(two_tenants) == before


def test_empty_string_context_after_commit_fails_closed(two_tenants):
    """A pooled connection keeps '' in the settings after a transaction-local set_config."""
    before = counts(two_tenants)
    with two_tenants.app() as conn:
        set_ctx(conn, "acme", actor="u1", adapter=None, scope={"project": "a"}, read_adapters=["codex"])
        assert conn.execute("select current_setting('pymem.tenant')").fetchone()[0] == "acme"
        conn.commit()
        # New transaction on the same connection, no set_context: the placeholders now exist with ''.
        settings = conn.execute(
            "select current_setting('pymem.tenant', true), current_setting('pymem.scope', true),"
            " current_setting('pymem.read_adapters', true)"
        ).fetchone()
        assert settings == ("", "", "")
        assert conn.execute("select pymem._ctx_tenant(), pymem._ctx_read_adapters()").fetchone() == (None, None)
        assert conn.execute("select count(*) from pymem.memories").fetchone()[0] == 0
        assert conn.execute("select count(*) from pymem.ledger").fetchone()[0] == 0
        refused(conn, "insert into pymem.memories (tenant_id, id) values ('acme', 'x')")
        refused(conn, "insert into pymem.memories (tenant_id, id) values ('', 'x')", exc=psycopg.Error)
        assert conn.execute("update pymem.memories set content = 'y'").rowcount == 0
        assert delete(conn, "a1", "a2", "g1") == 0
        conn.commit()
    assert counts(two_tenants) == before


def test_context_does_not_survive_rollback_or_pool_reuse(store, database):
    seed(database, "acme", "a1")
    with store.pool.connection() as conn, conn.transaction():
        set_ctx(conn, "acme")
        assert conn.execute("select count(*) from pymem.memories").fetchone()[0] == 1
    with store.pool.connection() as conn:  # very likely the same connection (pool of idle ones)
        assert conn.execute("select count(*) from pymem.memories").fetchone()[0] == 0
        conn.rollback()


# -- adapter bindings --------------------------------------------------------------------------

def test_adapter_binding_pins_the_login(database, store):
    from helpers.database import APP_LOGIN, bind_login

    bind_login(database, APP_LOGIN, adapter="codex", tenants=["acme"])
    with database.app() as conn:
        with pytest.raises(pgerr.InsufficientPrivilege):
            set_ctx(conn, "acme", adapter="claude")
        conn.rollback()
        with pytest.raises(pgerr.InsufficientPrivilege):
            set_ctx(conn, "acme", adapter=None)
        conn.rollback()

        set_ctx(conn, "acme", adapter="codex")
        insert(conn, "acme", "ok", adapter="codex")
        # Overwriting the setting by hand changes nothing: the binding wins.
        conn.execute("select set_config('pymem.adapter', '', true)")
        refused(conn, "insert into pymem.memories (tenant_id, id) values ('acme', 'untagged')")
        conn.execute("select set_config('pymem.adapter', 'claude', true)")
        refused(conn, "insert into pymem.memories (tenant_id, id, source_adapter) values ('acme', 'c', 'claude')")
        insert(conn, "acme", "still-codex", adapter="codex")
        conn.commit()

        # Without set_context at all (settings by hand), still no untagged row.
        conn.execute("select set_config('pymem.tenant', 'acme', true)")
        refused(conn, "insert into pymem.memories (tenant_id, id) values ('acme', 'untagged2')")
        conn.rollback()

        # The login cannot remove its own binding.
        refused(conn, "delete from pymem.login_bindings")
        refused(conn, "update pymem.login_bindings set adapter = 'claude'")
        refused(conn, "insert into pymem.login_bindings (role_name, adapter, all_tenants) values (current_user, 'x', true)")
        conn.rollback()

    # The Python path: an operator context on a bound login is refused as a context error / denial.
    with pytest.raises((AccessDenied, ContextError)):
        store.bind(Context(tenant="acme")).add([{"content": "untagged"}])
    assert admin_rows(database, "select id, source_adapter from pymem.memories order by id") == [
        ("ok", "codex"), ("still-codex", "codex")]
    # The ledger records the bound adapter as the writer.
    assert admin_rows(database, "select distinct adapter from pymem.ledger") == [("codex",)]
