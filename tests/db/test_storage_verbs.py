"""The storage contract's verbs against a real Postgres: every TEST of the seed's FN blocks, plus
idempotency, optimistic locking, atomicity and RLS corner cases."""

from __future__ import annotations

import json
import random
import threading

import psycopg
import pytest
from helpers.flavours import caller_connection

from pymem.context import Context
from pymem.errors import AccessDenied, IdempotencyConflict, InvalidArguments, RevisionMismatch

pytestmark = pytest.mark.parity

DIM = 384


def vec(*head: float) -> list[float]:
    """A DIM-dimensional vector whose first coordinates are `head` (the rest zero)."""
    return list(head) + [0.0] * (DIM - len(head))


def rand_vec(rng: random.Random) -> list[float]:
    return [rng.gauss(0, 1) for _ in range(DIM)]


def chunk(memory_id: str, embedding: list[float] | None = None, **extra) -> dict:
    record = {"id": memory_id, "distillate": f"about {memory_id}", "trust_tier": "t2",
              "metadata": {"nested": [1, 2.5, None, True, "ü"]}}
    if embedding is not None:
        record["embedding"] = embedding
    record.update(extra)
    return record


def counts(database) -> tuple[int, int, int]:
    """(memories, ledger entries, idempotency keys) across all tenants, bypassing RLS."""
    with database.admin() as conn:
        return tuple(conn.execute(
            "select (select count(*) from pymem.memories), (select count(*) from pymem.ledger),"
            " (select count(*) from pymem.idempotency_keys)").fetchone())


@pytest.fixture
def mem(store):
    return store.bind(Context(tenant="acme", actor="agent-1"))


# -- upsert_many (seed TESTS) -------------------------------------------------------------------

def test_basic_upsert(mem):
    a, b = chunk("a", vec(1, 0)), chunk("b", vec(0, 1), scope={"agent": "x"})
    assert mem.upsert_many([a, b], idempotency_key="k1") == {"upserted": 2, "replayed": False}
    assert mem.get("a") == {**a, "revision": 1}
    assert mem.get("b") == {**b, "revision": 1}


def test_replay(mem, database):
    records = [chunk("a", vec(1, 0))]
    assert mem.upsert_many(records, idempotency_key="k1") == {"upserted": 1, "replayed": False}
    before = counts(database)
    assert mem.upsert_many(records, idempotency_key="k1") == {"upserted": 1, "replayed": True}
    assert counts(database) == before
    assert mem.get("a")["revision"] == 1


def test_conflict(mem, database):
    mem.upsert_many([chunk("a", vec(1, 0))], idempotency_key="k1")
    before = counts(database)
    with pytest.raises(IdempotencyConflict):
        mem.upsert_many([chunk("a", vec(0, 1))], idempotency_key="k1")
    assert counts(database) == before
    assert mem.get("a") == {**chunk("a", vec(1, 0)), "revision": 1}


def test_optimistic_lock(mem, database):
    mem.upsert_many([chunk("a", vec(1, 0)), chunk("b", vec(0, 1))], idempotency_key="k1")
    mem.upsert_many([chunk("a", vec(1, 1))], idempotency_key="k2", expected_revisions={"a": 1})
    assert mem.get("a")["revision"] == 2
    before = counts(database)
    with pytest.raises(RevisionMismatch):  # a is at 2 now; b's expectation is fine, the batch still fails
        mem.upsert_many([chunk("a", vec(1, 2)), chunk("b", vec(2, 1))], idempotency_key="k3",
                        expected_revisions={"a": 1, "b": 1})
    assert counts(database) == before
    assert mem.get("a")["embedding"] == vec(1, 1) and mem.get("b")["revision"] == 1


def test_optimistic_lock_absent_and_create_only(mem, database):
    before = counts(database)
    with pytest.raises(RevisionMismatch):  # expected to exist, but does not
        mem.upsert_many([chunk("new")], idempotency_key="k1", expected_revisions={"new": 1})
    assert counts(database) == before
    assert mem.upsert_many([chunk("new")], idempotency_key="k2", expected_revisions={"new": 0})["upserted"] == 1
    with pytest.raises(RevisionMismatch):  # 0 = must not exist yet
        mem.upsert_many([chunk("new")], idempotency_key="k3", expected_revisions={"new": 0})
    # the failed call did not consume its key
    assert mem.upsert_many([chunk("new")], idempotency_key="k3", expected_revisions={"new": 1})["replayed"] is False
    assert mem.get("new")["revision"] == 2


