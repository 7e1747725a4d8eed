"""Privileges: what the app and auditor logins can never do, and the ledger's ALWAYS triggers.

The app login runs every statement inside a transaction whose context is set to the tenant that
owns the data, so row-level security would let the statement through: what refuses it is the
privilege system (or, for the superuser, the append-only trigger).
"""

from __future__ import annotations

import psycopg
import pytest
from psycopg import errors as pgerr


def set_ctx(conn, tenant, adapter=None):
    conn.execute("select pymem.set_context(%s, null, %s, '{}'::jsonb, null)", (tenant, adapter))


@pytest.fixture
def seeded(database):
    with database.app() as conn:
        for tenant in ("acme", "globex"):
            set_ctx(conn, tenant)
            for i in range(3):
                conn.execute("insert into pymem.memories (tenant_id, id, content) values (%s, %s, 'x')",
                             (tenant, f"m{i}"))
            conn.commit()
    return database


def snapshot(database):
    with database.admin() as conn:
        return conn.execute(
            "select (select count(*) from pymem.ledger),"
            " (select string_agg(encode(chain_hash, 'hex'), ',' order by tenant_id, seq) from pymem.ledger),"
            " (select string_agg(tenant_id || ':' || seq || ':' || live_rows, ',' order by tenant_id) from pymem.chain_heads),"
            " (select count(*) from pymem.memories),"
            " (select relrowsecurity and relforcerowsecurity from pg_class where oid = 'pymem.memories'::regclass),"
            " (select string_agg(tgname::text || tgenabled::text, ',' order by tgname) from pg_trigger"
            "   where tgrelid in ('pymem.memories'::regclass, 'pymem.ledger'::regclass) and not tgisinternal),"
            " (select count(*) from pg_policy where polrelid = 'pymem.memories'::regclass),"
            " (select count(*) from pg_attribute where attrelid = 'pymem.memories'::regclass and attnum > 0)"
        ).fetchone()


APP_FORBIDDEN = [
    # the ledger is append-only, and appended only by the definer trigger
    ("update ledger", "update pymem.ledger set actor = 'forged'"),
    ("delete ledger", "delete from pymem.ledger"),
    ("truncate ledger", "truncate pymem.ledger"),
    ("insert ledger",
     "insert into pymem.ledger (tenant_id, seq, event, occurred_at, prev_hash, chain_hash)"
     " values ('acme', 100, 'memory.insert', now(), '\\x00', '\\x00')"),
    ("call _append_events",
     "select pymem._append_events(array[row('acme', 'memory.insert', 'forged', 1, '\\x00'::bytea, 1, '{}'::jsonb)"
     "::pymem._pending_event])"),
    ("call _memories_chain", "select pymem._memories_chain()"),
    # chain heads
    ("update chain_heads", "update pymem.chain_heads set seq = 0"),
    ("insert chain_heads", "insert into pymem.chain_heads (tenant_id, seq, chain_hash) values ('x', 0, '\\x00')"),
    ("delete chain_heads", "delete from pymem.chain_heads"),
    # DDL on objects it does not own
    ("disable rls", "alter table pymem.memories disable row level security"),
    ("no force rls", "alter table pymem.memories no force row level security"),
    ("disable rls ledger", "alter table pymem.ledger disable row level security"),
    ("disable all triggers", "alter table pymem.memories disable trigger all"),
    ("disable ledger trigger", "alter table pymem.ledger disable trigger ledger_no_update_delete"),
    ("add column", "alter table pymem.memories add column sneaky int"),
    ("drop column", "alter table pymem.memories drop column content_hash"),
    ("drop policy", "drop policy memories_read on pymem.memories"),
    ("create policy", "create policy open_all on pymem.memories for select using (true)"),
    ("alter policy", "alter policy memories_read on pymem.memories using (true)"),
    ("replace function",
     "create or replace function pymem._ctx_tenant() returns text language sql as $$ select 'acme' $$"),
    ("drop table", "drop table pymem.ledger"),
    ("create table", "create table pymem.sneaky (x int)"),
    ("truncate memories", "truncate pymem.memories"),
    # roles and settings that would switch the guards off
    ("set role owner", "set role pymem_owner"),
    ("replica mode", "set session_replication_role = replica"),
    ("bind adapter", "insert into pymem.login_bindings (role_name, adapter, all_tenants) values ('x', 'y', true)"),
    ("unbind", "delete from pymem.login_bindings"),
    ("read bindings", "select * from pymem.login_bindings"),
    ("binding log", "delete from pymem.binding_log"),
    ("store_info", "update pymem.store_info set embedding_dim = 3"),
    # convention receipts and their endings are appended, never changed; the installation key is
    # registered through its definer function only
    ("update receipt", "update pymem.convention_receipts set rule_text = 'x'"),
    ("delete receipt", "delete from pymem.convention_receipts"),
    ("truncate receipts", "truncate pymem.convention_receipts"),
    ("update ending", "update pymem.convention_endings set reason = 'x'"),
    ("delete ending", "delete from pymem.convention_endings"),
    ("insert key", "insert into pymem.signing_keys (public_key) values (repeat('a', 64))"),
    ("swap key", "update pymem.signing_keys set public_key = repeat('b', 64)"),
    ("delete key", "delete from pymem.signing_keys"),
    ("receipt time", "insert into pymem.convention_receipts (tenant_id, id, version, subject, rule_text, rule_sha256,"
                     " base_commit, assertion, lesson_id, public_key, signature, receipt_sha256, filed_at) values"
                     " ('acme', 'x', 1, 's', 'r', '\\x00', repeat('a', 40), 'a', 'l', repeat('a', 64), '\\x00',"
                     " '\\x00', now())"),
]


