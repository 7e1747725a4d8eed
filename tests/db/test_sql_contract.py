"""Python and SQL agree: the vocabulary, the limits and the typed values, read from the catalog.

Each check reads what the migrated schema says (pg_constraint, domain checks, pg_attribute of
composite types and views, pg_proc) and compares it with what pymem's Python says
(pymem.vocabulary, the dataclasses built from rows, the named queries). A column added to
pymem.search_hit, an origin added to the domain, a limit changed on one side only: each fails
here, naming the difference.
"""

from __future__ import annotations

import dataclasses
import re

import pytest

from pymem import queries, vocabulary
from pymem.context import Context
from pymem.delivery.injections import Injection, MemoryInjection
from pymem.integrity.audit import HistoryEvent, Refusal
from pymem.integrity.verify import TenantVerification
from pymem.storage.rows import CONTEXT_COLUMNS, WRITE_COLUMNS, MemoryRow
from pymem.storage.search import SearchHit
from pymem.storage.session_rows import SessionRow


@pytest.fixture
def admin(database):
    with database.admin() as conn:
        yield conn


def fields(cls) -> list[str]:
    return [f.name for f in dataclasses.fields(cls)]


def attributes(conn, relation: str) -> list[str]:
    """The columns of a table, view or composite type, in order."""
    return [r[0] for r in conn.execute(
        "select attname from pg_attribute where attrelid = (select typrelid from pg_type where oid = %s::regtype)"
        " and attnum > 0 and not attisdropped order by attnum", (relation,)).fetchall()]


RECORD_REFUSAL = "pymem.record_refusal(text, text, text, text, text, text, double precision, text)"


def check_of(conn, table: str, column: str) -> str:
    """The text of the one CHECK constraint on table.column."""
    rows = conn.execute(
        "select pg_get_constraintdef(k.oid) from pg_constraint k join pg_attribute a"
        " on a.attrelid = k.conrelid and a.attnum = any(k.conkey)"
        " where k.conrelid = %s::regclass and k.contype = 'c' and a.attname = %s", (table, column)).fetchall()
    assert len(rows) == 1, (table, column, rows)
    return rows[0][0]


def source_of(conn, signature: str) -> str:
    return conn.execute("select prosrc from pg_proc where oid = %s::regprocedure", (signature,)).fetchone()[0]


def one_number(pattern: str, text: str) -> int:
    found = re.findall(pattern, text)
    assert len(found) == 1, (pattern, text)
    return int(found[0])


# -- the origins ---------------------------------------------------------------------------------

def test_the_origin_domain_is_the_python_origin_list(admin):
    [check] = admin.execute(
        "select pg_get_constraintdef(k.oid) from pg_constraint k where k.contypid = 'pymem.origin'::regtype").fetchall()
    assert sorted(re.findall(r"'([a-z_]+)'::text", check[0])) == sorted(vocabulary.ORIGINS)


def test_every_origin_column_and_check_uses_the_domain(admin):
    typed = admin.execute(
        "select c.relname, a.attname, format_type(a.atttypid, a.atttypmod) from pg_attribute a"
        " join pg_class c on c.oid = a.attrelid where c.relnamespace = 'pymem'::regnamespace"
        " and a.attname = 'origin' and a.attnum > 0 and c.relkind in ('r', 'c') order by 1").fetchall()
    assert typed == [("memories", "origin", "pymem.origin"), ("quarantine", "origin", "pymem.origin"),
                     ("search_hit", "origin", "pymem.origin")]
    assert "'pymem.origin'" in source_of(admin, RECORD_REFUSAL)
    # no second copy of the list anywhere else in the schema
    copies = admin.execute(
        "select conname from pg_constraint where connamespace = 'pymem'::regnamespace"
        " and pg_get_constraintdef(oid) like '%%retrieved_content%%' and contypid = 0").fetchall()
    functions = admin.execute(
        "select proname from pg_proc where pronamespace = 'pymem'::regnamespace"
        " and prosrc like '%%retrieved_content%%'").fetchall()
    assert copies == [] and functions == []


def test_record_refusal_takes_exactly_the_origins(database):
    digest = "sha256:" + "ab" * 32
    with database.app() as conn:
        for origin in vocabulary.ORIGINS:
            conn.execute("select pymem.set_context('acme')")
            conn.execute(queries.query("record_refusal"), (origin, None, "refused", None, digest, None, None, None))
            conn.commit()
        conn.execute("select pymem.set_context('acme')")
        with pytest.raises(Exception, match="known origin"):
            conn.execute(queries.query("record_refusal"), ("hearsay", None, "refused", None, digest, None, None, None))


