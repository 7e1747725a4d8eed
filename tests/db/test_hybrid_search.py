"""Hybrid search (pymem.search with p_text): BM25 over the database-kept tsvector fused with the
vector ranking, under the caller's row-level security, with a complete top_k.

The attack tests write the same words into every tenant, scope and adapter and search as the
app login and as a bound agent login: the definer that reads the text index
(pymem._text_candidates) and the fused search must never name a row the caller may not read.
"""

from __future__ import annotations

import hashlib
import json

import psycopg
import pytest
from helpers.database import AGENT_LOGIN, DIM, bind_login, login_dsn
from psycopg.types.json import Jsonb

from pymem import Context, EmbedderMismatch, Provenance, admit
from pymem.embedder import LexicalEmbedder

QUERY = [1.0] + [0.0] * (DIM - 1)
TEXT = "zebra lighthouse"


def _insert(conn, tenant, rows, adapter=None):
    """(id, scope, content, first coordinate) rows, written as the app and committed."""
    conn.execute("select pymem.set_context(%s, 'loader', %s, '{}'::jsonb, null)", (tenant, adapter))
    for memory_id, scope, content, x in rows:
        vector = [x] + [0.0] * (DIM - 2) + [1.0]
        conn.execute("insert into pymem.memories (tenant_id, id, scope, content, embedding, source_adapter)"
                     " values (%s, %s, %s, %s, %s::text::vector, %s)",
                     (tenant, memory_id, Jsonb(scope), content, json.dumps(vector), adapter))
    conn.commit()


@pytest.fixture
def seeded(database):
    with database.app() as conn:
        _insert(conn, "acme", [("a-zebra", {"team": "red"}, "The zebra lighthouse keeper", 0.0),
                               ("a-blue", {"team": "blue"}, "A zebra lighthouse in blue", 0.0),
                               ("a-near", {"team": "red"}, "nothing in common", 5.0)]
                + [(f"a-{i}", {"team": "red"}, f"filler note {i}", 1.0) for i in range(12)])
        _insert(conn, "acme", [("a-agent", {"team": "red"}, "zebra lighthouse by the agent", 0.0)], adapter="x")
        _insert(conn, "globex", [("g-zebra", {"team": "red"}, "zebra lighthouse zebra lighthouse", 9.0)])
    return database


def _hybrid(conn, tenant, scope=None, read=None, k=5, scope_filter=None, adapter=None):
    conn.execute("select pymem.set_context(%s, 'reader', %s, %s, %s)", (tenant, adapter, Jsonb(scope or {}), read))
    rows = conn.execute("select id, score from pymem.search(%s::text::vector, %s, %s, p_text => %s)",
                        (json.dumps(QUERY), k, Jsonb(scope_filter or {}), TEXT)).fetchall()
    conn.rollback()
    return [r[0] for r in rows]


def _candidates(conn, tenant, scope=None, read=None, scope_filter=None, adapter=None):
    conn.execute("select pymem.set_context(%s, 'reader', %s, %s, %s)", (tenant, adapter, Jsonb(scope or {}), read))
    rows = conn.execute("select id from pymem._text_candidates(%s, 1000, %s, true)",
                        (TEXT, Jsonb(scope_filter or {}))).fetchall()
    conn.rollback()
    return sorted(r[0] for r in rows)


def test_the_text_ranking_lifts_a_word_match_the_vectors_miss(seeded):
    with seeded.app() as conn:
        conn.execute("select pymem.set_context('acme', 'reader', null, '{}'::jsonb, null)")
        by_vector = [r[0] for r in conn.execute("select id from pymem.search(%s::text::vector, 3)",
                                                (json.dumps(QUERY),)).fetchall()]
        conn.rollback()
        hybrid = _hybrid(conn, "acme", k=3)
    assert "a-zebra" not in by_vector  # its vector points away from the query
    assert hybrid[0] in {"a-zebra", "a-blue", "a-agent"} and {"a-zebra", "a-blue", "a-agent"} <= set(hybrid)