def _trigger_statements(conn) -> list[tuple[str, str]]:
    """DISABLE / DROP for every trigger on the memories and ledger tables, whatever they are called."""
    rows = conn.execute(
        "select tgrelid::regclass::text, tgname from pg_trigger"
        " where tgrelid in ('pymem.memories'::regclass, 'pymem.ledger'::regclass) and not tgisinternal"
        " order by 1, 2").fetchall()
    conn.rollback()
    assert len(rows) >= 4, rows
    out = []
    for table, name in rows:
        out.append((f"disable trigger {name}", f"alter table {table} disable trigger {name}"))
        out.append((f"drop trigger {name}", f"drop trigger {name} on {table}"))
    return out


def test_app_login_cannot(seeded):
    """Each statement, with the tenant's context set and with none, fails with 42501 and changes nothing."""
    before = snapshot(seeded)
    allowed = []
    with seeded.app() as conn:
        for label, sql in APP_FORBIDDEN + _trigger_statements(conn):
            for with_context in (True, False):
                if with_context:
                    set_ctx(conn, "acme")
                try:
                    conn.execute(sql)
                except pgerr.InsufficientPrivilege:
                    pass
                except psycopg.Error as exc:
                    allowed.append(f"{label}: {type(exc).__name__}: {exc}")
                else:
                    allowed.append(f"{label}: succeeded")
                conn.rollback()
    assert allowed == []
    assert snapshot(seeded) == before


def test_app_cannot_forge_events_through_definer_functions(seeded):
    """The definer functions the app may run append only for the context tenant, as triggers."""
    with seeded.app() as conn:
        set_ctx(conn, "acme")
        # verify_chain is definer too: with a tenant context it will not report another tenant.
        with pytest.raises(pgerr.InsufficientPrivilege):
            conn.execute("select * from pymem.verify_chain('globex')")
        conn.rollback()
        set_ctx(conn, "acme")
        rows = conn.execute("select tenant_id, problem from pymem.verify_chain()").fetchall()
        assert rows == [("acme", None)]
        conn.rollback()