def test_the_surface_domain_is_the_python_surface_list(admin):
    [check] = admin.execute(
        "select pg_get_constraintdef(k.oid) from pg_constraint k where k.contypid = 'pymem.surface'::regtype").fetchall()
    assert sorted(re.findall(r"'([a-z0-9_]+)'::text", check[0])) == sorted(vocabulary.SURFACES)


def test_the_hot_tag_is_the_one_the_schema_watches(admin):
    for name in ("pymem._memories_hot()",):
        assert f"'{vocabulary.HOT_TAG}' = any" in source_of(admin, name)


# -- the ledger's events ------------------------------------------------------------------------

def _events_of_a_rehash(server_dsn) -> set[str]:
    """The events a migration to a new hash version chains: a store at revision 0006 (hash
    version 1) with one memory, upgraded to head."""
    import os
    from urllib.parse import urlsplit

    import psycopg
    from helpers.database import DIM, with_user

    from pymem import migrate

    name = f"pymem_rehash_{os.getpid()}"
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute(f'drop database if exists "{name}"')
        conn.execute(f'create database "{name}"')
    try:
        dsn = with_user(server_dsn, urlsplit(server_dsn).username or "postgres", database=name)
        migrate.upgrade(dsn, embedding_dim=DIM, revision="0006")
        with psycopg.connect(dsn) as conn:
            conn.execute("select pymem.set_context('acme')")
            conn.execute("insert into pymem.memories (tenant_id, id, content) values ('acme', 'm1', 'x')")
            conn.commit()
        migrate.upgrade(dsn, embedding_dim=DIM)
        with psycopg.connect(dsn) as conn:
            return {r[0] for r in conn.execute("select distinct event from pymem.ledger").fetchall()}
    finally:
        with psycopg.connect(server_dsn, autocommit=True) as conn:
            conn.execute(f'drop database if exists "{name}" with (force)')


def test_the_ledger_records_exactly_the_python_event_names(database, tmp_path, server_dsn):
    """Every event name the SQL writes is in vocabulary.EVENTS and every name there is written:
    by the write paths, the gate, sessions, deliveries, receipts and (memory.rehash) a migration
    to a new hash version."""
    from helpers.lessons import keyed_store

    store = keyed_store(database, tmp_path)
    try:
        _every_event(store)
    finally:
        store.close()
    with database.admin() as conn:
        events = {r[0] for r in conn.execute("select distinct event from pymem.ledger").fetchall()}
        check = check_of(conn, "pymem.ledger", "event")
    assert "memory.rehash" not in events  # no write path chains it
    assert events | _events_of_a_rehash(server_dsn) == set(vocabulary.EVENTS)
    pattern = re.search(r"'(\^.*\$)'", check).group(1)
    assert all(re.match(pattern, e) for e in vocabulary.EVENTS), (pattern, vocabulary.EVENTS)


def _every_event(store) -> None:
    from helpers.lessons import GATE

    from pymem.conventions import file_review_correction, retire_convention

    mem = store.bind(Context(tenant="acme"))
    for commit in ("1" * 40, "2" * 40):  # convention.filed, then convention.confirmed
        rule = file_review_correction(mem, "Indent recipes with tabs", "Makefile", commit, "make lint", **GATE).receipt
    retire_convention(mem, rule.id)  # convention.retired
    other = file_review_correction(mem, "Name migrations by number", "sql/migrations/*.sql", "3" * 40, "pytest",
                                   "test_numbering", **GATE).receipt
    with store.transaction(mem.ctx) as conn:  # convention.expired
        conn.execute("insert into pymem.convention_endings (tenant_id, receipt_id, status, reason, head_commit)"
                     " values ('acme', %s, 'expired', 'gone', repeat('4', 40))", (other.id,))
    vec = [1.0] + [0.0] * (store.embedding_dim - 1)
    mem.add([{"id": "a", "content": "x", "embedding": vec}, {"id": "b", "content": "y"}, {"id": "c", "content": "z"},
             {"id": "h", "content": "hot", "tags": ["hot"]}, {"id": "e", "content": "gone"}])
    with store.transaction(mem.ctx) as conn:
        conn.execute("insert into pymem.sessions (tenant_id, id, surface) values ('acme', 's', 'chat'), ('acme', 't', 'api')")
        conn.execute("update pymem.sessions set summary = 'a summary' where id = 's'")
        conn.execute("update pymem.sessions set ended_at = now() where id = 's'")
        conn.execute("select pymem.erase_session('t', 'asked to')")
        conn.execute("select pymem.record_injection('s', 0, array['h'], array['h'], '{}', repeat('0', 64), 1, 10, 0,"
                     " 'counter', null, null)")
        conn.execute("update pymem.memories set tags = '{}' where id = 'h'")
        conn.execute("select pymem.erase_memory('e', 'asked to')")
        conn.execute("update pymem.memories set tags = '{t}' where id = 'a'")
        conn.execute("update pymem.memories set invalidated_at = now() where id = 'b'")
        conn.execute("update pymem.memories set content = null, record = null, erased_at = now() where id = 'c'")
        conn.execute("select * from pymem.delete_memories(array['a'])")
        conn.execute(queries.query("record_refusal"),
                     ("unproven", None, "refused", None, "sha256:" + "0" * 64, None, None, None))


