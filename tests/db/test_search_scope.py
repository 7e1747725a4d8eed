"""Scoped searches: the plan follows the number of rows in scope, the per-scope counts follow every
write, and the scoped exact plan (pymem._search_in_scope, a definer reading the scope index)
returns exactly what row-level security alone would.

pymem.search counts the rows in scope only in tenants of p_exact_below rows or more (2,000 by
default); these tests pass a low p_exact_below so that a few hundred rows take the plans a big
tenant takes. Which plan ran is read from the transaction's own index statistics
(pg_stat_xact_user_indexes), before and after the call.
"""

from __future__ import annotations

import json
import threading

import psycopg
import pytest
from helpers.database import AGENT_LOGIN, DIM, bind_login, login_dsn
from psycopg.types.json import Jsonb

QUERY = [1.0] + [0.0] * (DIM - 1)
TOP_K = 10
INDEXES = ("memories_embedding_hnsw", "memories_tenant_scope", "scope_rows_scope", "memories_pkey")


def _insert(conn: psycopg.Connection, tenant: str, prefix: str, n: int, scope: dict,
            adapter: str | None = None) -> None:
    """n rows with random directions in their first 32 coordinates, written as the app (RLS,
    triggers and ledger apply), committed."""
    conn.execute("select pymem.set_context(%s, 'loader', %s, '{}'::jsonb, null)", (tenant, adapter))
    conn.execute(
        """
        insert into pymem.memories (tenant_id, id, scope, record, embedding, source_adapter)
        select %(tenant)s, %(prefix)s || g, %(scope)s::jsonb, jsonb_build_object('id', %(prefix)s || g),
               ((select array_agg(random() - 0.5 order by i) from generate_series(1, 32) i where g > 0)
                || array_fill(0::float8, array[%(rest)s]))::vector, %(adapter)s
          from generate_series(1, %(n)s) g
        """,
        {"tenant": tenant, "prefix": prefix, "scope": json.dumps(scope), "rest": DIM - 32, "n": n,
         "adapter": adapter})
    conn.commit()


def _scans(conn: psycopg.Connection) -> dict[str, int]:
    """Scans of each index counted so far in this session and not yet reported (so: compare)."""
    rows = conn.execute("select c.relname, pg_stat_get_xact_numscans(c.oid) from pg_class c"
                        " where c.relnamespace = 'pymem'::regnamespace and c.relname = any(%s)",
                        (list(INDEXES),)).fetchall()
    return dict(rows)


def _search(conn: psycopg.Connection, tenant: str, scope_filter: dict, *, scope: dict | None = None,
            read: list[str] | None = None, plan: str = "auto", exact_below: int = 50,
            superseded: bool = False, k: int = TOP_K) -> tuple[list[str], dict[str, int]]:
    """pymem.search's ids, and how many scans of each index it made (in one transaction)."""
    conn.execute("select pymem.set_context(%s, 'reader', null, %s, %s)", (tenant, Jsonb(scope or {}), read))
    before = _scans(conn)
    rows = conn.execute(
        "select id from pymem.search(%s::text::vector, %s, %s, %s, false, %s, %s)",
        (json.dumps(QUERY), k, Jsonb(scope_filter), superseded, plan, exact_below)).fetchall()
    after = _scans(conn)
    conn.rollback()
    return [r[0] for r in rows], {name: after[name] - before.get(name, 0) for name in after}


def _truth(db, tenant: str, scope: dict, *, read: list[str] | None = None, superseded: bool = False,
           k: int = TOP_K) -> list[str]:
    """The exact top k, computed by the superuser from the rows the read policy admits."""
    with db.admin() as conn:
        rows = conn.execute(
            "select id from pymem.memories where tenant_id = %s and scope @> %s and erased_at is null"
            " and (%s or invalidated_at is null) and embedding is not null"
            " and (%s::text[] is null or source_adapter = any(%s::text[]))"
            " order by (embedding <=> %s::text::vector) + 0, id limit %s",
            (tenant, Jsonb(scope), superseded, read, read, json.dumps(QUERY), k)).fetchall()
    return [r[0] for r in rows]


