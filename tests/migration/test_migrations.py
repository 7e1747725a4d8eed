"""Migrations: `upgrade head` from an empty database is exactly the canonical sql/schema.sql.

Each test creates its own empty databases on the test server (dropped in `finally`) and compares
catalog snapshots of the pymem schema: tables and columns, constraints, indexes, functions,
triggers, policies, RLS flags, comments, owners and ACLs (the Alembic version table aside).
"""

from __future__ import annotations

import ast
import itertools
import json
import os
import re
from contextlib import contextmanager, suppress
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest
from helpers.database import APP_LOGIN, PASSWORD, with_user

from pymem import migrate
from pymem.config import Settings
from pymem.resources import migrations_dir, render_sql, sql_dir

DIM = 384
_names = itertools.count()


@contextmanager
def empty_databases(server_dsn, count=1):
    """`count` fresh, empty databases; yields their superuser DSNs and drops them afterwards."""
    names = [f"pymem_mig_{os.getpid()}_{next(_names)}" for _ in range(count)]
    superuser = urlsplit(server_dsn).username or "postgres"
    try:
        with psycopg.connect(server_dsn, autocommit=True) as conn:
            for name in names:
                conn.execute(f'create database "{name}"')
        yield [with_user(server_dsn, superuser, database=name) for name in names]
    finally:
        with psycopg.connect(server_dsn, autocommit=True) as conn:
            for name in names:
                conn.execute(f'drop database if exists "{name}" with (force)')


