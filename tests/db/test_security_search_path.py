"""Temporary-schema shadowing: no login can make pymem's functions run its code as the owner.

Postgres looks up type and relation names in the session's temporary schema *first* unless
`pg_temp` is named in the search_path, and any login may create temporary objects. A temporary
domain named like a built-in type (`text`, `bytea`, `jsonb`, ...) whose CHECK calls a temporary
function would be picked up by unqualified type names inside pymem's functions, and a SECURITY
DEFINER function would then run that CHECK as pymem_owner. Every function in the schema pins
`search_path = pg_catalog, ..., pg_temp` (temp schema explicitly last); these tests keep it so.
"""

from __future__ import annotations

import psycopg
import pytest
from helpers.database import AGENT_LOGIN, APP_LOGIN, AUDITOR_LOGIN, bind_login, login_dsn

# Every built-in type name the schema's functions use (declarations, casts, signatures), and a
# few more. Each is shadowed in turn by a temporary domain.
SHADOWED_TYPES = [
    ("text", "text"), ("bytea", "bytea"), ("jsonb", "jsonb"), ("json", "json"),
    ("timestamptz", "timestamptz"), ("timestamp", "timestamp"), ("bigint", "int8"), ("int8", "int8"),
    ("integer", "int4"), ("int4", "int4"), ("int", "int4"), ("smallint", "int2"), ("int2", "int2"),
    ("boolean", "bool"), ("bool", "bool"), ("real", "float4"), ("float4", "float4"),
    ("float8", "float8"), ("numeric", "numeric"), ("name", "name"), ("oid", "oid"),
    ("regclass", "regclass"), ("interval", "interval"), ("uuid", "uuid"), ("varchar", "varchar"),
    ("xid8", "xid8"), ("tsquery", "tsquery"), ("tsvector", "tsvector"), ("regconfig", "regconfig"),
    ("double", "float8"),
    ("vector", None),  # None: pgvector's type, in the extension's schema
]

EVIL = """
create function pg_temp.evil(v pg_catalog.text) returns pg_catalog.bool language plpgsql as $f$
begin
  if current_user::pg_catalog.text operator(pg_catalog.<>) session_user::pg_catalog.text then
    raise exception 'PWNED: ran as %', current_user;
  end if;
  return true;
end $f$
"""

VECTOR = "'[" + ",".join(["0.1"] * 384) + "]'"

# What each kind of login calls. Any error is fine (a shadowed type may break a statement);
# running the temporary CHECK as another role is not.
APP_CALLS = [
    "select pymem.set_context('acme', 'u1', {adapter}, '{{}}'::jsonb, null)",
    "insert into pymem.memories (tenant_id, id, content, source_adapter) values ('acme', 'm-new', 'x', {adapter})",
    "update pymem.memories set content = 'y' where id = 'm-new'",
    "select pymem.delete_memories(array['m-new'])",
    "select pymem.purge_idempotency_keys()",
    "select pymem.record_refusal('user_asserted', 'chat', 'instruction-shaped', 'sig.x', "
    "'sha256:' || repeat('a', 64), null)",
    "select count(*) from pymem.verify_chain('acme')",
    f"select count(*) from pymem.search({VECTOR}::vector, 3)",
    f"select count(*) from pymem.search({VECTOR}::vector, 3, p_text => 'tea in the morning')",
    "select pymem.claim_embedder('lexical-hash-v1', 384)",
    "select pymem.record_reembedded('lexical-hash-v1')",
    f"select count(*) from pymem.search_as('acme', 'u1', {{adapter}}, '{{{{}}}}'::jsonb, null, {VECTOR}::vector, 3)",
    "select count(*) from pymem.memory_history",
    "select count(*) from pymem.audit_refusals",
    "select count(*) from pymem.ledger",
    "select count(*) from pymem.session_hot('s1', 3)",
    f"select count(*) from pymem.session_search('s1', {VECTOR}::vector, 3)",
    f"select count(*) from pymem.session_search_hybrid('s1', {VECTOR}::vector, 'tea in the morning', 3)",
    "select count(*) from pymem.session_lessons('s1', array['db'], 3)",
    "select pymem.session_receives('s1', array['m1'])",
    "insert into pymem.idempotency_keys (tenant_id, verb, actor, key, digest, result, expires_at)"
    " values ('acme', 'upsert_many', '', 'k-new', 'd', '{{}}', now() + interval '1 hour')",
]
AUDITOR_CALLS = [
    "select count(*) from pymem.verify_chain(null)",
    "select pymem.set_context('acme')",
    "select count(*) from pymem.verify_chain('acme')",
    "select count(*) from pymem.memory_history",
    "select count(*) from pymem.audit_refusals",
]