def test_hybrid_returns_a_complete_top_k_when_no_word_matches(seeded):
    with seeded.app() as conn:
        conn.execute("select pymem.set_context('acme', 'reader', null, '{}'::jsonb, null)")
        rows = conn.execute("select id from pymem.search(%s::text::vector, 10, p_text => 'xylophone quartz')",
                            (json.dumps(QUERY),)).fetchall()
    assert len(rows) == 10


def test_text_candidates_name_only_rows_the_context_may_read(seeded):
    with seeded.app() as conn:
        assert _candidates(conn, "acme") == ["a-agent", "a-blue", "a-zebra"]
        assert _candidates(conn, "acme", scope={"team": "red"}) == ["a-agent", "a-zebra"]
        assert _candidates(conn, "acme", scope_filter={"team": "blue"}) == ["a-blue"]
        assert _candidates(conn, "acme", read=["x"]) == ["a-agent"]
        assert _candidates(conn, "acme", read=[]) == []
        assert _candidates(conn, "globex") == ["g-zebra"]
        assert _candidates(conn, "nobody") == []
        conn.execute("select pymem.set_context('acme', 'reader', null, '{}'::jsonb, null)")
        with pytest.raises(psycopg.errors.InvalidParameterValue):
            conn.execute("select * from pymem._text_candidates('zebra', 10, %s, true)", (Jsonb({"team": {"x": 1}}),))
        conn.rollback()
        # no tenant set: nothing, not everything
        assert conn.execute("select count(*) from pymem._text_candidates('zebra', 10, '{}', true)").fetchone()[0] == 0


def test_hybrid_search_never_returns_a_row_outside_tenant_scope_or_allow_list(seeded):
    with seeded.app() as conn:
        assert set(_hybrid(conn, "acme", k=20)) <= {f"a-{i}" for i in range(12)} | {"a-zebra", "a-blue", "a-near", "a-agent"}
        assert "g-zebra" not in _hybrid(conn, "acme", k=20)
        red = _hybrid(conn, "acme", scope={"team": "red"}, k=20)
        assert "a-blue" not in red and "a-zebra" in red
        assert _hybrid(conn, "acme", read=["x"], k=20) == ["a-agent"]
        assert _hybrid(conn, "acme", read=[], k=20) == []
        assert _hybrid(conn, "globex", k=20) == ["g-zebra"]
    # a login bound to adapter x, tenant acme and scope team=red: its own binding bounds the search
    bind_login(seeded, AGENT_LOGIN, adapter="x", tenants=["acme"], scope={"team": "red"})
    with psycopg.connect(login_dsn(seeded, AGENT_LOGIN)) as conn:
        found = _hybrid(conn, "acme", scope={"team": "red"}, adapter="x", k=20)
        assert found and "a-blue" not in found and "g-zebra" not in found
        # a context scope wider than the binding's is refused; a filter cannot widen it either
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="bound to scope"):
            _hybrid(conn, "acme", adapter="x", k=20)
        conn.rollback()
        assert _hybrid(conn, "acme", scope={"team": "red"}, scope_filter={"team": "blue"}, adapter="x") == []
        assert _candidates(conn, "acme", scope={"team": "red"}, scope_filter={"team": "blue"}, adapter="x") == []
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="not bound to tenant globex"):
            _hybrid(conn, "globex", adapter="x", k=20)


def test_search_text_is_the_databases(seeded):
    with seeded.app() as conn:
        conn.execute("select pymem.set_context('acme', 'w', null, '{}'::jsonb, null)")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("update pymem.memories set search_text = 'forged' where id = 'a-near'")
        conn.rollback()
        conn.execute("select pymem.set_context('acme', 'w', null, '{}'::jsonb, null)")
        conn.execute("update pymem.memories set content = 'a zebra lighthouse after all' where id = 'a-near'")
        conn.commit()
        assert "a-near" in _candidates(conn, "acme")