def _counts(db) -> tuple[list, list, list]:
    with db.admin() as conn:
        kept = conn.execute("select tenant_id, scope::text, source_adapter, live_rows from pymem.scope_rows"
                            " order by 1, 2, 3").fetchall()
        actual = conn.execute("select tenant_id, scope::text, source_adapter, count(*) from pymem.memories"
                              " group by 1, 2, 3 order by 1, 2, 3").fetchall()
        heads = conn.execute("select h.tenant_id, h.live_rows, (select coalesce(sum(s.live_rows), 0)"
                             " from pymem.scope_rows s where s.tenant_id = h.tenant_id)"
                             " from pymem.chain_heads h order by 1").fetchall()
    return kept, actual, heads


@pytest.fixture
def scoped(database):
    """Tenant "big": 20 rows in team "few", 280 in team "many" (two adapters), 30 unscoped;
    tenant "other": 40 rows in team "few" (same scope values, another tenant)."""
    with database.app() as conn:
        _insert(conn, "big", "few-", 20, {"team": "few", "app": "a"})
        _insert(conn, "big", "many-x-", 140, {"team": "many", "app": "a"}, adapter="x")
        _insert(conn, "big", "many-y-", 140, {"team": "many", "app": "a"}, adapter="y")
        _insert(conn, "big", "none-", 30, {})
        _insert(conn, "other", "o-", 40, {"team": "few", "app": "a"})
    return database


def test_scope_counts_follow_every_write(scoped):
    kept, actual, heads = _counts(scoped)
    assert kept == actual and len(kept) == 5
    assert all(live == summed for _, live, summed in heads)
    with scoped.app() as conn:
        conn.execute("select pymem.set_context('big', 'editor', null, '{}'::jsonb, null)")
        # scope moves (some rows), an update that keeps the scope, an erase, deletes
        conn.execute("update pymem.memories set scope = '{\"team\": \"moved\"}' where id in ('few-1', 'few-2', 'none-1')")
        conn.execute("update pymem.memories set tags = '{t}' where id like 'few-%'")
        conn.execute("select pymem.erase_memory('few-3', 'test')")
        conn.execute("select * from pymem.delete_memories(array['few-4', 'few-5', 'none-2', 'few-1'])")
        # the operator takes over an adapter's rows: they become untagged
        conn.execute("update pymem.memories set source_adapter = null where id in ('many-x-1', 'many-x-2')")
        conn.commit()
        conn.execute("select pymem.set_context('big', 'editor', 'y', '{}'::jsonb, null)")
        conn.execute("select * from pymem.delete_memories(array['many-y-1'])")
        conn.commit()
    kept, actual, heads = _counts(scoped)
    assert kept == actual
    assert ("big", '{"team": "moved"}', None, 2) in kept  # three rows moved there, one then deleted
    assert ("big", '{"app": "a", "team": "many"}', None, 2) in kept
    assert ("big", '{"app": "a", "team": "many"}', "y", 139) in kept
    assert all(live == summed for _, live, summed in heads)
    with scoped.app() as conn:  # a scope whose last row goes leaves no count behind
        conn.execute("select pymem.set_context('big', 'editor', null, '{}'::jsonb, null)")
        conn.execute("select * from pymem.delete_memories(array['few-2', 'none-1'])")
        conn.commit()
    kept, actual, _ = _counts(scoped)
    assert kept == actual and all(scope != '{"team": "moved"}' for _, scope, _, _ in kept)


def test_a_small_scope_of_a_big_tenant_takes_the_exact_plan(scoped):
    with scoped.app() as conn:
        ids, scans = _search(conn, "big", {"team": "few"})
        assert ids == _truth(scoped, "big", {"team": "few"})
        assert scans["memories_embedding_hnsw"] == 0 and scans["memories_tenant_scope"] >= 1
        assert scans["scope_rows_scope"] >= 1
        # the context's scope narrows the same way, alone or with a filter
        for scope, scope_filter in (({"team": "few"}, {}), ({"app": "a"}, {"team": "few"})):
            ids, scans = _search(conn, "big", scope_filter, scope=scope)
            assert ids == _truth(scoped, "big", {"team": "few"})
            assert scans["memories_embedding_hnsw"] == 0 and scans["memories_tenant_scope"] >= 1