def test_injection_rule(mem, database):
    before = counts(database)
    with pytest.raises(InvalidArguments):
        mem.upsert_many([chunk("a", origin="injected_context")], idempotency_key="k1")
    with pytest.raises(InvalidArguments):
        mem.upsert_many([chunk("b", origin="user_asserted", injection_source="web")], idempotency_key="k2")
    with pytest.raises(InvalidArguments):  # also without an origin at all
        mem.upsert_many([chunk("c", injection_source="web")], idempotency_key="k3")
    assert counts(database) == before
    ok = chunk("d", origin="injected_context", injection_source="retrieval:web")
    assert mem.upsert_many([ok], idempotency_key="k4")["upserted"] == 1
    assert mem.get("d") == {**ok, "revision": 1}


# -- upsert_many: more ---------------------------------------------------------------------------

def test_update_bumps_revision_and_keeps_verbatim(mem):
    mem.upsert_many([chunk("a", vec(1, 0))], idempotency_key="k1")
    changed = chunk("a", vec(0, 1), distillate="changed", extra={"ключ": ["значение", {"deep": 1e-7}]})
    assert mem.upsert_many([changed], idempotency_key="k2") == {"upserted": 1, "replayed": False}
    assert mem.get("a") == {**changed, "revision": 2}


def test_id_and_vector_fallbacks(mem):
    records = [{"chunk_id": "c1", "vector": vec(1, 0)}, {"memory_id": "m1", "embedding": None, "vector": vec(0, 1)},
               {"id": None, "chunk_id": "c2"}]
    mem.upsert_many(records, idempotency_key="k1")
    assert mem.get("c1") == {**records[0], "revision": 1}
    assert mem.get("m1") == {**records[1], "revision": 1}
    assert mem.get("c2") == {**records[2], "revision": 1}
    hits = mem.search(vec(0, 1), top_k=5)
    assert [h["chunk_id"] for h in hits] == ["m1", "c1"]  # c2 has no vector: never matches


def test_columns_extracted_from_the_chunk(mem, database):
    record = {"id": "a", "content": "the text", "provenance": {"session": "s1"}, "origin": "tool_output",
              "scope": {"agent": "x"}, "embedding": vec(1)}
    mem.upsert_many([record], idempotency_key="k1")
    row = mem.get_row("a")
    assert row["content"] == "the text" and row["provenance"] == {"session": "s1"}
    assert row["origin"] == "tool_output" and row["scope"] == {"agent": "x"} and row["record"] == record
    mem.upsert_many([{"id": "b", "distillate": "summary", "provenance": "not an object"}], idempotency_key="k2")
    row = mem.get_row("b")
    assert row["content"] == "summary" and row["provenance"] is None and row["scope"] == {}


def test_idempotency_is_per_actor_and_per_tenant(store):
    records = [chunk("a", vec(1, 0))]
    one = store.bind(Context(tenant="acme", actor="u1"))
    two = store.bind(Context(tenant="acme", actor="u2"))
    other = store.bind(Context(tenant="globex", actor="u1"))
    assert one.upsert_many(records, idempotency_key="k")["replayed"] is False
    assert two.upsert_many(records, idempotency_key="k")["replayed"] is False  # another actor's key
    assert other.upsert_many(records, idempotency_key="k")["replayed"] is False  # another tenant's key
    assert one.get("a")["revision"] == 2 and other.get("a")["revision"] == 1
    with pytest.raises(IdempotencyConflict):
        two.upsert_many([chunk("b")], idempotency_key="k")


def test_expired_key_may_be_reused(mem, database):
    mem.upsert_many([chunk("a")], idempotency_key="k", idempotency_class="short")
    with pytest.raises(IdempotencyConflict):
        mem.upsert_many([chunk("b")], idempotency_key="k")
    with database.admin() as conn:
        (ttl,) = conn.execute("select expires_at - created_at from pymem.idempotency_keys").fetchone()
        assert ttl.total_seconds() == 3600
        conn.execute("update pymem.idempotency_keys set expires_at = now() - interval '1 second'")
    assert mem.upsert_many([chunk("b")], idempotency_key="k", idempotency_class="long") == \
        {"upserted": 1, "replayed": False}
    with database.admin() as conn:
        (ttl,) = conn.execute("select expires_at - created_at from pymem.idempotency_keys").fetchone()
    assert ttl.days == 30
    assert mem.upsert_many([chunk("b")], idempotency_key="k")["replayed"] is True