# -- lessons and facts ------------------------------------------------------------------------------

def test_the_lesson_half_lives_are_the_python_table(admin):
    body = source_of(admin, "pymem.lesson_half_life(text)")
    listed = dict(re.findall(r"when '([a-z_]+)' then interval '(\d+) days'", body))
    assert {t: int(d) for t, d in listed.items()} == dict(vocabulary.LESSON_HALF_LIVES)
    for memory_type, days in vocabulary.LESSON_HALF_LIVES.items():
        got = admin.execute("select extract(epoch from pymem.lesson_half_life(%s))::bigint", (memory_type,)).fetchone()[0]
        assert got == days * 86400


def test_the_kinds_are_the_ones_the_schema_names(admin):
    lessons_view = admin.execute("select pg_get_viewdef('pymem.lessons'::regclass)").fetchone()[0]
    assert f"'{vocabulary.LESSON_KIND}'::text" in lessons_view
    trigger = admin.execute("select pg_get_triggerdef(oid) from pg_trigger where tgname = 'memories_fact_notify'"
                            ).fetchone()[0]
    assert f"'{vocabulary.FACT_KIND}'::text" in trigger
    index = admin.execute("select indexdef from pg_indexes where indexname = 'memories_tenant_kind'").fetchone()[0]
    assert f"'{vocabulary.LESSON_KIND}'" in index and f"'{vocabulary.FACT_KIND}'" in index
    assert f"m.kind = '{vocabulary.LESSON_KIND}'" in source_of(
        admin, "pymem.record_injection(text, integer, text[], text[], text[], text, integer, integer, integer, text, "
               "text, text, text[])")


# -- limits -------------------------------------------------------------------------------------

def test_name_and_id_limits(admin):
    assert one_number(r"length\(tenant_id\) <= (\d+)", check_of(admin, "pymem.memories", "tenant_id")) == vocabulary.MAX_NAME
    assert one_number(r"length\(p_tenant\) > (\d+)",
                      source_of(admin, "pymem.set_context(text, text, text, jsonb, text[])")) == vocabulary.MAX_NAME
    assert one_number(r"length\(adapter\) <= (\d+)",
                      check_of(admin, "pymem.login_bindings", "adapter")) == vocabulary.MAX_NAME
    for name in ("p_actor", "p_adapter"):
        assert one_number(rf"length\({name}\) > (\d+)",
                          source_of(admin, "pymem.set_context(text, text, text, jsonb, text[])")) == vocabulary.MAX_NAME
    assert one_number(r"length\(id\) <= (\d+)", check_of(admin, "pymem.memories", "id")) == vocabulary.MAX_ID
    assert one_number(r"length\(key\) <= (\d+)",
                      check_of(admin, "pymem.idempotency_keys", "key")) == vocabulary.MAX_IDEMPOTENCY_KEY


def test_content_and_kind_limits(admin):
    assert one_number(r"octet_length\(content\) <= (\d+)",
                      check_of(admin, "pymem.memories", "content")) == vocabulary.MAX_CONTENT_BYTES
    kind = re.search(r"~ '(.*)'::text", check_of(admin, "pymem.memories", "kind")).group(1)
    assert kind == vocabulary.KIND_PATTERN


def test_refusal_limits(admin):
    body = source_of(admin, RECORD_REFUSAL)
    assert one_number(r"length\(p_source\) > (\d+)", body) == vocabulary.MAX_REFUSAL_SOURCE
    assert one_number(r"length\(p_reason\) > (\d+)", body) == vocabulary.MAX_REFUSAL_REASON
    assert one_number(r"p_signature !~ '\^\[a-z0-9_.\]\{1,(\d+)\}\$'", body) == vocabulary.MAX_SIGNATURE
    assert one_number(r"p_policy_fingerprint !~ '\^\[A-Za-z0-9:_.-\]\{1,(\d+)\}\$'", body) == \
        vocabulary.MAX_POLICY_FINGERPRINT