def test_the_store_refuses_a_second_embedder_and_writes_nothing(database):
    store = database.store()
    try:
        acme = store.bind(Context(tenant="acme", actor="u"))
        prov = Provenance(origin="user_asserted", source="chat")
        admit(acme, "Alice likes green tea", prov, embedder=LexicalEmbedder(DIM))
        assert store.embedder.recorded == "lexical-hash-v1"

        class Other(LexicalEmbedder):
            name = "some-other-model"

        with pytest.raises(EmbedderMismatch, match=r"lexical-hash-v1.*some-other-model.*pymem\.reembed"):
            admit(acme, "Bob likes coffee", prov, embedder=Other(DIM))
        from pymem import recall
        with pytest.raises(EmbedderMismatch):
            recall(acme, "tea", embedder=Other(DIM))
        assert [c["content"] for c in acme.list_chunks()["chunks"]] == ["Alice likes green tea"]
        # another process opening the store reads the record, and its default is the store's embedder
        again = database.store()
        try:
            assert again.embedder.recorded == "lexical-hash-v1"
            assert again.text_embedder().name == "lexical-hash-v1"
        finally:
            again.close()
    finally:
        store.close()


def _session_search(conn, fn, session, k=3, read=None, adapter=None, scope=None):
    conn.execute("select pymem.set_context('acme', 'reader', %s, %s, %s)", (adapter, Jsonb(scope or {}), read))
    if fn == "hybrid":
        rows = conn.execute("select id from pymem.session_search_hybrid(%s, %s::text::vector, %s, %s)",
                            (session, json.dumps(QUERY), TEXT, k)).fetchall()
    else:
        rows = conn.execute("select id from pymem.session_search(%s, %s::text::vector, %s)",
                            (session, json.dumps(QUERY), k)).fetchall()
    conn.rollback()
    return [r[0] for r in rows]


def test_a_sessions_hybrid_search_lifts_word_matches_and_keeps_to_what_the_session_receives(seeded):
    with seeded.app() as conn:
        conn.execute("select pymem.set_context('acme', 'loader', null, '{}'::jsonb, null)")
        conn.execute("insert into pymem.sessions (tenant_id, id, scope, surface) values ('acme', 's-red', %s, 'api')",
                     (Jsonb({"team": "red"}),))
        conn.commit()
        by_vector = _session_search(conn, "vector", "s-red")
        hybrid = _session_search(conn, "hybrid", "s-red")
        every = _session_search(conn, "hybrid", "s-red", k=1000)
        # the allow-list applies too: a context reading adapter x only cannot see the (untagged) session
        allowed = _session_search(conn, "hybrid", "s-red", k=1000, read=["x"])
    assert "a-zebra" not in by_vector  # its vector points away from the query
    assert {"a-zebra", "a-agent"} <= set(hybrid) and hybrid[0] in {"a-zebra", "a-agent"}
    # a sibling scope's word match (team blue) and another tenant's are never named
    assert "a-blue" not in every and "g-zebra" not in every
    assert set(every) == {"a-zebra", "a-near", "a-agent"} | {f"a-{i}" for i in range(12)}
    assert allowed == []


def test_a_bound_agent_cannot_reach_a_sibling_scope_through_the_sessions_hybrid_search(seeded):
    with seeded.app() as conn:
        conn.execute("select pymem.set_context('acme', 'loader', null, '{}'::jsonb, null)")
        conn.execute("insert into pymem.sessions (tenant_id, id, scope, surface) values ('acme', 's-blue', %s, 'api')",
                     (Jsonb({"team": "blue"}),))
        conn.commit()
    bind_login(seeded, AGENT_LOGIN, adapter="x", tenants=["acme"], scope={"team": "red"})
    with psycopg.connect(login_dsn(seeded, AGENT_LOGIN)) as agent:
        # the blue session is outside the login's bound scope: nothing, not the blue row
        assert _session_search(agent, "hybrid", "s-blue", k=1000, adapter="x", scope={"team": "red"}) == []