def test_auditor_reads_every_ledger_but_nothing_else(seeded):
    with seeded.admin() as admin:
        total = admin.execute("select count(*) from pymem.ledger").fetchone()[0]
    assert total == 6
    before = snapshot(seeded)
    with psycopg.connect(seeded.auditor_dsn) as conn:
        # Every tenant's ledger and heads, with no context set.
        assert conn.execute("select count(*) from pymem.ledger").fetchone()[0] == total
        assert conn.execute("select count(distinct tenant_id) from pymem.ledger").fetchone()[0] == 2
        assert conn.execute("select count(*) from pymem.chain_heads").fetchone()[0] == 2
        # The verifier over every tenant.
        rows = conn.execute("select tenant_id, entries, problem from pymem.verify_chain() order by 1").fetchall()
        assert rows == [("acme", 3, None), ("globex", 3, None)]
        conn.rollback()

        forbidden = [
            "select * from pymem.memories",
            "select content from pymem.memories",
            "insert into pymem.memories (tenant_id, id) values ('acme', 'aud')",
            "update pymem.memories set content = 'x'",
            "delete from pymem.memories",
            "update pymem.ledger set actor = 'x'",
            "delete from pymem.ledger",
            "truncate pymem.ledger",
            "insert into pymem.ledger (tenant_id, seq, event, occurred_at, prev_hash, chain_hash)"
            " values ('acme', 100, 'memory.insert', now(), '\\x00', '\\x00')",
            "update pymem.chain_heads set seq = 0",
            "delete from pymem.chain_heads",
            "insert into pymem.login_bindings (role_name, adapter, all_tenants) values ('x', 'y', true)",
            "delete from pymem.binding_log",
            "select pymem._append_events(array[row('acme', 'memory.insert', 'x', 1, '\\x00'::bytea, 1, '{}'::jsonb)"
            "::pymem._pending_event])",
            "alter table pymem.ledger disable trigger ledger_no_update_delete",
            "create table pymem.sneaky (x int)",
            "set role pymem_owner",
        ]
        for sql in forbidden:
            with pytest.raises(pgerr.InsufficientPrivilege):
                conn.execute(sql)
            conn.rollback()
        # Even with a tenant context the auditor cannot read or write memories.
        conn.execute("select pymem.set_context('acme')")
        with pytest.raises(pgerr.InsufficientPrivilege):
            conn.execute("select count(*) from pymem.memories")
        conn.rollback()
    assert snapshot(seeded) == before


@pytest.mark.parametrize("replica", [False, True], ids=["origin", "replica"])
def test_superuser_cannot_update_or_delete_the_ledger(seeded, replica):
    before = snapshot(seeded)
    with psycopg.connect(seeded.admin_dsn) as conn:
        assert conn.execute("select rolsuper from pg_roles where rolname = current_user").fetchone()[0]
        for sql in ("update pymem.ledger set actor = 'forged' where seq = 2",
                    "delete from pymem.ledger where seq = 2",
                    "truncate pymem.ledger"):
            if replica:
                conn.execute("set session_replication_role = replica")
            with pytest.raises(pgerr.InsufficientPrivilege, match="append-only"):
                conn.execute(sql)
            conn.rollback()
    assert snapshot(seeded) == before


# SECURITY DEFINER functions run with the owner's rights: the app may call only these.
APP_DEFINER_ALLOWED = {"verify_chain", "record_refusal", "delete_memories", "purge_idempotency_keys",
                       "_login_binding", "record_injection", "erase_memory", "erase_session",
                       # scoped exact search (called by the invoker pymem.search): ids the read policy admits
                       "_search_in_scope",
                       # filing locks (the context tenant's row only) and its own tenant's fact channel
                       "lock_for_filing", "fact_channel",
                       # what a session receives (its scope and its ancestors): the rule applied inside
                       "session_hot", "session_search", "session_search_hybrid", "session_lessons", "session_receives",
                       # hybrid search's BM25 candidates (called by the invoker pymem.search): the same
                       "_text_candidates",
                       # the store's embedder: fills an empty record, or records what the rows already say
                       "claim_embedder", "record_reembedded",
                       # retention and erasure of a person: each checks the context itself (an operator's
                       # untagged whole-tenant context; RLS decides which expired rows a context deletes)
                       "set_retention", "reap_expired", "purge_expired", "erase_actor",
                       # the actor behind a ledger pseudonym, for its own tenant's context or an auditor
                       "_actor_name",
                       # deciding a held note: each refuses a context acting as an adapter (an operator's act)
                       "release_quarantined", "reject_quarantined"}