def run_script(dsn: str, sql: str) -> None:
    """A whole SQL file as one simple-protocol script (no parameters, so no %-escaping)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql)


# -- catalog snapshot --------------------------------------------------------------------------

EXCLUDED = ("alembic_version", "_alembic_version", "alembic_version_pkc")

CATALOG_QUERIES = {
    "schema": """
        select n.nspname, n.nspowner::regrole::text, n.nspacl::text[], obj_description(n.oid, 'pg_namespace')
        from pg_namespace n where n.nspname = 'pymem'""",
    "extensions": """
        select e.extname, e.extversion, e.extnamespace::regnamespace::text from pg_extension e order by 1""",
    "relations": """
        select c.relname, c.relkind, c.relowner::regrole::text, c.relacl::text[], c.relrowsecurity,
               c.relforcerowsecurity, c.relpersistence, c.reloptions, obj_description(c.oid, 'pg_class')
        from pg_class c where c.relnamespace = 'pymem'::regnamespace and c.relname <> all (%(excluded)s)
        order by 1""",
    "columns": """
        select c.relname, a.attnum, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull,
               pg_get_expr(d.adbin, d.adrelid), a.attidentity, a.attgenerated, a.attacl::text[],
               col_description(c.oid, a.attnum), a.attcollation::regcollation::text, a.attstorage
        from pg_class c
        join pg_attribute a on a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped
        left join pg_attrdef d on d.adrelid = c.oid and d.adnum = a.attnum
        where c.relnamespace = 'pymem'::regnamespace and c.relkind in ('r', 'p', 'v', 'm', 'f')
          and c.relname <> all (%(excluded)s)
        order by 1, 2""",
    "constraints": """
        select k.conrelid::regclass::text, k.conname, k.contype, pg_get_constraintdef(k.oid), k.condeferrable,
               k.condeferred, obj_description(k.oid, 'pg_constraint')
        from pg_constraint k where k.connamespace = 'pymem'::regnamespace
          and k.conrelid::regclass::text <> 'pymem.alembic_version'
        order by 1, 2""",
    "indexes": """
        select i.tablename, i.indexname, i.indexdef from pg_indexes i
        where i.schemaname = 'pymem' and i.tablename <> all (%(excluded)s) order by 1, 2""",
    "functions": """
        select p.proname, pg_get_function_identity_arguments(p.oid), pg_get_function_result(p.oid), p.prokind,
               md5(pg_get_functiondef(p.oid)), p.prosecdef, p.proconfig, p.provolatile, p.proparallel,
               p.proleakproof, p.proisstrict, p.proowner::regrole::text, p.proacl::text[],
               obj_description(p.oid, 'pg_proc')
        from pg_proc p where p.pronamespace = 'pymem'::regnamespace order by 1, 2""",
    "triggers": """
        select t.tgrelid::regclass::text, t.tgname, pg_get_triggerdef(t.oid), t.tgenabled,
               obj_description(t.oid, 'pg_trigger')
        from pg_trigger t join pg_class c on c.oid = t.tgrelid
        where c.relnamespace = 'pymem'::regnamespace and not t.tgisinternal order by 1, 2""",
    "policies": """
        select p.tablename, p.policyname, p.permissive, p.roles::text[], p.cmd, p.qual, p.with_check
        from pg_policies p where p.schemaname = 'pymem' order by 1, 2""",
    "policy_comments": """
        select pol.polrelid::regclass::text, pol.polname, obj_description(pol.oid, 'pg_policy')
        from pg_policy pol join pg_class c on c.oid = pol.polrelid
        where c.relnamespace = 'pymem'::regnamespace order by 1, 2""",
    "types": """
        select t.typname, t.typtype, t.typowner::regrole::text, t.typacl::text[]
        from pg_type t where t.typnamespace = 'pymem'::regnamespace and t.typname <> all (%(excluded)s)
        order by 1""",
    "views": """
        select v.viewname, v.viewowner, v.definition from pg_views v where v.schemaname = 'pymem' order by 1""",
    "descriptions": """
        select pg_describe_object(d.classoid, d.objoid, d.objsubid), d.description
        from pg_description d where d.objoid >= 16384 order by 1""",
    "default_acls": """
        select a.defaclrole::regrole::text, a.defaclobjtype, a.defaclacl::text[] from pg_default_acl a
        where a.defaclnamespace in (0, 'pymem'::regnamespace) order by 1, 2""",
    "store_info": "select embedding_dim, hash_version from pymem.store_info",
}


def _hashable(value):
    return tuple(_hashable(v) for v in value) if isinstance(value, (list, tuple)) else value


def catalog(dsn_or_conn) -> dict[str, list[tuple]]:
    if isinstance(dsn_or_conn, psycopg.Connection):
        return {name: [_hashable(r) for r in dsn_or_conn.execute(sql, {"excluded": list(EXCLUDED)}).fetchall()]
                for name, sql in CATALOG_QUERIES.items()}
    with psycopg.connect(dsn_or_conn) as conn:
        return catalog(conn)


def assert_same_catalog(actual: dict, expected: dict) -> None:
    assert actual.keys() == expected.keys()
    for section in expected:
        a, e = set(actual[section]), set(expected[section])
        assert a == e, (
            f"catalog section {section!r} differs:\n  only in the migrated database: {sorted(a - e, key=str)}\n"
            f"  only in the canonical schema: {sorted(e - a, key=str)}")
        assert actual[section] == expected[section], section  # order too (dups would show here)


def alembic_version(dsn: str) -> list[tuple]:
    with psycopg.connect(dsn) as conn:
        return conn.execute("select version_num from pymem.alembic_version").fetchall()


# -- tests -------------------------------------------------------------------------------------

def test_upgrade_from_empty_equals_the_canonical_schema(server_dsn, template_db):
    with empty_databases(server_dsn, 2) as (migrated, canonical):
        migrate.upgrade(migrated, embedding_dim=DIM)
        run_script(canonical, render_sql("schema.sql", embedding_dim=DIM))
        expected = catalog(canonical)
        # The snapshot is not trivially empty.
        assert len(expected["relations"]) >= 8 and len(expected["policies"]) >= 8
        assert len(expected["functions"]) >= 15 and len(expected["triggers"]) >= 5
        assert_same_catalog(catalog(migrated), expected)
        # Alembic keeps its version table in the pymem schema, never the host app's public one.
        assert alembic_version(migrated) == [(migrate.head_revision(),)]
        with psycopg.connect(migrated) as conn:
            assert conn.execute("select to_regclass('public.alembic_version')").fetchone()[0] is None


CATALOG_MUTATIONS = [
    "alter table pymem.ledger no force row level security",
    "alter table pymem.memories disable row level security",
    "comment on column pymem.memories.kind is 'changed'",
    "comment on function pymem._ctx_actor() is 'changed'",
    "comment on policy memories_read on pymem.memories is 'changed'",
    "comment on trigger memories_before_write on pymem.memories is 'changed'",
    "grant insert on pymem.ledger to pymem_app",
    "grant create on schema pymem to pymem_app",
    "revoke execute on function pymem.verify_chain(text) from pymem_auditor",
    "alter table pymem.ledger enable trigger ledger_no_update_delete",
    "alter table pymem.memories disable trigger memories_before_write",
    "create or replace function pymem._ctx_actor() returns text language sql stable parallel safe"
    " as $$ select nullif(current_setting('pymem.actor', true), 'x') $$",
    "alter function pymem.verify_chain(text) security invoker",
    "alter function pymem.verify_chain(text) reset search_path",
    "alter policy memories_read on pymem.memories using (true)",
    "alter policy ledger_audit on pymem.ledger to pymem_auditor",
    "alter table pymem.memories alter column kind set default 'note'",
    "alter table pymem.memories alter column content_hash drop not null",
    "alter table pymem.memories drop constraint memories_injection_source_rule",
    "drop index pymem.memories_tenant_created",
    "alter table pymem.chain_heads owner to pymem_app",
    "alter table pymem.memories add column extra int",
    "update pymem.store_info set embedding_dim = 3",
]


def test_the_catalog_snapshot_sees_small_differences(database):
    """Each of these changes alone makes the snapshot differ (so equal snapshots mean something)."""
    with psycopg.connect(database.admin_dsn) as conn:
        base = catalog(conn)
        unseen = []
        for sql in CATALOG_MUTATIONS:
            conn.execute(sql)
            if catalog(conn) == base:
                unseen.append(sql)
            conn.rollback()
        assert catalog(conn) == base
    assert unseen == []


def test_upgrade_twice_is_a_no_op(server_dsn, template_db):
    with empty_databases(server_dsn) as (dsn,):
        migrate.upgrade(dsn, embedding_dim=DIM)
        first, version = catalog(dsn), alembic_version(dsn)
        # Some data must survive the second run untouched.
        with psycopg.connect(dsn) as conn:
            conn.execute("select pymem.set_context('acme')")
            conn.execute("insert into pymem.memories (tenant_id, id, content) values ('acme', 'm1', 'x')")
            conn.commit()
        migrate.upgrade(dsn, embedding_dim=DIM)
        migrate.upgrade(dsn, embedding_dim=7)  # a different dim on a second run changes nothing
        assert_same_catalog(catalog(dsn), first)
        assert alembic_version(dsn) == version == [(migrate.head_revision(),)]
        with psycopg.connect(dsn) as conn:
            assert conn.execute("select count(*), min(problem) from pymem.verify_chain()").fetchone() == (1, None)


def test_offline_sql_gives_the_same_schema_without_a_server(server_dsn, template_db, monkeypatch):
    # Nothing may connect: a DSN pointing at a closed port, and the connectors themselves booby-trapped.
    monkeypatch.setenv("PYMEM_DSN", "postgresql://nobody@127.0.0.1:9/none")
    monkeypatch.setenv("PYMEM_ADMIN_DSN", "postgresql://nobody@127.0.0.1:9/none")

    def no_connect(*args, **kwargs):
        raise AssertionError("upgrade_sql tried to connect")

    import sqlalchemy

    with monkeypatch.context() as trap:
        trap.setattr(psycopg.Connection, "connect", classmethod(no_connect))
        trap.setattr(sqlalchemy, "create_engine", no_connect)
        sql = migrate.upgrade_sql(embedding_dim=DIM)
    assert "create policy memories_read" in sql
    assert f"vector({DIM})" in sql
    assert "pymem.alembic_version" in sql
    assert "{{" not in sql

    with empty_databases(server_dsn, 2) as (offline, canonical):
        run_script(offline, sql)
        run_script(canonical, render_sql("schema.sql", embedding_dim=DIM))
        assert_same_catalog(catalog(offline), catalog(canonical))
        assert alembic_version(offline) == [(migrate.head_revision(),)]
        # A database set up from the offline SQL is current for the library, and a later online
        # upgrade has nothing to do.
        before = catalog(offline)
        migrate.upgrade(offline, embedding_dim=DIM)
        assert_same_catalog(catalog(offline), before)


def test_offline_sql_through_the_cli_without_a_server(monkeypatch):
    from click.testing import CliRunner

    from pymem.cli import main

    env = {"PYMEM_DSN": "postgresql://nobody@127.0.0.1:9/none", "PYMEM_ADMIN_DSN": None,
           "PYMEM_EMBEDDING_DIM": "16"}
    result = CliRunner().invoke(main, ["db", "upgrade", "--sql"], env=env)
    assert result.exit_code == 0, result.output
    assert "vector(16)" in result.output and "create policy memories_read" in result.output


def test_embedding_dim_from_the_environment(server_dsn, template_db, monkeypatch):
    monkeypatch.setenv("PYMEM_EMBEDDING_DIM", "8")
    settings = Settings.from_env()
    assert settings.embedding_dim == 8
    with empty_databases(server_dsn) as (dsn,):
        migrate.upgrade(dsn, embedding_dim=settings.embedding_dim)
        with psycopg.connect(dsn) as conn:
            assert conn.execute("select embedding_dim from pymem.store_info").fetchone()[0] == 8
            assert conn.execute(
                "select format_type(atttypid, atttypmod) from pg_attribute"
                " where attrelid = 'pymem.memories'::regclass and attname = 'embedding'").fetchone()[0] == "vector(8)"
        # The store picks the dimension up from the database and validates against it.
        from pymem.context import Context
        from pymem.errors import InvalidArguments
        from pymem.storage.endpoints import Endpoints
        from pymem.storage.store import Store

        app = with_user(server_dsn, APP_LOGIN, database=urlsplit(dsn).path.lstrip("/"), password=PASSWORD)
        store = Store(Endpoints(app=app, admin=dsn), Settings(dsn=app, admin_dsn=dsn, embedding_dim=8))
        try:
            assert store.embedding_dim == 8
            mem = store.bind(Context(tenant="acme"))
            (mid,) = mem.add([{"content": "x", "embedding": [0.5] * 8}])
            assert len(mem.get_row(mid)["embedding"]) == 8
            with pytest.raises(InvalidArguments):
                mem.add([{"content": "x", "embedding": [0.5] * DIM}])
        finally:
            store.close()


def test_embedding_dim_through_the_cli(server_dsn, template_db):
    from click.testing import CliRunner

    from pymem.cli import main

    with empty_databases(server_dsn) as (dsn,):
        env = {"PYMEM_DSN": dsn, "PYMEM_ADMIN_DSN": dsn, "PYMEM_EMBEDDING_DIM": "8"}
        result = CliRunner().invoke(main, ["db", "upgrade"], env=env)
        assert result.exit_code == 0, result.output
        with psycopg.connect(dsn) as conn:
            assert conn.execute("select embedding_dim from pymem.store_info").fetchone()[0] == 8


# -- revision files ----------------------------------------------------------------------------

REVISION_FILE = re.compile(r"^\d{4}_[a-z0-9_]+\.py$")


def _revision_files() -> list[Path]:
    return sorted(p for p in (migrations_dir() / "versions").glob("*.py") if p.name != "__init__.py")


def _module_constants(path: Path) -> dict[str, object]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: dict[str, object] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            with suppress(ValueError):
                out[node.targets[0].id] = ast.literal_eval(node.value)
    return out


def test_revision_files_form_one_linear_chain():
    files = _revision_files()
    assert files, "no migration revisions"
    bad_names = [p.name for p in files if not REVISION_FILE.match(p.name)]
    assert bad_names == [], f"revision files must be named NNNN_slug.py: {bad_names}"

    revisions = {}
    for path in files:
        consts = _module_constants(path)
        rev, down = consts.get("revision"), consts.get("down_revision")
        assert isinstance(rev, str) and rev, path.name
        assert rev not in revisions, f"duplicate revision id {rev}"
        assert path.name.startswith(rev + "_") or path.name[:4] == rev[:4], (path.name, rev)
        assert down is None or isinstance(down, str), f"{path.name}: merges/branches are not allowed"
        assert not consts.get("branch_labels") and not consts.get("depends_on"), path.name
        revisions[rev] = down

    bases = [r for r, d in revisions.items() if d is None]
    assert len(bases) == 1, f"exactly one base revision, found {bases}"
    children: dict[str, list[str]] = {}
    for rev, down in revisions.items():
        if down is not None:
            assert down in revisions, f"{rev} revises unknown {down}"
            children.setdefault(down, []).append(rev)
    assert all(len(c) == 1 for c in children.values()), f"the chain forks: {children}"
    # Walk from the base: every revision is reached, and the end is Alembic's head.
    chain, cur = [bases[0]], bases[0]
    while cur in children:
        cur = children[cur][0]
        chain.append(cur)
    assert sorted(chain) == sorted(revisions)
    assert chain[-1] == migrate.head_revision()
    # File numbering follows the chain order.
    by_rev = {_module_constants(p)["revision"]: p.name for p in files}
    assert [by_rev[r] for r in chain] == [p.name for p in files]


APPLY = re.compile(r"apply_sql\(\s*[\"']([^\"']+)[\"']")


def test_revisions_apply_sql_files_that_exist():
    for path in _revision_files():
        names = APPLY.findall(path.read_text(encoding="utf-8"))
        assert names, f"{path.name} must apply SQL from sql/ through apply_sql()"
        for name in names:
            assert (sql_dir() / name).is_file(), f"{path.name} applies missing sql/{name}"


SQL_DELTA = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")


def test_every_revision_applies_its_own_numbered_sql_file():
    """Plain-SQL migrations: revision NNNN applies exactly sql/migrations/NNNN_*.sql (0001 is the
    frozen foundation, never sql/schema.sql, or upgrading an empty database would create today's
    schema and then re-apply later deltas on top of it); every SQL file is applied by its revision."""
    files = _revision_files()
    applied = {}
    for path in files:
        names = APPLY.findall(path.read_text(encoding="utf-8"))
        assert names == [f"migrations/{Path(n).name}" for n in names] and len(names) == 1, (path.name, names)
        assert "schema.sql" not in names
        number = path.name[:4]
        assert Path(names[0]).name.startswith(number + "_"), f"{path.name} applies {names[0]}"
        applied[number] = Path(names[0]).name
    sql_files = sorted(p.name for p in (sql_dir() / "migrations").glob("*"))
    bad = [n for n in sql_files if not SQL_DELTA.match(n)]
    assert bad == [], f"SQL migrations must be named NNNN_slug.sql: {bad}"
    assert sorted(applied.values()) == sql_files, "every SQL migration is applied by the revision of its number"
    numbers = [int(n[:4]) for n in sql_files]
    assert numbers == list(range(1, len(numbers) + 1)), f"SQL migrations are numbered 0001, 0002, ...: {sql_files}"


def test_upgrading_a_store_with_data_and_bindings_from_0001(server_dsn, template_db):
    """0001 -> head on a store in use: data, chain and idempotency keys survive; a login bound by
    the old adapter-only table keeps its adapter and may act in no tenant until one is named."""
    from helpers.database import AGENT_LOGIN

    with empty_databases(server_dsn) as (dsn,):
        migrate.upgrade(dsn, embedding_dim=DIM, revision="0001")
        with psycopg.connect(dsn) as conn:
            conn.execute("select pymem.set_context('acme')")
            conn.execute("insert into pymem.memories (tenant_id, id, content) values ('acme', 'm1', 'x')")
            conn.execute("insert into pymem.idempotency_keys (tenant_id, verb, actor, key, digest, result, expires_at)"
                         " values ('acme', 'upsert_many', '', 'k1', 'd', '{}', now() + interval '1 day')")
            conn.execute("insert into pymem.adapter_bindings (role_name, adapter) values (%s, 'codex')", (AGENT_LOGIN,))
            conn.commit()
        migrate.upgrade(dsn, embedding_dim=DIM)
        with psycopg.connect(dsn) as conn:
            assert conn.execute("select count(*), min(problem) from pymem.verify_chain()").fetchone() == (1, None)
            assert conn.execute("select adapter, key from pymem.idempotency_keys").fetchall() == [("", "k1")]
            assert conn.execute("select role_name, adapter, tenants, all_tenants from pymem.login_bindings").fetchall() \
                == [(AGENT_LOGIN, "codex", [], False)]
            assert conn.execute("select event, role_name from pymem.binding_log").fetchall() == [
                ("login.bound", AGENT_LOGIN)]
            assert conn.execute("select to_regclass('pymem.adapter_bindings')").fetchone()[0] is None
        agent = with_user(server_dsn, AGENT_LOGIN, database=urlsplit(dsn).path.lstrip("/"), password=PASSWORD)
        with psycopg.connect(agent) as conn:
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="not bound to tenant acme"):
                conn.execute("select pymem.set_context('acme', null, 'codex')")


def test_upgrading_to_hash_version_2_rehashes_clean_rows_and_launders_nothing(server_dsn, template_db):
    """0003 (hash version 1) -> head: every live row that verifies is re-hashed with version 2 and
    gets a memory.rehash event; old entries keep verifying as version 1; erased rows keep the
    hash of what was erased; a row edited outside the chain before the upgrade is NOT re-hashed,
    and both verifiers still name it."""
    from pymem.integrity.independent import verify_independently

    vec = "[" + ",".join(["0.25"] * DIM) + "]"
    with empty_databases(server_dsn) as (dsn,):
        migrate.upgrade(dsn, embedding_dim=DIM, revision="0003")
        with psycopg.connect(dsn) as conn:
            for tenant in ("acme", "globex"):
                conn.execute("select pymem.set_context(%s, 'u1', 'codex', '{}'::jsonb, null)", (tenant,))
                conn.execute(
                    "insert into pymem.memories (tenant_id, id, scope, content, record, embedding, tags, importance,"
                    " origin, source_adapter, provenance)"
                    " values (%s, 'm1', '{\"agent\": \"a1\"}', 'café\ttab', %s, %s, '{b,\"é\"}', 0.1, 'user_asserted',"
                    " 'codex', '{\"session\": \"s1\", \"turn\": 3}')",
                    (tenant, json.dumps({"id": "m1", "n": [1.0, 2.50, -0.0, 1e-7], "k": "ü\u0001"}), vec))
                conn.execute("insert into pymem.memories (tenant_id, id, content, source_adapter)"
                             " values (%s, 'm2', 'two', 'codex'), (%s, 'm3', 'three', 'codex'), (%s, 'm4', 'four', 'codex')",
                             (tenant, tenant, tenant))
                conn.execute("update pymem.memories set content = null, record = null, erased_at = now()"
                             " where tenant_id = %s and id = 'm2'", (tenant,))
                conn.execute("select pymem.delete_memories(array['m3'])")
                conn.execute("select pymem.record_refusal('unproven', 'chat', 'refused', null,"
                             " 'sha256:' || repeat('0', 64), null)")
                conn.commit()
            conn.execute("set session_replication_role = replica")
            conn.execute("update pymem.memories set content = 'forged' where tenant_id = 'globex' and id = 'm4'")
            conn.commit()
        migrate.upgrade(dsn, embedding_dim=DIM)
        with psycopg.connect(dsn) as conn:
            found = {r[0]: r for r in conn.execute("select tenant_id, bad_memory_id, problem from pymem.verify_chain()")}
            assert found["acme"] == ("acme", None, None)
            assert found["globex"] == ("globex", "m4", "content does not match content_hash (row edited outside the chain)")
            rehashed = conn.execute("select tenant_id, memory_id, hash_version, details from pymem.ledger"
                                    " where event = 'memory.rehash' order by 1, 2").fetchall()
            assert rehashed == [("acme", "m1", 2, {"scope": {"agent": "a1"}, "source_adapter": "codex"}),
                                ("acme", "m4", 2, {"scope": {}, "source_adapter": "codex"}),
                                ("globex", "m1", 2, {"scope": {"agent": "a1"}, "source_adapter": "codex"})]
            assert conn.execute("select count(*) from pymem.ledger where hash_version = 1 and event <> 'memory.rehash'"
                                ).fetchone()[0] == 14
            assert conn.execute("select bool_and(content_hash = pymem._content_hash_v2(m)) from pymem.memories m"
                                " where erased_at is null and not (tenant_id = 'globex' and id = 'm4')").fetchone()[0]
            assert conn.execute("select hash_version from pymem.store_info").fetchone()[0] == 2
            assert conn.execute("select count(*) from pymem.memories where record_lite is not null").fetchone()[0] == 0
        with psycopg.connect(dsn) as conn:
            independent = {t.tenant: (t.bad_memory_id, t.problem) for t in verify_independently(conn).tenants}
        assert independent == {t: r[1:] for t, r in found.items()}


def test_upgrading_to_scoped_search_counts_the_rows_already_there(server_dsn, template_db):
    """0007 -> head: pymem.scope_rows starts from the memories already written (per tenant, scope
    and adapter), and the counts follow writes made after the upgrade."""
    with empty_databases(server_dsn) as (dsn,):
        migrate.upgrade(dsn, embedding_dim=DIM, revision="0007")
        with psycopg.connect(dsn) as conn:
            for tenant, adapter, n, scope in (("acme", None, 3, '{"team": "a"}'), ("acme", "codex", 2, '{"team": "a"}'),
                                               ("acme", None, 1, '{}'), ("globex", None, 4, '{"team": "a"}')):
                conn.execute("select pymem.set_context(%s, null, %s)", (tenant, adapter))
                conn.execute("insert into pymem.memories (tenant_id, id, scope, content, source_adapter)"
                             " select %s, %s || g, %s::jsonb, 'x', %s from generate_series(1, %s) g",
                             (tenant, f"{adapter}-{scope}-", scope, adapter, n))
                conn.commit()
        migrate.upgrade(dsn, embedding_dim=DIM)
        with psycopg.connect(dsn) as conn:
            counts = "select tenant_id, scope::text, source_adapter, live_rows from pymem.scope_rows order by 1, 2, 3"
            assert conn.execute(counts).fetchall() == [
                ("acme", '{"team": "a"}', "codex", 2), ("acme", '{"team": "a"}', None, 3), ("acme", "{}", None, 1),
                ("globex", '{"team": "a"}', None, 4)]
            conn.execute("select pymem.set_context('acme')")
            conn.execute("select * from pymem.delete_memories(array['None-{}-1'])")
            conn.execute("insert into pymem.memories (tenant_id, id, scope, content) values ('acme', 'n', '{\"team\": \"a\"}', 'x')")
            conn.commit()
            assert conn.execute(counts).fetchall() == [
                ("acme", '{"team": "a"}', "codex", 2), ("acme", '{"team": "a"}', None, 4), ("globex", '{"team": "a"}', None, 4)]
            assert conn.execute("select count(*), min(problem) from pymem.verify_chain()").fetchone() == (2, None)
