"""Bulk upserts through the staging table (binary COPY, then one INSERT ... SELECT) write exactly
what the VALUES path writes, under the same row-level security, triggers and chain."""

from __future__ import annotations

import psycopg
import pytest
from helpers.database import AGENT_LOGIN, bind_login, login_dsn
from psycopg import errors as pgerr

from pymem import queries
from pymem.context import Context
from pymem.storage.chunks import parse_chunk
from pymem.storage.rows import STAGE_FROM, write_rows

DIM = 384


def records(n: int, prefix: str = "c") -> list[dict]:
    return [{"id": f"{prefix}{i}", "distillate": f"note {i} é\t", "scope": {"agent": f"a{i % 3}"},
             "origin": "user_asserted" if i % 2 else "tool_output", "provenance": {"turn": i, "source": "chat"},
             "embedding": [0.5 + i / 1000, -1.0] + [0.125] * (DIM - 2), "extra": {"n": [1.0, 2.50, i]}}
            for i in range(n)]


ROW_COLUMNS = ("id, scope, kind, content, record, embedding::text, tags, importance, confidence, origin, source_adapter,"
               " provenance, injection_source, policy_fingerprint, revision, record_lite")


def rows_of(database, tenant):
    with database.admin() as conn:
        return conn.execute(f"select {ROW_COLUMNS} from pymem.memories where tenant_id = %s order by id",
                            (tenant,)).fetchall()


def test_a_staged_upsert_writes_what_the_values_path_writes(store, database):
    n = STAGE_FROM + 10
    store.bind(Context(tenant="staged", actor="u1")).upsert_many(records(n), idempotency_key="k1")
    # the same records through the VALUES path (batches below STAGE_FROM)
    ctx = Context(tenant="values", actor="u1")
    rows = [parse_chunk(r, dim=DIM, default_scope={}, max_content_bytes=1 << 20) for r in records(n)]
    with store.transaction(ctx) as conn:
        for start in range(0, n, STAGE_FROM - 1):
            write_rows(conn, ctx, rows[start:start + STAGE_FROM - 1], replace=True)
    staged, valued = rows_of(database, "staged"), rows_of(database, "values")
    assert len(staged) == n and staged == valued
    assert all(r[-1] is not None and "embedding" not in r[-1] for r in staged)  # record_lite
    with database.admin() as conn:
        events = conn.execute("select tenant_id, count(*), count(distinct memory_id), min(event), max(event)"
                              " from pymem.ledger group by 1 order by 1").fetchall()
        assert events == [("staged", n, n, "memory.insert", "memory.insert"),
                          ("values", n, n, "memory.insert", "memory.insert")]
        assert conn.execute("select count(*), min(problem) from pymem.verify_chain()").fetchone() == (2, None)


def test_a_staged_upsert_replaces_and_replays(store, database):
    mem = store.bind(Context(tenant="acme", actor="u1"))
    first = records(STAGE_FROM)
    assert mem.upsert_many(first, idempotency_key="k1") == {"upserted": STAGE_FROM, "replayed": False}
    assert mem.upsert_many(first, idempotency_key="k1") == {"upserted": STAGE_FROM, "replayed": True}
    changed = [dict(r, distillate="changed") for r in first]
    mem.upsert_many(changed, idempotency_key="k2", expected_revisions={r["id"]: 1 for r in first})
    with database.admin() as conn:
        assert conn.execute("select count(*), min(revision), max(revision), min(content), max(content)"
                            " from pymem.memories").fetchone() == (STAGE_FROM, 2, 2, "changed", "changed")
        assert conn.execute("select count(*) from pymem.ledger where event = 'memory.update'").fetchone()[0] == STAGE_FROM
        assert conn.execute("select count(*), min(problem) from pymem.verify_chain()").fetchone() == (1, None)


def test_two_staged_writes_in_one_transaction_and_nothing_left_behind(store, database):
    mem = store.bind(Context(tenant="acme", actor="u1"))
    with store.transaction(mem.ctx) as conn:
        mem.upsert_many(records(STAGE_FROM, "a"), idempotency_key="k1", conn=conn)
        mem.upsert_many(records(STAGE_FROM, "b"), idempotency_key="k2", conn=conn)
        assert conn.execute("select to_regclass('pg_temp.pymem_stage')").fetchone()[0] is None
    with database.admin() as conn:
        assert conn.execute("select count(*) from pymem.memories").fetchone()[0] == 2 * STAGE_FROM


def test_a_staged_write_refused_by_the_database_writes_nothing(store, database):
    """Rows outside the context's scope pass the COPY into the stage and are refused by the
    policy on the final INSERT: the whole call rolls back (rows, ledger, idempotency key)."""
    from pymem.errors import AccessDenied

    mem = store.bind(Context(tenant="acme", actor="u1", scope={"agent": "a1"}))
    with pytest.raises(AccessDenied):
        mem.upsert_many(records(STAGE_FROM), idempotency_key="k1")
    with database.admin() as conn:
        assert conn.execute("select (select count(*) from pymem.memories), (select count(*) from pymem.ledger),"
                            " (select count(*) from pymem.idempotency_keys)").fetchone() == (0, 0, 0)


def test_the_staged_insert_is_the_callers_statement_under_row_level_security(database):
    """A bound agent login stages a row claiming another tenant and no adapter: the final INSERT
    is refused by the policy, as a VALUES insert would be."""
    bind_login(database, AGENT_LOGIN, adapter="codex", tenants=["acme"])
    with psycopg.connect(login_dsn(database, AGENT_LOGIN)) as conn:
        from pgvector.psycopg import register_vector

        register_vector(conn)
        conn.execute("select pymem.set_context('acme', null, 'codex', '{}'::jsonb, null)")
        conn.execute(queries.query("create_stage"))
        for tenant, adapter in (("globex", "codex"), ("acme", None)):
            with conn.transaction():
                conn.execute("insert into pg_temp.pymem_stage (tenant_id, id, scope, kind, tags, content, source_adapter)"
                             " values (%s, 'x', '{}', 'fact', '{}', 'y', %s)", (tenant, adapter))
                with pytest.raises(pgerr.InsufficientPrivilege, match="row-level security"):
                    with conn.transaction():
                        conn.execute(queries.query("upsert_from_stage"))
                conn.execute("delete from pg_temp.pymem_stage")
        conn.execute("insert into pg_temp.pymem_stage (tenant_id, id, scope, kind, tags, content, source_adapter)"
                     " values ('acme', 'ok', '{}', 'fact', '{}', 'y', 'codex')")
        assert conn.execute(queries.query("upsert_from_stage")).fetchall() == [("ok", 1)]
        conn.commit()
    with database.admin() as conn:
        assert conn.execute("select tenant_id, id, source_adapter from pymem.memories").fetchall() == [("acme", "ok", "codex")]
        assert conn.execute("select count(*), min(problem) from pymem.verify_chain()").fetchone() == (1, None)