def _attack(dsn: str, type_name: str, base: str, calls: list[str]) -> list[str]:
    """Shadow `type_name` in a fresh session, run every call, return the PWNED messages seen."""
    pwned = []
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(EVIL)
        if base is None:
            base = conn.execute("select t.oid::regtype::text from pg_type t join pg_extension e"
                                " on e.extnamespace = t.typnamespace where e.extname = 'vector'"
                                " and t.typname = %s", (type_name,)).fetchone()[0]
            base = base if "." in base else f"public.{base}"
        else:
            base = f"pg_catalog.{base}"
        try:
            conn.execute(f'create domain pg_temp."{type_name}" as {base} check (pg_temp.evil(value::pg_catalog.text))')
        except psycopg.Error:
            return []  # not a type a domain can shadow here
        for call in calls:
            try:
                with conn.transaction():
                    conn.execute("select pymem.set_context('acme', 'u1', %s, '{}'::jsonb, null)",
                                 (AGENT_ADAPTER if AGENT_LOGIN in dsn else None,))
                    conn.execute(call)
            except psycopg.Error as exc:
                if "PWNED" in str(exc):
                    pwned.append(f"{call[:60]}: {exc.diag.message_primary}")
    return pwned


AGENT_ADAPTER = "codex"


@pytest.fixture
def seeded(database):
    bind_login(database, AGENT_LOGIN, adapter=AGENT_ADAPTER, tenants=["acme"])
    with psycopg.connect(database.app_dsn) as conn:
        conn.execute("select pymem.set_context('acme')")
        conn.execute(f"insert into pymem.memories (tenant_id, id, content, embedding) values ('acme', 'm1', 'x', {VECTOR})")
        conn.execute("insert into pymem.sessions (tenant_id, id, surface) values ('acme', 's1', 'chat')")
        conn.commit()
    return database


@pytest.mark.parametrize("type_name,base", SHADOWED_TYPES, ids=[t for t, _ in SHADOWED_TYPES])
def test_a_temporary_type_never_runs_as_the_owner(seeded, type_name, base):
    database = seeded
    found = []
    for login, calls, adapter in ((APP_LOGIN, APP_CALLS, "null"), (AGENT_LOGIN, APP_CALLS, f"'{AGENT_ADAPTER}'"),
                                  (AUDITOR_LOGIN, AUDITOR_CALLS, "null")):
        dsn = login_dsn(database, login)
        found += [f"{login}: {p}" for p in _attack(dsn, type_name, base, [c.format(adapter=adapter) for c in calls])]
    assert found == []


def test_every_function_pins_a_safe_search_path(database):
    """Catalog rule: each function in schema pymem sets search_path to pg_catalog first, pg_temp
    last, and in between only the schema pgvector lives in."""
    with database.admin() as conn:
        vector_schema = conn.execute(
            "select n.nspname from pg_extension e join pg_namespace n on n.oid = e.extnamespace"
            " where e.extname = 'vector'").fetchone()[0]
        rows = conn.execute(
            "select p.oid::regprocedure::text, p.proconfig from pg_proc p"
            " where p.pronamespace = 'pymem'::regnamespace order by 1").fetchall()
    assert len(rows) >= 20
    unsafe = []
    for name, config in rows:
        paths = [c.split("=", 1)[1] for c in (config or []) if c.startswith("search_path=")]
        if len(paths) != 1:
            unsafe.append((name, config))
            continue
        parts = [p.strip().strip('"') for p in paths[0].split(",")]
        if parts[0] != "pg_catalog" or parts[-1] != "pg_temp" or any(p not in (vector_schema,) for p in parts[1:-1]):
            unsafe.append((name, paths[0]))
    assert unsafe == []


def test_the_attack_covers_every_type_name_the_functions_cast_to(database):
    """A new function casting to another built-in type name must add it to SHADOWED_TYPES."""
    import re

    with database.admin() as conn:
        bodies = conn.execute("select string_agg(pg_get_functiondef(p.oid), ' ') from pg_proc p"
                              " where p.pronamespace = 'pymem'::regnamespace").fetchone()[0]
    casts = set(re.findall(r"::\s*([a-z_][a-z0-9_]*)", bodies))
    # `pymem.x` is schema-qualified; `double precision` is a keyword the parser maps to pg_catalog
    assert casts - {"pymem", "double"} <= {name for name, _ in SHADOWED_TYPES}, casts