def test_unknown_idempotency_class(mem, database):
    before = counts(database)
    with pytest.raises(InvalidArguments):
        mem.upsert_many([chunk("a")], idempotency_key="k", idempotency_class="forever")
    assert counts(database) == before


def test_concurrent_calls_with_one_key_write_once(database):
    stores = [database.store() for _ in range(4)]
    try:
        barrier = threading.Barrier(len(stores))
        results, errors = [], []

        def call(s):
            try:
                barrier.wait()
                results.append(s.bind(Context(tenant="acme", actor="u")).upsert_many(
                    [chunk(f"c{i}", vec(1, i)) for i in range(50)], idempotency_key="same"))
            except Exception as exc:  # noqa: BLE001  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=call, args=(s,)) for s in stores]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        assert sorted(r["replayed"] for r in results) == [False, True, True, True]
        with database.admin() as conn:
            assert conn.execute("select count(*), max(revision) from pymem.memories").fetchone() == (50, 1)
            assert conn.execute("select count(*) from pymem.ledger").fetchone()[0] == 50
    finally:
        for s in stores:
            s.close()


def test_batch_is_atomic_when_the_database_refuses_a_row(store, database):
    scoped = store.bind(Context(tenant="acme", actor="u", scope={"agent": "a1"}))
    before = counts(database)
    with pytest.raises(AccessDenied):  # the second record is outside the context's scope (RLS)
        scoped.upsert_many([chunk("in", vec(1), scope={"agent": "a1"}), chunk("out", vec(1), scope={"agent": "a2"})],
                           idempotency_key="k")
    assert counts(database) == before
    # a record without a scope lands in the context's scope
    scoped.upsert_many([chunk("plain", vec(1))], idempotency_key="k")
    assert scoped.get_row("plain")["scope"] == {"agent": "a1"}


def test_adapter_cannot_overwrite_another_adapters_row(store, database):
    store.bind(Context(tenant="acme", actor="u", adapter="claude")).upsert_many([chunk("a", vec(1))], idempotency_key="k")
    before = counts(database)
    with pytest.raises(AccessDenied):
        store.bind(Context(tenant="acme", actor="u", adapter="codex")).upsert_many(
            [chunk("a", vec(0, 1))], idempotency_key="k2")
    assert counts(database) == before
    operator = store.bind(Context(tenant="acme", actor="op"))
    assert operator.get("a")["embedding"] == vec(1)
    operator.upsert_many([chunk("a", vec(0, 1))], idempotency_key="k")  # the operator may; the row becomes untagged
    assert operator.get_row("a")["source_adapter"] is None and operator.get("a")["revision"] == 2


def test_joins_the_callers_transaction(store, mem):
    with caller_connection(store) as conn, conn.transaction(force_rollback=True):
        mem.upsert_many([chunk("a", vec(1))], idempotency_key="k", conn=conn)
        assert mem.get("a", conn=conn)["revision"] == 1
        assert [h["chunk_id"] for h in mem.search(vec(1), top_k=1, conn=conn)] == ["a"]
    assert mem.get("a") is None


def test_each_write_is_chained(mem, database):
    mem.upsert_many([chunk("a", vec(1)), chunk("b", vec(0, 1))], idempotency_key="k1")
    mem.upsert_many([chunk("a", vec(1, 1))], idempotency_key="k2")
    mem.delete_many(["b"])
    with database.admin() as conn:
        events = conn.execute("select event, memory_id, revision from pymem.ledger order by seq").fetchall()
        problems = conn.execute("select problem from pymem.verify_chain()").fetchall()
    assert events == [("memory.insert", "a", 1), ("memory.insert", "b", 1), ("memory.update", "a", 2),
                      ("memory.delete", "b", 1)]
    assert problems == [(None,)]


# -- search (seed TESTS) ---------------------------------------------------------------------

