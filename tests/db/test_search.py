"""Search completeness and isolation at low selectivity, on both plans.

A tenant of 20,000 rows whose vectors crowd around the query, with a scope holding 0.75 % of
them far from it; and a tenant holding 0.75 % of the table. A plain filtered HNSW scan returns
(almost) nothing for either; pymem.search must return exactly top_k rows, all in scope.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
from urllib.parse import urlsplit

import psycopg
import pytest
from helpers.database import APP_LOGIN, DIM, PASSWORD, TestDatabase, with_user

from pymem.context import Context
from pymem.errors import InvalidArguments
from pymem.storage.search import search_rows

# Every test here shares one module-scoped data set of tens of thousands of rows.
pytestmark = pytest.mark.slow

BIG = 20_000
SMALL = 150
TOP_K = 10
QUERY = [1.0] + [0.0] * (DIM - 1)
_names = itertools.count()


def _load(conn: psycopg.Connection, tenant: str, prefix: str, n: int, scope: dict, near: bool) -> None:
    """n rows generated server-side, written as the app (RLS, triggers and ledger all apply).
    near: vectors within a few degrees of QUERY; else random directions (cosine about 0). Only the
    first 32 coordinates vary (the rest are zero), which keeps generation cheap."""
    conn.execute("select pymem.set_context(%s, 'loader', null, '{}'::jsonb, null)", (tenant,))
    conn.execute(
        """
        insert into pymem.memories (tenant_id, id, scope, record, embedding)
        select %(tenant)s, %(prefix)s || g, %(scope)s::jsonb, jsonb_build_object('id', %(prefix)s || g),
               ((select array_agg(case when %(near)s then (i = 1)::int + 0.1 * (random() - 0.5)
                                       else random() - 0.5 end order by i)
                   from generate_series(1, 32) i where g > 0)
                || array_fill(0::float8, array[%(rest)s]))::vector
          from generate_series(1, %(n)s) g
        """,
        {"tenant": tenant, "prefix": prefix, "scope": json.dumps(scope), "near": near, "rest": DIM - 32, "n": n},
    )
    conn.commit()


@pytest.fixture(scope="module")
def big(server_dsn, template_db):
    """One database for the module: loaded once, with the HNSW index built after the load."""
    name = f"pymem_search_{os.getpid()}_{next(_names)}"
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute(f'create database "{name}" template "{template_db}"')
    superuser = urlsplit(server_dsn).username or "postgres"
    db = TestDatabase(name=name, admin_dsn=with_user(server_dsn, superuser, database=name),
                app_dsn=with_user(server_dsn, APP_LOGIN, database=name, password=PASSWORD), auditor_dsn="")
    with db.admin() as admin:
        admin.execute("drop index pymem.memories_embedding_hnsw")
    with db.app() as conn:
        _load(conn, "big", "near-", BIG - SMALL, {"team": "crowd"}, near=True)
        _load(conn, "big", "mine-", SMALL, {"team": "mine"}, near=False)
        _load(conn, "tiny", "t-", SMALL, {"team": "mine"}, near=False)
    with db.admin() as admin:
        admin.execute("set maintenance_work_mem = '256MB'")
        admin.execute("create index memories_embedding_hnsw on pymem.memories using hnsw (embedding vector_cosine_ops)")
        admin.execute("analyze pymem.memories")
    store = db.store()
    yield db, store
    store.close()
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute(f'drop database if exists "{name}" with (force)')


def _exact_ids(db: TestDatabase, tenant: str, team: str | None, k: int) -> list[str]:
    with db.admin() as conn:
        rows = conn.execute(
            "select id from pymem.memories where tenant_id = %s and (%s::text is null or scope->>'team' = %s)"
            " order by (embedding <=> %s::text::vector) + 0, id limit %s",  # + 0: no index, really exact
            (tenant, team, team, json.dumps(QUERY), k)).fetchall()
    return [r[0] for r in rows]


def _naive_hnsw_count(db: TestDatabase, tenant: str, team: str) -> int:
    """What a plain filtered HNSW scan returns (no iterative scan): the failure pymem avoids."""
    with db.admin() as conn:
        conn.execute("set enable_seqscan = off; set enable_bitmapscan = off; set enable_indexscan = on")
        conn.execute("set hnsw.ef_search = 40; set hnsw.iterative_scan = off")
        return len(conn.execute(
            "select id from pymem.memories where tenant_id = %s and scope->>'team' = %s"
            " order by embedding <=> %s::text::vector limit %s",
            (tenant, team, json.dumps(QUERY), TOP_K)).fetchall())


@pytest.mark.parametrize("plan", ["auto", "hnsw", "exact"])
def test_a_small_scope_of_a_large_tenant_gets_exactly_top_k(big, plan):
    db, store = big
    assert _naive_hnsw_count(db, "big", "mine") < TOP_K  # the trap is real
    expected = _exact_ids(db, "big", "mine", TOP_K)
    with store.pool.connection() as conn:
        rows = search_rows(conn, Context(tenant="big"), QUERY, TOP_K, {"team": "mine"}, plan=plan)
    assert len(rows) == TOP_K
    assert all(r.scope == {"team": "mine"} for r in rows)
    assert [r.score for r in rows] == sorted((r.score for r in rows), reverse=True)
    recall = len({r.id for r in rows} & set(expected)) / TOP_K
    assert recall >= (1.0 if plan == "exact" else 0.8)
    if plan != "hnsw":  # auto counts the 150 rows in scope and reads them exactly
        assert [r.id for r in rows] == expected


def test_the_context_scope_is_enforced_the_same_way(big):
    db, store = big
    mem = store.bind(Context(tenant="big", scope={"team": "mine"}))
    hits = mem.search(QUERY, top_k=TOP_K)
    assert len(hits) == TOP_K and all(h["chunk_id"].startswith("mine-") for h in hits)
    assert [h["chunk_id"] for h in hits] == _exact_ids(db, "big", "mine", TOP_K)  # few in scope: exact
    assert len(mem.search(QUERY, top_k=SMALL + 50)) == SMALL  # fewer in scope than top_k: all of them


@pytest.mark.parametrize("plan", ["auto", "hnsw"])
def test_a_small_tenant_gets_exactly_top_k(big, plan):
    db, store = big
    expected = _exact_ids(db, "tiny", None, TOP_K)
    with store.pool.connection() as conn:
        rows = search_rows(conn, Context(tenant="tiny"), QUERY, TOP_K, plan=plan)
    assert [r.id for r in rows] == expected or (plan == "hnsw" and len(set(expected) & {r.id for r in rows}) >= 8)
    assert len(rows) == TOP_K and all(r.id.startswith("t-") for r in rows)


def test_hnsw_and_exact_agree_on_a_crowded_tenant(big):
    db, store = big
    expected = _exact_ids(db, "big", None, TOP_K)
    with store.pool.connection() as conn:
        hnsw = search_rows(conn, Context(tenant="big"), QUERY, TOP_K, plan="hnsw")
        exact = search_rows(conn, Context(tenant="big"), QUERY, TOP_K, plan="exact")
    assert [r.id for r in exact] == expected
    assert len(set(r.id for r in hnsw) & set(expected)) >= 8


def test_plans_stay_right_after_many_calls_on_one_connection(big):
    """psycopg and plpgsql both switch to generic plans after a few runs; the search must not."""
    db, store = big
    tiny, crowd = _exact_ids(db, "tiny", None, 3), _exact_ids(db, "big", "mine", 3)
    with store.pool.connection() as conn:
        for _ in range(8):
            assert [r.id for r in search_rows(conn, Context(tenant="tiny"), QUERY, 3)] == tiny
            got = search_rows(conn, Context(tenant="big"), QUERY, 3, {"team": "mine"})
            assert len(got) == 3 and all(r.id.startswith("mine-") for r in got)
            assert len(set(r.id for r in got) & set(crowd)) >= 2


def test_search_rows_columns_and_validation(big):
    _db, store = big
    with store.pool.connection() as conn:
        row = search_rows(conn, Context(tenant="tiny"), QUERY, 1, with_vectors=False)[0]
        assert {f.name for f in dataclasses.fields(row)} == {
            "id", "record", "content", "kind", "tags", "scope", "origin", "provenance", "confidence", "source_adapter",
            "injection_source", "policy_fingerprint", "created_at", "revision", "score"}
        assert row.kind == "fact" and row.revision == 1 and 0 < row.score <= 1
        for bad in (dict(top_k=0), dict(top_k=1001), dict(top_k=True), dict(plan="fast"),
                    dict(vector=[0.0] * DIM), dict(vector=QUERY[:-1]), dict(scope_filter={"a": {"b": "c"}})):
            args = dict(vector=QUERY, top_k=1, scope_filter=None, plan="auto") | bad
            with pytest.raises(InvalidArguments):
                search_rows(conn, Context(tenant="tiny"), args["vector"], args["top_k"], args["scope_filter"],
                            plan=args["plan"])


@pytest.mark.parametrize("tenant,team", [("tiny", None), ("big", "mine"), ("big", None)])
@pytest.mark.parametrize("with_vectors", [True, False])
def test_search_as_returns_what_search_returns(big, tenant, team, with_vectors):
    """pymem.search_as repeats pymem.search's body instead of calling it: the same rows, records,
    scores and revisions, on the exact and the HNSW plan alike."""
    _db, store = big
    scope_filter = {"team": team} if team else {}
    with store.pool.connection() as conn:
        rows = search_rows(conn, Context(tenant=tenant), QUERY, TOP_K, scope_filter, with_vectors=with_vectors)
        conn.rollback()
        conn.autocommit = True
        as_rows = conn.execute(
            "select id, record, content, kind, tags, scope, origin, provenance, confidence, source_adapter,"
            " injection_source, policy_fingerprint, created_at, revision, score"
            " from pymem.search_as(%s, null, null, '{}', null, %s::text::vector, %s, %s::jsonb, false, %s)",
            (tenant, json.dumps(QUERY), TOP_K, json.dumps(scope_filter), with_vectors)).fetchall()
        conn.autocommit = False
    assert len(rows) == TOP_K
    assert [tuple(dataclasses.astuple(r)) for r in rows] == [tuple(r) for r in as_rows]
    hits = store.bind(Context(tenant=tenant)).search(QUERY, top_k=TOP_K, scope_filter=scope_filter,
                                                     include={"embedding": with_vectors})
    assert [(h["chunk_id"], h["chunk"], h["score"], h["revision"]) for h in hits] == \
        [(r.id, r.record, r.score, r.revision) for r in rows]