def test_a_big_scope_and_an_unscoped_search_take_hnsw(scoped):
    with scoped.app() as conn:
        ids, scans = _search(conn, "big", {"team": "many"})
        assert len(ids) == TOP_K and all(i.startswith("many-") for i in ids)
        assert scans["memories_embedding_hnsw"] >= 1 and scans["memories_tenant_scope"] == 0
        assert scans["scope_rows_scope"] >= 1  # counted, then sent to HNSW
        # unscoped: decided from the tenant's count, the scope is neither counted nor read
        ids, scans = _search(conn, "big", {})
        assert len(ids) == TOP_K
        assert scans["memories_embedding_hnsw"] >= 1
        assert scans["memories_tenant_scope"] == 0 and scans["scope_rows_scope"] == 0
        # a small tenant is read whole, scoped or not, as before
        ids, scans = _search(conn, "big", {"team": "few"}, exact_below=2000)
        assert ids == _truth(scoped, "big", {"team": "few"})
        assert scans["memories_embedding_hnsw"] == 0 and scans["memories_tenant_scope"] == 0
        assert scans["scope_rows_scope"] == 0


@pytest.mark.parametrize("case", ["filter", "context scope", "allow-list", "superseded", "top_k above the scope"])
def test_the_scoped_exact_plan_returns_what_row_level_security_allows(scoped, case):
    """The scoped exact plan applies the read policy itself: it must agree with the exact plan
    over the tenant's rows under row-level security (a tenant too small to count scopes)."""
    with scoped.app() as conn:  # rows the plans must leave out: erased, superseded, without a vector
        conn.execute("select pymem.set_context('big', 'editor', null, '{}'::jsonb, null)")
        conn.execute("select pymem.erase_memory('many-x-1', 'test')")
        conn.execute("update pymem.memories set invalidated_at = now() where id = 'few-6'")
        conn.execute("update pymem.memories set embedding = null where id = 'few-8'")
        conn.commit()
        conn.execute("select pymem.set_context('big', 'editor', 'y', '{}'::jsonb, null)")
        conn.execute("update pymem.memories set invalidated_at = now() where id = 'many-y-7'")
        conn.commit()
    args = {"filter": dict(scope_filter={"team": "many"}),
            "context scope": dict(scope_filter={}, scope={"team": "many"}),
            "allow-list": dict(scope_filter={"team": "many"}, read=["y"]),
            "superseded": dict(scope_filter={"team": "few"}, superseded=True),
            "top_k above the scope": dict(scope_filter={"team": "few"}, k=50)}[case]
    scope = {**args.get("scope", {}), **args["scope_filter"]}
    want = _truth(scoped, "big", scope, read=args.get("read"), superseded=args.get("superseded", False),
                  k=args.get("k", TOP_K))
    assert want and (case != "allow-list" or all(i.startswith("many-y-") for i in want))
    with scoped.app() as conn:
        scoped_exact, scans = _search(conn, "big", plan="exact", **args)
        assert scans["memories_tenant_scope"] >= 1
        tenant_exact, scans = _search(conn, "big", exact_below=10_000, **args)
        assert scans["memories_tenant_scope"] == 0
    assert scoped_exact == tenant_exact == want
    if case == "top_k above the scope":
        assert len(want) == 18  # 20 rows in scope, one superseded, one without a vector
    # the HNSW plan falls back to the scoped exact plan when the scan runs dry: never fewer rows
    with scoped.app() as conn:
        hnsw, _ = _search(conn, "big", plan="hnsw", **args)
    assert len(hnsw) == len(want)


def test_a_filter_contradicting_the_context_scope_matches_nothing(scoped):
    with scoped.app() as conn:
        for plan in ("auto", "exact", "hnsw"):
            ids, _ = _search(conn, "big", {"team": "many"}, scope={"team": "few"}, plan=plan)
            assert ids == []