def _vector_ranking(conn, tenant, plan, scope=None, read=None, scope_filter=None, adapter=None):
    conn.execute("select pymem.set_context(%s, 'reader', %s, %s, %s)", (tenant, adapter, Jsonb(scope or {}), read))
    rows = conn.execute("select id from pymem._vector_ranking(%s::text::vector, 1000, %s, true, %s, 2000, null, 20000)",
                        (json.dumps(QUERY), Jsonb(scope_filter or {}), plan)).fetchall()
    conn.rollback()
    return sorted(r[0] for r in rows)


def test_the_vector_ranking_a_hybrid_search_fuses_names_only_rows_the_context_may_read(seeded):
    """pymem._vector_ranking (ids and distances, no rows) runs as its caller: row-level security
    decides what it ranks, whichever plan it takes, as for pymem.search."""
    acme = {f"a-{i}" for i in range(12)} | {"a-zebra", "a-blue", "a-near", "a-agent"}
    red = acme - {"a-blue"}
    with seeded.app() as conn:
        for plan in ("exact", "hnsw"):
            assert set(_vector_ranking(conn, "acme", plan)) == acme
            assert set(_vector_ranking(conn, "acme", plan, scope={"team": "red"})) == red
            assert _vector_ranking(conn, "acme", plan, scope_filter={"team": "blue"}) == ["a-blue"]
            assert _vector_ranking(conn, "acme", plan, read=["x"]) == ["a-agent"]
            assert _vector_ranking(conn, "acme", plan, read=[]) == []
            assert _vector_ranking(conn, "globex", plan) == ["g-zebra"]
            assert _vector_ranking(conn, "nobody", plan) == []
        # no tenant set: nothing, not everything
        assert conn.execute("select count(*) from pymem._vector_ranking(%s::text::vector, 10, '{}', true, 'exact',"
                            " 2000, null, 20000)", (json.dumps(QUERY),)).fetchone()[0] == 0
    bind_login(seeded, AGENT_LOGIN, adapter="x", tenants=["acme"], scope={"team": "red"})
    with psycopg.connect(login_dsn(seeded, AGENT_LOGIN)) as agent:
        found = _vector_ranking(agent, "acme", "exact", scope={"team": "red"}, adapter="x")
        assert found and set(found) <= red
        assert _vector_ranking(agent, "acme", "exact", scope={"team": "red"}, scope_filter={"team": "blue"},
                               adapter="x") == []
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="not bound to tenant globex"):
            _vector_ranking(agent, "globex", "exact", adapter="x")


def test_no_login_ranks_scopes_of_its_own_choosing_through_the_session_ranking(seeded):
    """pymem._session_ranking ranks the scopes it is given: only the session search functions,
    which take them from the session, run it. The app login and a bound agent asking it for a
    sibling scope's rows are refused, and nothing is returned."""
    bind_login(seeded, AGENT_LOGIN, adapter="x", tenants=["acme"], scope={"team": "red"})
    blue = Jsonb({"team": "blue"})
    for connect, adapter in ((seeded.app, None), (lambda: psycopg.connect(login_dsn(seeded, AGENT_LOGIN)), "x")):
        with connect() as conn:
            conn.execute("select pymem.set_context('acme', 'reader', %s, %s, null)", (adapter, Jsonb({"team": "red"})))
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute("select id from pymem._session_ranking(array[%s::jsonb], array[sha256(%s::text::bytea)],"
                             " 100, %s::text::vector, 10, 'exact', 2000)", (blue, blue, json.dumps(QUERY)))