def test_top_k_limit(admin):
    body = source_of(admin, "pymem.search(vector, integer, jsonb, boolean, boolean, text, bigint, integer, integer, "
                            "text, double precision, double precision)")
    assert one_number(r"p_top_k > (\d+)", body) == vocabulary.MAX_TOP_K


# -- typed values built from rows by column name -----------------------------------------------

def test_search_hit_is_the_sql_type(admin):
    assert fields(SearchHit) == attributes(admin, "pymem.search_hit")


def test_audit_values_are_the_views(admin):
    assert fields(Refusal) == attributes(admin, "pymem.audit_refusals")
    assert fields(HistoryEvent) == attributes(admin, "pymem.memory_history")
    assert fields(Injection) == attributes(admin, "pymem.audit_injections")
    assert fields(MemoryInjection) == attributes(admin, "pymem.memory_injections")


def test_convention_is_the_view(admin):
    from pymem.conventions import Convention

    assert fields(Convention) == attributes(admin, "pymem.conventions")


def test_session_row_is_the_table(admin):
    assert fields(SessionRow) == attributes(admin, "pymem.sessions")


def test_tenant_verification_is_verify_chains_result(admin):
    names, modes = admin.execute(
        "select proargnames, proargmodes from pg_proc where oid = 'pymem.verify_chain(text)'::regprocedure").fetchone()
    columns = [n for n, m in zip(names, modes, strict=False) if m == "t"]
    assert ["tenant" if c == "tenant_id" else c for c in columns] == fields(TenantVerification)


def test_the_write_columns_are_memories_columns(admin):
    table = attributes(admin, "pymem.memories")
    assert set(WRITE_COLUMNS) <= set(table), set(WRITE_COLUMNS) - set(table)
    assert queries.insert_columns("upsert_memories") == WRITE_COLUMNS
    # every written column comes from the row or the context, by name
    row_fields = set(fields(MemoryRow)) - {"record_text"}
    assert row_fields | set(CONTEXT_COLUMNS) == set(WRITE_COLUMNS)
    assert queries.values_row("insert_memories").count("%s") == len(WRITE_COLUMNS)


# -- the functions the named queries call --------------------------------------------------------

CALL = re.compile(r"pymem\.(\w+)\(([^()]*(?:\([^()]*\)[^()]*)*)\)")


def test_named_queries_call_functions_that_take_those_arguments(admin):
    calls = [(name, m.group(1), m.group(2)) for name, q in queries.load().items()
             for m in CALL.finditer(q.text)]
    assert {c[1] for c in calls} >= {"set_context", "search", "search_as", "record_refusal", "verify_chain",
                                     "holds_chain_lock"}
    for query_name, function, args in calls:
        rows = admin.execute("select pronargs, pronargdefaults, proargnames from pg_proc"
                             " where pronamespace = 'pymem'::regnamespace and proname = %s", (function,)).fetchall()
        assert len(rows) == 1, (query_name, function)
        nargs, ndefaults, names = rows[0]
        given = [a.strip() for a in args.split(",") if a.strip()]
        assert nargs - ndefaults <= len(given) <= nargs, (query_name, function, given)
        named = [a.split("=>")[0].strip() for a in given if "=>" in a]
        assert set(named) <= set(names or []), (query_name, function, named)


def test_a_written_row_reads_back_through_every_typed_value(store):
    """The dataclasses build from real rows (types as well as names)."""
    from pymem.integrity.audit import history
    from pymem.integrity.verify import verify_chain
    from pymem.storage.search import search_rows

    mem = store.bind(Context(tenant="acme", actor="u"))
    vec = [1.0] + [0.0] * (store.embedding_dim - 1)
    mem.add([{"id": "m", "content": "x", "embedding": vec, "origin": "operator", "provenance": {"origin": "operator"}}])
    with store.pool.connection() as conn:
        [hit] = search_rows(conn, mem.ctx, vec, 1)
        report = verify_chain(conn, "acme")
    assert isinstance(hit, SearchHit) and hit.origin == "operator" and hit.revision == 1
    [event] = history(mem, "m")
    assert event.event == "memory.insert" and len(event.content_hash) == 64
    assert report.tenants[0].tenant == "acme" and report.clean