def test_basic_search(mem):
    mem.upsert_many([chunk("near", vec(1, 0.1), scope={"agent": "a"}),
                     chunk("mid", vec(1, 1), scope={"agent": "a"}),
                     {"id": "far", "embedding": vec(0, 1), "scope": {"agent": "a"}}], idempotency_key="k")
    hits = mem.search(vec(1, 0), top_k=2)
    assert [h["chunk_id"] for h in hits] == ["near", "mid"]
    assert hits[0]["score"] > hits[1]["score"]
    assert hits[0]["score"] == pytest.approx(1 / (1.01 ** 0.5), abs=1e-6)
    assert hits[0]["recalled_view"] == "about near" and hits[0]["revision"] == 1
    assert hits[0]["chunk"] == chunk("near", vec(1, 0.1), scope={"agent": "a"})
    far = mem.search(vec(0, 1), top_k=1)[0]
    assert far["chunk_id"] == "far" and far["recalled_view"] == far["chunk"]  # no distillate: the whole chunk


def test_scope_isolation(mem):
    mem.upsert_many([chunk(f"o{i}", vec(1, 0.01 * i), scope={"agent": "other"}) for i in range(20)]
                    + [chunk(f"m{i}", vec(0.2 * i, 1), scope={"agent": "mine", "team": "t"}) for i in range(5)],
                    idempotency_key="k")
    hits = mem.search(vec(1, 0), top_k=3, scope_filter={"agent": "mine"})
    assert [h["chunk_id"] for h in hits] == ["m4", "m3", "m2"]  # out-of-scope rows score higher, none returned
    assert len(mem.search(vec(1, 0), top_k=10, scope_filter={"agent": "mine"})) == 5
    assert mem.search(vec(1, 0), top_k=3, scope_filter={"agent": "mine", "team": "nope"}) == []


def test_empty(mem, store):
    assert mem.search(vec(1), top_k=5) == []
    mem.upsert_many([chunk("a", vec(1))], idempotency_key="k")
    assert store.bind(Context(tenant="empty-tenant")).search(vec(1), top_k=5) == []


def test_metadata_filter_rejected(mem):
    mem.upsert_many([chunk("a", vec(1))], idempotency_key="k")
    with pytest.raises(InvalidArguments):
        mem.search(vec(1), top_k=1, metadata_filter={"trust_tier": "t2"})
    assert len(mem.search(vec(1), top_k=1, metadata_filter={})) == 1
    assert mem.describe_store()["filterable_metadata_fields"] == []


# -- search: more ----------------------------------------------------------------------------

def test_search_isolation_by_context_scope_and_tenant(store):
    acme = store.bind(Context(tenant="acme", actor="u"))
    acme.upsert_many([chunk("a1", vec(1), scope={"agent": "a"}), chunk("b1", vec(1, 0.1), scope={"agent": "b"})],
                     idempotency_key="k")
    store.bind(Context(tenant="globex")).upsert_many([chunk("g1", vec(1))], idempotency_key="k")
    scoped = store.bind(Context(tenant="acme", scope={"agent": "b"}))
    assert [h["chunk_id"] for h in scoped.search(vec(1), top_k=5)] == ["b1"]
    assert scoped.search(vec(1), top_k=5, scope_filter={"agent": "a"}) == []  # a filter cannot widen RLS
    assert [h["chunk_id"] for h in acme.search(vec(1), top_k=5)] == ["a1", "b1"]


def test_search_include_options(mem):
    mem.upsert_many([chunk("a", vec(1))], idempotency_key="k")
    with mem.store.transaction(mem.ctx) as conn:
        conn.execute("update pymem.memories set invalidated_at = now() where id = 'a'")
    assert mem.search(vec(1), top_k=1) == []  # superseded rows are not recalled by default
    hit = mem.search(vec(1), top_k=1, include={"superseded": True, "embedding": False})[0]
    assert hit["chunk_id"] == "a" and "embedding" not in hit["chunk"] and hit["revision"] == 2
    assert mem.get("a")["embedding"] == vec(1)  # stored verbatim all the same


def test_erased_rows_are_gone_for_every_verb(mem):
    mem.upsert_many([chunk("a", vec(1)), chunk("b", vec(1, 0.5))], idempotency_key="k")
    with mem.store.transaction(mem.ctx) as conn:
        conn.execute("update pymem.memories set erased_at = now(), content = null, record = null, embedding = null"
                     " where id = 'a'")
    assert mem.get("a") is None and mem.get_many(["a", "b"])[0]["id"] == "b"
    assert [h["chunk_id"] for h in mem.search(vec(1), top_k=5)] == ["b"]