# BM25 as the hybrid search defined it when it was introduced: every matched row's whole tsvector
# unnested. pymem._text_candidates now reads only the query's postings of each row; the ranking
# and the scores must be the same.
_BM25_REFERENCE = """
with terms as (
  select array_agg(u.lexeme) as t
    from (select u.lexeme from unnest(to_tsvector('english', %(text)s)) u limit 64) u),
matched as (
  select m.id, m.search_text from pymem.memories m, terms
   where m.tenant_id = %(tenant)s and m.erased_at is null and m.invalidated_at is null
     and m.embedding is not null and tsvector_to_array(m.search_text) && terms.t),
lengths as (select avg(length(x.search_text))::double precision as avgdl from matched x),
hits as (
  select x.id, u.lexeme, coalesce(cardinality(u.positions), 1) as tf, length(x.search_text) as dl
    from matched x cross join lateral unnest(x.search_text) u, terms where u.lexeme = any (terms.t)),
df as (select h.lexeme, count(*)::double precision as n from hits h group by h.lexeme),
rows_in_play as (select h.live_rows::double precision as n from pymem.chain_heads h where h.tenant_id = %(tenant)s)
select h.id,
       sum(ln(1 + (greatest(r.n, d.n) - d.n + 0.5) / (d.n + 0.5))
           * h.tf * 2.2 / (h.tf + 1.2 * (0.25 + 0.75 * h.dl / greatest(l.avgdl, 1))))::double precision
  from hits h join df d on d.lexeme = h.lexeme cross join lengths l cross join rows_in_play r
 group by h.id
 order by 2 desc, 1
"""


@pytest.mark.parametrize("text", [TEXT, "zebra", "the keeper of a zebra lighthouse, zebra!", "filler note 3 zebra"])
def test_text_candidates_score_bm25_as_unnesting_every_matched_row_does(seeded, text):
    with seeded.app() as conn:
        _insert(conn, "acme", [("a-twice", {"team": "red"}, "zebra zebra zebra lighthouse, a zebra note", 2.0),
                               ("a-long", {"team": "red"}, " ".join(f"word{i}" for i in range(60)) + " zebra", 3.0)])
        conn.execute("select pymem.set_context('acme', 'reader', null, '{}'::jsonb, null)")
        expected = conn.execute(_BM25_REFERENCE, {"text": text, "tenant": "acme"}).fetchall()
        got = conn.execute("select id, score from pymem._text_candidates(%s, 1000, '{}', false)", (text,)).fetchall()
        conn.rollback()
    assert [r[0] for r in got] == [r[0] for r in expected] and len(got) >= 3
    assert [r[1] for r in got] == pytest.approx([r[1] for r in expected], rel=1e-12)


def test_search_text_stays_in_the_row_beside_a_vector(seeded):
    """A row holding a 384-dimension vector passes the TOAST threshold; its search_text must stay
    in the row (storage main), or every text candidate reads it back from the TOAST table."""
    with seeded.app() as conn:
        if conn.info.server_version < 170000:
            pytest.skip("pg_column_toast_chunk_id needs PostgreSQL 17")
        # 150 distinct made-up words: a tsvector of about 2 kB that compresses badly
        words = " ".join("".join("bdfgklmnprstvz"[b % 14] + "aeiou"[b // 14 % 5] for b in hashlib.sha256(b"%d" % i).digest()[:4])
                         for i in range(150))
        _insert(conn, "acme", [("a-wordy", {"team": "red"}, words, 4.0)])
        conn.execute("select pymem.set_context('acme', 'reader', null, '{}'::jsonb, null)")
        row = conn.execute("select length(search_text), pg_column_toast_chunk_id(search_text) is null"
                           " from pymem.memories where id = 'a-wordy'").fetchone()
        conn.rollback()
    assert row[0] > 140 and row[1]


@pytest.mark.parametrize("bad", [
    {"query": [0.0] * DIM},
    {"plan": "fastest"},
    {"scope_filter": {"team": {"x": 1}}},
])
def test_the_private_hybrid_search_refuses_what_pymem_search_refuses(seeded, bad):
    """pymem._search_hybrid is callable by the app: its vector ranking checks its arguments as
    pymem.search does, with the same typed error, rather than ranking nonsense."""
    query = bad.get("query", QUERY)
    with seeded.app() as conn:
        conn.execute("select pymem.set_context('acme', 'reader', null, '{}'::jsonb, null)")
        with pytest.raises(psycopg.errors.InvalidParameterValue):
            conn.execute("select id from pymem._search_hybrid(%s::text::vector, %s, %s, %s, false, false, %s, 2000,"
                         " null, 20000, 1.0, 10)",
                         (json.dumps(query), TEXT, bad.get("k", 5), Jsonb(bad.get("scope_filter", {})),
                          bad.get("plan", "auto"))).fetchall()