def test_definer_functions_the_app_and_auditor_may_call(database):
    from helpers.database import APP_LOGIN, AUDITOR_LOGIN

    with database.admin() as conn:
        rows = conn.execute(
            "select p.proname, has_function_privilege(%s, p.oid, 'execute'),"
            " has_function_privilege(%s, p.oid, 'execute'), p.proconfig"
            " from pg_proc p where p.pronamespace = 'pymem'::regnamespace and p.prosecdef order by 1",
            (APP_LOGIN, AUDITOR_LOGIN)).fetchall()
    names = {r[0] for r in rows}
    assert "verify_chain" in names and any(n.startswith("_append") for n in names), names
    app_callable = {name for name, app, _, _ in rows if app}
    assert app_callable <= APP_DEFINER_ALLOWED, app_callable - APP_DEFINER_ALLOWED
    auditor_callable = {name for name, _, aud, _ in rows if aud}
    assert auditor_callable <= {"verify_chain", "_login_binding", "_actor_name"}, auditor_callable
    for name, _, _, config in rows:
        # A definer function must pin its search_path, or a caller could shadow what it calls.
        assert config and any(c.startswith("search_path=") for c in config), name


def test_ledger_triggers_fire_always(database):
    with database.admin() as conn:
        rows = conn.execute(
            "select tgname, tgenabled from pg_trigger where tgrelid = 'pymem.ledger'::regclass"
            " and not tgisinternal order by tgname").fetchall()
    assert rows == [("ledger_no_truncate", "A"), ("ledger_no_update_delete", "A")]


def test_tables_are_owned_by_the_owner_role_with_forced_rls(database):
    with database.admin() as conn:
        rows = conn.execute(
            "select c.relname, c.relowner::regrole::text, c.relrowsecurity, c.relforcerowsecurity"
            " from pg_class c where c.relnamespace = 'pymem'::regnamespace and c.relkind = 'r'"
            " and c.relname <> 'alembic_version' order by 1").fetchall()
    owners = {r[0]: r[1] for r in rows}
    assert set(owners.values()) == {"pymem_owner"}, owners
    tenant_tables = {"memories", "ledger", "chain_heads", "idempotency_keys", "sessions", "convention_receipts",
                     "convention_endings"}
    for name, _, rls, force in rows:
        if name in tenant_tables:
            assert rls and force, name
    # Every table keyed by tenant has RLS (catch a future table that forgets it).
    with database.admin() as conn:
        unprotected = conn.execute(
            "select c.relname from pg_class c join pg_attribute a on a.attrelid = c.oid and a.attname = 'tenant_id'"
            " where c.relnamespace = 'pymem'::regnamespace and c.relkind = 'r'"
            " and not (c.relrowsecurity and c.relforcerowsecurity)").fetchall()
    assert unprotected == []


def test_pymem_app_has_no_dangerous_attributes(database):
    with database.admin() as conn:
        rows = conn.execute(
            "select rolname, rolsuper, rolbypassrls, rolcreaterole, rolcreatedb, rolcanlogin from pg_roles"
            " where rolname in ('pymem_app', 'pymem_auditor', 'pymem_owner') order by 1").fetchall()
    assert rows == [
        ("pymem_app", False, False, False, False, False),
        ("pymem_auditor", False, False, False, False, False),
        ("pymem_owner", False, False, False, False, False),
    ]
    with database.app() as conn:
        assert not conn.execute("select pg_has_role(current_user, 'pymem_owner', 'member')").fetchone()[0]
        assert not conn.execute("select pg_has_role(current_user, 'pymem_auditor', 'member')").fetchone()[0]