def test_rows_written_without_a_record_read_as_a_chunk(mem):
    mem.add([{"id": "legacy", "content": "hello", "embedding": vec(1), "tags": ["x"]}])
    got = mem.get("legacy")
    assert got["id"] == "legacy" and got["content"] == "hello" and got["embedding"] == vec(1)
    assert got["tags"] == ["x"] and got["revision"] == 1
    assert mem.search(vec(1), top_k=1)[0]["chunk"]["content"] == "hello"


# -- get / get_many / delete_many (seed TESTS) -----------------------------------------------------

def test_get_hit(mem):
    record = chunk("a", vec(1), scope={"agent": "x"}, **{"unicode ✓": "日本", "n": [1.5, -2, 10**15]})
    mem.upsert_many([record], idempotency_key="k")
    got = mem.get("a")
    assert got == {**record, "revision": 1}
    assert json.loads(json.dumps(got)) == got


def test_get_absent(mem, store):
    assert mem.get("nope") is None
    mem.upsert_many([chunk("a")], idempotency_key="k")
    assert store.bind(Context(tenant="globex")).get("a") is None  # another tenant's row is absent


def test_get_many(mem):
    mem.upsert_many([chunk("a"), chunk("b"), chunk("c")], idempotency_key="k")
    got = mem.get_many(["c", "absent", "a"])
    assert [r["id"] for r in got] == ["c", "a"]  # found only, in the order asked
    assert got[1] == {**chunk("a"), "revision": 1}
    assert mem.get_many([]) == []
    assert [r["id"] for r in mem.get_many(["a", "a"])] == ["a", "a"]


def test_delete_hit(mem, database):
    mem.upsert_many([chunk("a", vec(1)), chunk("b", vec(1, 0.1))], idempotency_key="k")
    assert mem.delete_many(["a"]) == {"deleted": 1}
    assert mem.get("a") is None and mem.get("b") is not None
    assert [h["chunk_id"] for h in mem.search(vec(1), top_k=5)] == ["b"]
    with database.admin() as conn:
        assert conn.execute("select count(*) from pymem.memories").fetchone()[0] == 1
        assert conn.execute("select live_rows from pymem.chain_heads").fetchone()[0] == 1


def test_delete_absent(mem, database):
    mem.upsert_many([chunk("a")], idempotency_key="k")
    before = counts(database)
    assert mem.delete_many(["nope"]) == {"deleted": 0}
    assert mem.delete_many([]) == {"deleted": 0}
    assert counts(database) == before
    assert mem.delete_many(["a", "a", "nope"]) == {"deleted": 1}


def test_delete_refused_for_another_adapters_rows_is_all_or_nothing(store, database):
    store.bind(Context(tenant="acme", adapter="claude")).upsert_many([chunk("c")], idempotency_key="k")
    codex = store.bind(Context(tenant="acme", adapter="codex"))
    codex.upsert_many([chunk("x")], idempotency_key="k2")
    before = counts(database)
    with pytest.raises(AccessDenied):
        codex.delete_many(["x", "c"])
    assert counts(database) == before
    assert codex.delete_many(["x"]) == {"deleted": 1}


# -- describe_store / health ---------------------------------------------------------------------

def test_describe_store_advertises_only_what_is_implemented(mem):
    caps = mem.describe_store()
    assert caps["optimistic_locking_supported"] is True
    assert caps["filterable_metadata_fields"] == []
    assert caps["relational_edges_supported"] is False
    assert caps["atomic_supersede_supported"] is False
    assert caps["transaction_supported"] is False
    assert caps["embedding_dim"] == DIM and caps["distance"] == "cosine"
    for verb in caps["verbs"]:
        assert callable(getattr(mem, verb))
    for verb in ("add_edge", "scan", "atomic_supersede", "patch"):
        assert not hasattr(mem, verb)
    with pytest.raises(InvalidArguments):  # max_top_k is enforced, not just advertised
        mem.search(vec(1), top_k=caps["max_top_k"] + 1)
    assert set(caps["include_keys"]) == {"embedding", "superseded"}


def test_health(mem):
    report = mem.health()
    assert report["ok"] is True
    assert report["database"]["reachable"] is True and report["database"]["server_version"]
    assert report["pgvector"]["ok"] is True and report["schema"]["current"] is True
    assert report["embedding_dim"] == DIM