def test_the_definer_names_only_rows_the_context_may_read(scoped):
    """pymem._search_in_scope is callable by the app: it must never name another tenant's row, a row
    outside the context scope or allow-list, nor widen a context that matches nothing."""
    call = ("select pymem._search_in_scope(%s::text::vector, 1000, %s, true, null)")
    with scoped.app() as conn:
        conn.execute("select pymem.set_context('big', 'reader', null, '{\"team\": \"few\"}'::jsonb, array['x'])")
        assert conn.execute(call, (json.dumps(QUERY), Jsonb({}))).fetchone()[0] == []  # "few" rows are untagged
        conn.rollback()
        conn.execute("select pymem.set_context('big', 'reader', null, '{}'::jsonb, array['x'])")
        ids = conn.execute(call, (json.dumps(QUERY), Jsonb({"team": "many"}))).fetchone()[0]
        assert len(ids) == 140 and all(i.startswith("many-x-") for i in ids)
        # the count it sizes the scope by is of rows the allow-list admits, too (140, not 280)
        capped = "select pymem._search_in_scope(%s::text::vector, 1, %s, true, %s) is null"
        assert conn.execute(capped, (json.dumps(QUERY), Jsonb({"team": "many"}), 140)).fetchone()[0]
        assert not conn.execute(capped, (json.dumps(QUERY), Jsonb({"team": "many"}), 141)).fetchone()[0]
        conn.rollback()
        conn.execute("select pymem.set_context('other', 'reader', null, '{}'::jsonb, null)")
        ids = conn.execute(call, (json.dumps(QUERY), Jsonb({"team": "few"}))).fetchone()[0]
        assert len(ids) == 40 and all(i.startswith("o-") for i in ids)
        conn.rollback()
        for bad in ({"team": {"nested": "x"}}, {"": "x"}, {"team": ""}):
            with pytest.raises(psycopg.errors.InvalidParameterValue):
                conn.execute(call, (json.dumps(QUERY), Jsonb(bad)))
            conn.rollback()
    # A bound login whose context scope contradicts its binding sees nothing ({"": ""}): the
    # tenant key the index lookup adds must not turn that into "everything".
    bind_login(scoped, AGENT_LOGIN, adapter="x", tenants=["big"], scope={"team": "many"})
    with psycopg.connect(login_dsn(scoped, AGENT_LOGIN)) as conn:
        conn.execute("select pymem.set_context('big', 'agent', 'x', '{\"team\": \"many\"}'::jsonb, null)")
        assert len(conn.execute(call, (json.dumps(QUERY), Jsonb({}))).fetchone()[0]) == 280
        conn.execute("select set_config('pymem.scope', '{\"team\": \"few\"}', true)")
        assert conn.execute("select pymem._ctx_scope()").fetchone()[0] == {"": ""}
        assert conn.execute(call, (json.dumps(QUERY), Jsonb({}))).fetchone()[0] == []
        assert conn.execute(call, (json.dumps(QUERY), Jsonb({"team": "few"}))).fetchone()[0] == []


def test_concurrent_writers_keep_the_counts_exact(database):
    """Writers of one tenant change its counts one after the other (under the chain-head lock), so
    concurrent inserts, scope moves and deletes into shared scopes lose no update and never
    deadlock; another tenant writes beside them."""
    errors: list[BaseException] = []

    def writer(t: int, tenant: str) -> None:
        try:
            with database.app() as conn:
                barrier.wait(timeout=30)
                for i in range(30):
                    conn.execute("select pymem.set_context(%s, %s, null, '{}'::jsonb, null)", (tenant, f"w{t}"))
                    conn.execute("insert into pymem.memories (tenant_id, id, scope, content) values (%s, %s, %s, 'x')",
                                 (tenant, f"w{t}-{i}", Jsonb({"team": f"s{i % 3}"})))
                    if i % 5 == 4:
                        conn.execute("update pymem.memories set scope = %s where id = %s",
                                     (Jsonb({"team": f"s{(i + 1) % 3}", "moved": "yes"}), f"w{t}-{i - 2}"))
                    if i % 7 == 6:
                        conn.execute("select * from pymem.delete_memories(array[%s])", (f"w{t}-{i - 1}",))
                    conn.commit()
        except BaseException as exc:  # noqa: BLE001 - surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(t, "acme")) for t in range(4)]
    threads.append(threading.Thread(target=writer, args=(9, "globex")))
    barrier = threading.Barrier(len(threads))
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=120)
    assert not errors, errors[:3]
    kept, actual, heads = _counts(database)
    assert kept == actual and len(kept) == 12  # 3 teams, moved or not, in each of 2 tenants
    assert all(live == summed for _, live, summed in heads)