def test_health_reports_an_unreachable_database(database):
    s = database.store()
    s.pool.close()
    try:
        report = s.bind(Context(tenant="acme")).health()
    finally:
        s.close()
    assert report["ok"] is False and report["database"]["reachable"] is False


def test_search_sql_functions_run_with_the_callers_rights(database):
    with database.admin() as conn:
        rows = conn.execute("select proname, prosecdef, proconfig from pg_proc"
                            " where proname in ('search', 'search_as') and pronamespace = 'pymem'::regnamespace"
                            " order by proname").fetchall()
    assert [(name, secdef) for name, secdef, _ in rows] == [("search", False), ("search_as", False)]
    config = rows[0][2]
    assert "hnsw.iterative_scan=relaxed_order" in config
    assert any(c.startswith("search_path=") for c in config)


def test_search_sees_nothing_without_a_tenant(mem, database):
    mem.upsert_many([chunk("a", vec(1))], idempotency_key="k")
    with database.app() as conn:
        conn.execute("create temp table q as select %s::text::vector as v", (json.dumps(vec(1)),))
        assert conn.execute("select count(*) from pymem.search((select v from q), 5)").fetchone()[0] == 0
        with pytest.raises(psycopg.errors.InvalidParameterValue):
            conn.execute("select * from pymem.search((select v from q), 0)")


def test_search_as_sets_the_context_for_one_statement(mem, database):
    mem.upsert_many([chunk("a", vec(1)), chunk("b", vec(1, 1), scope={"agent": "x"})], idempotency_key="k")
    q = json.dumps(vec(1))
    with database.app(autocommit=True) as conn:
        rows = conn.execute("select id from pymem.search_as('acme', 'u', null, '{}', null, %s::text::vector, 5)",
                            (q,)).fetchall()
        assert rows == [("a",), ("b",)]
        scoped = conn.execute("select id from pymem.search_as('acme', 'u', null, '{\"agent\": \"x\"}', null,"
                              " %s::text::vector, 5)", (q,)).fetchall()
        assert scoped == [("b",)]
        # autocommit: the context ended with the statement
        assert conn.execute("select count(*) from pymem.memories").fetchone()[0] == 0
        with pytest.raises(psycopg.errors.InvalidParameterValue):
            conn.execute("select * from pymem.search_as('', null, null, '{}', null, %s::text::vector, 5)", (q,))


def test_purge_expired_keys(mem, store, database):
    from pymem.storage import idempotency

    mem.upsert_many([chunk("a")], idempotency_key="old")
    mem.upsert_many([chunk("b")], idempotency_key="new")
    store.bind(Context(tenant="globex")).upsert_many([chunk("g")], idempotency_key="old")
    with database.admin() as conn:
        conn.execute("update pymem.idempotency_keys set expires_at = now() - interval '1 hour' where key = 'old'")
    with store.transaction(mem.ctx) as conn:
        assert idempotency.purge_expired(conn, mem.ctx) == 1  # only this tenant's expired key
    with database.admin() as conn:
        assert conn.execute("select tenant_id, key from pymem.idempotency_keys order by 1, 2").fetchall() == \
            [("acme", "new"), ("globex", "old")]


# -- list_chunks --------------------------------------------------------------------------------------

def test_list_chunks_pages_through_the_visible_chunks_in_id_order(mem, store):
    mem.upsert_many([chunk(f"m{i:02d}", vec(1.0, i)) for i in range(7)], idempotency_key="page")
    mem.delete_many(["m03"])
    store.bind(Context(tenant="someone-else")).upsert_many([chunk("m00", vec(1.0))], idempotency_key="x")
    seen, after = [], None
    while True:
        page = mem.list_chunks(limit=3, after=after)
        seen.extend(page["chunks"])
        after = page["next_after"]
        if after is None:
            break
    assert [c["id"] for c in seen] == ["m00", "m01", "m02", "m04", "m05", "m06"]
    assert all(c["revision"] == 1 and c == {**mem.get(c["id"])} for c in seen)
    assert mem.list_chunks(limit=6)["next_after"] is None
    for bad in (dict(limit=0), dict(limit=1001), dict(limit=True), dict(after=""), dict(after=5)):
        with pytest.raises(InvalidArguments):
            mem.list_chunks(**bad)
