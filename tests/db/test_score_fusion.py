"""Hybrid search fused by score (pymem.search / pymem.session_search_hybrid with p_rrf_k NULL):
a memory scores its cosine similarity plus the text weight times its share of the query's best
BM25 score, comes back with that score, in that order, and recall's and deliver's floor apply to
it. An embedder that names a `text_weight` gets this fusion from the library; any other keeps
reciprocal-rank fusion."""

from __future__ import annotations

import json
import math

import pytest
from helpers.database import DIM
from helpers.delivery import DEFAULTS, EMBEDDER, remember
from psycopg.types.json import Jsonb

from pymem import Context, deliver, recall, start_session
from pymem.embedder import RANK_FUSION, E5SmallEmbedder, LexicalEmbedder, hybrid_fusion_of
from pymem.recall import recall_session

QUERY = [1.0] + [0.0] * (DIM - 1)
TEXT = "zebra lighthouse"


class WeightedLexical(LexicalEmbedder):
    """The lexical embedder (same name, so the store takes it) naming a text weight."""

    text_weight = 0.5


def test_the_fusion_follows_the_embedder():
    assert hybrid_fusion_of(E5SmallEmbedder()) == (E5SmallEmbedder.text_weight, None)
    assert hybrid_fusion_of(WeightedLexical(DIM)) == (0.5, None)
    assert hybrid_fusion_of(LexicalEmbedder(DIM)) == RANK_FUSION == (1.0, 10.0)
    assert hybrid_fusion_of(None) == RANK_FUSION
    for bad in (-0.1, math.nan, math.inf, True, "0.1"):
        odd = LexicalEmbedder(DIM)
        odd.text_weight = bad  # type: ignore[attr-defined]  # an embedder naming a weight it cannot have
        assert hybrid_fusion_of(odd) == RANK_FUSION


@pytest.fixture
def seeded(database):
    """acme: two word matches pointing away from the query, one near miss, fillers."""
    with database.app() as conn:
        conn.execute("select pymem.set_context('acme', 'loader', null, '{}'::jsonb, null)")
        rows = [("a-zebra", "The zebra lighthouse keeper", 0.0), ("a-half", "a lighthouse", 0.5),
                ("a-near", "nothing in common", 5.0)] + [(f"a-{i}", f"filler note {i}", 1.0) for i in range(12)]
        for memory_id, content, x in rows:
            vector = [x] + [0.0] * (DIM - 2) + [1.0]
            conn.execute("insert into pymem.memories (tenant_id, id, content, embedding) values ('acme', %s, %s,"
                         " %s::text::vector)", (memory_id, content, json.dumps(vector)))
        conn.commit()
    return database


def _search(conn, k, weight, rank_constant, text=TEXT):
    conn.execute("select pymem.set_context('acme', 'reader', null, '{}'::jsonb, null)")
    rows = conn.execute("select id, score from pymem.search(%s::text::vector, %s, p_text => %s,"
                        " p_text_weight => %s, p_rrf_k => %s)",
                        (json.dumps(QUERY), k, text, weight, rank_constant)).fetchall()
    cosines = dict(conn.execute("select id, 1 - (embedding <=> %s::text::vector) from pymem.memories",
                                (json.dumps(QUERY),)).fetchall())
    words = dict(conn.execute("select id, score from pymem._text_candidates(%s, 1000, '{}'::jsonb, false)",
                              (text,)).fetchall())
    conn.rollback()
    return rows, cosines, words


def test_fused_by_score_each_hit_scores_its_cosine_plus_its_share_of_the_best_word_match(seeded):
    with seeded.app() as conn:
        rows, cosines, words = _search(conn, 15, 2.0, None)
    best = max(words.values())
    assert set(words) == {"a-zebra", "a-half"} and words["a-zebra"] == best
    expected = {i: cosines[i] + 2.0 * words.get(i, 0.0) / best for i in cosines}
    assert [r[0] for r in rows] == sorted(expected, key=lambda i: (-expected[i], i))
    assert all(score == pytest.approx(expected[i]) for i, score in rows)
    # the best word match gains the whole weight; a memory matching no word keeps its cosine
    assert dict(rows)["a-zebra"] == pytest.approx(cosines["a-zebra"] + 2.0)
    assert dict(rows)["a-near"] == pytest.approx(cosines["a-near"])
    assert rows[0][0] == "a-zebra"


def test_fused_by_score_a_small_weight_only_breaks_near_ties_and_zero_is_the_vector_ranking(seeded):
    with seeded.app() as conn:
        small, cosines, _ = _search(conn, 3, 0.01, None)
        none, _, _ = _search(conn, 15, 0.0, None)
        conn.execute("select pymem.set_context('acme', 'reader', null, '{}'::jsonb, null)")
        by_vector = [r[0] for r in conn.execute(
            "select id from pymem.search(%s::text::vector, 15)", (json.dumps(QUERY),)).fetchall()]
        conn.rollback()
    assert "a-zebra" not in [r[0] for r in small]  # its vector points away: 0.01 cannot lift it
    assert [r[0] for r in none] == by_vector
    assert all(score == pytest.approx(cosines[i]) for i, score in none)


def test_fused_by_score_the_top_k_is_complete_when_no_word_matches(seeded):
    with seeded.app() as conn:
        rows, cosines, words = _search(conn, 10, 0.5, None, text="xylophone quartz")
    assert words == {} and len(rows) == 10
    assert all(score == pytest.approx(cosines[i]) for i, score in rows)


def test_rank_fusion_is_unchanged_and_scores_stay_cosines(seeded):
    with seeded.app() as conn:
        rows, cosines, _ = _search(conn, 15, 1.0, 10.0)
    assert all(score == pytest.approx(cosines[i]) for i, score in rows)
    assert rows[0][0] == "a-zebra"  # text rank 1 and a middling vector rank beat the nearest vector


def test_fused_by_score_a_bad_weight_is_refused(seeded):
    import psycopg

    with seeded.app() as conn:
        conn.execute("select pymem.set_context('acme', 'reader', null, '{}'::jsonb, null)")
        for weight, rank_constant in ((-1.0, None), (None, None), (float("inf"), None), (1.0, -1.0)):
            with pytest.raises(psycopg.errors.InvalidParameterValue, match="text weight"):
                conn.execute("select * from pymem.search(%s::text::vector, 5, p_text => 'zebra',"
                             " p_text_weight => %s, p_rrf_k => %s)", (json.dumps(QUERY), weight, rank_constant))
            conn.rollback()
            conn.execute("select pymem.set_context('acme', 'reader', null, '{}'::jsonb, null)")


# -- through the library: recall and deliver take the embedder's fusion, and the floor applies to the fused score

@pytest.fixture
def acme(store):
    return store.bind(Context(tenant="acme", actor="u"))


def _cosine(a: str, b: str) -> float:
    u, v = EMBEDDER.embed([a])[0], EMBEDDER.embed([b])[0]
    return sum(x * y for x, y in zip(u, v, strict=True))


def test_the_floor_applies_to_the_fused_score_in_recall_and_deliver(acme):
    start_session(acme, "s", "chat")
    target = remember(acme, "The quarterly Initech audit moved to Thursday afternoon.", session="s")
    for text in ("Dave's desk is on the third floor.", "The user prefers oat milk in coffee.",
                 "Globex ships the hardware in March."):
        remember(acme, text, session="s")
    query = "When is the Initech audit?"
    cosine = _cosine(query, "The quarterly Initech audit moved to Thursday afternoon.")
    floor = cosine + 0.25  # above its cosine, below its cosine + the weighted embedder's 0.5
    weighted = dict(DEFAULTS, embedder=WeightedLexical(DIM))
    # rank fusion (the plain lexical embedder names no weight): the floor cuts it on its cosine
    assert target not in [k.id for k in recall(acme, query, floor=floor, **DEFAULTS).kept]
    assert target not in [i.id for i in deliver(acme, "s", query, floor=floor, **DEFAULTS).items]
    # score fusion: the best word match gains 0.5 and clears the floor, with that score
    kept = {k.id: k.score for k in recall(acme, query, floor=floor, **weighted).kept}
    assert target in kept and kept[target] == pytest.approx(cosine + 0.5)
    in_session = recall_session(acme, "s", query, floor=floor, **weighted).kept
    assert in_session and in_session[0].id == target and in_session[0].score == pytest.approx(cosine + 0.5)
    delivered = deliver(acme, "s", query, floor=floor, **weighted)
    assert delivered.items and delivered.items[0].id == target
    # a query none of whose words any memory holds gains nothing: the floor still abstains
    assert recall(acme, "zebra xylophone quartz", floor=floor, **weighted).kept == []


def test_hybrid_search_fused_by_score_never_returns_a_row_outside_tenant_or_scope(database):
    with database.app() as conn:
        for tenant, memory_id, scope in (("acme", "a-red", {"team": "red"}), ("acme", "a-blue", {"team": "blue"}),
                                          ("globex", "g-red", {"team": "red"})):
            conn.execute("select pymem.set_context(%s, 'loader', null, '{}'::jsonb, null)", (tenant,))
            conn.execute("insert into pymem.memories (tenant_id, id, scope, content, embedding) values (%s, %s, %s,"
                         " 'zebra lighthouse', %s::text::vector)",
                         (tenant, memory_id, Jsonb(scope), json.dumps(QUERY)))
        conn.commit()
        found = {}
        for tenant, scope in (("acme", {}), ("acme", {"team": "red"}), ("globex", {})):
            conn.execute("select pymem.set_context(%s, 'reader', null, %s, null)", (tenant, Jsonb(scope)))
            found[tenant, json.dumps(scope)] = sorted(r[0] for r in conn.execute(
                "select id from pymem.search(%s::text::vector, 10, p_text => %s, p_text_weight => 1.0,"
                " p_rrf_k => null)", (json.dumps(QUERY), TEXT)).fetchall())
            conn.rollback()
    assert found == {("acme", "{}"): ["a-blue", "a-red"], ("acme", '{"team": "red"}'): ["a-red"],
                     ("globex", "{}"): ["g-red"]}


def _fused_reference(cosines, words, k, weight, rank_constant, pool):
    """The fusion as defined over the two rankings, each cut at `pool`: by score (rank_constant
    None) or by reciprocal rank; (id, score) pairs in fused order."""
    by_vector = sorted(cosines, key=lambda i: (-cosines[i], i))[:pool]
    by_text = sorted(words, key=lambda i: (-words[i], i))[:pool]
    best = max(words.values(), default=0.0)
    vrank = {i: n for n, i in enumerate(by_vector, 1)}
    trank = {i: n for n, i in enumerate(by_text, 1)}
    key = {}
    for i in set(by_vector) | set(by_text):
        if rank_constant is None:
            key[i] = cosines[i] + weight * (words[i] / best if i in trank else 0.0)
        else:
            key[i] = (1 / (rank_constant + vrank[i]) if i in vrank else 0.0) + \
                weight * (1 / (rank_constant + trank[i]) if i in trank else 0.0)
    order = sorted(key, key=lambda i: (-key[i], i))[:k]
    return [(i, key[i] if rank_constant is None else cosines[i]) for i in order]


@pytest.mark.parametrize("rank_constant", [None, 10.0])
def test_a_word_match_outside_the_vector_pool_is_fused_with_its_own_cosine(database, rank_constant):
    """With more rows than the vector ranking's pool (top_k 5: 50 rows), word matches far from the
    query are candidates by their words alone. Their cosine is read by their key; they score and
    rank as the fusion defines over both rankings, in pymem.search and in a session's hybrid search."""
    with database.app() as conn:
        conn.execute("select pymem.set_context('acme', 'loader', null, '{}'::jsonb, null)")
        rows = [(f"a-{i:02d}", f"filler note {i}", [1.0, 0.01 * i]) for i in range(70)]
        rows += [("a-zebra", "The zebra lighthouse keeper", [0.0, 0.0]), ("a-half", "a lighthouse", [0.3, 0.0]),
                 ("a-far", "zebra zebra crossing", [0.1, 0.0])]
        for memory_id, content, head in rows:
            vector = head + [0.0] * (DIM - 3) + [1.0 if head == [0.0, 0.0] else 0.2]
            conn.execute("insert into pymem.memories (tenant_id, id, content, embedding) values ('acme', %s, %s,"
                         " %s::text::vector)", (memory_id, content, json.dumps(vector)))
        conn.execute("insert into pymem.sessions (tenant_id, id, scope, surface) values ('acme', 's', '{}', 'api')")
        conn.commit()
        conn.execute("select pymem.set_context('acme', 'reader', null, '{}'::jsonb, null)")
        cosines = dict(conn.execute("select id, 1 - (embedding <=> %s::text::vector) from pymem.memories",
                                    (json.dumps(QUERY),)).fetchall())
        words = dict(conn.execute("select id, score from pymem._text_candidates(%s, 1000, '{}'::jsonb, false)",
                                  (TEXT,)).fetchall())
        searched = conn.execute("select id, score from pymem.search(%s::text::vector, 5, p_text => %s,"
                                " p_text_weight => 2.0, p_rrf_k => %s)",
                                (json.dumps(QUERY), TEXT, rank_constant)).fetchall()
        in_session = conn.execute("select id, score from pymem.session_search_hybrid('s', %s::text::vector, %s, 5,"
                                  " p_text_weight => 2.0, p_rrf_k => %s)",
                                  (json.dumps(QUERY), TEXT, rank_constant)).fetchall()
        conn.rollback()
    by_vector = sorted(cosines, key=lambda i: (-cosines[i], i))[:50]
    assert {"a-zebra", "a-half", "a-far"} <= set(words) and not {"a-zebra", "a-half", "a-far"} & set(by_vector)
    expected = _fused_reference(cosines, words, 5, 2.0, rank_constant, 50)
    assert "a-zebra" in [i for i, _ in expected]  # found by its words alone, and in the top 5
    for got in (searched, in_session):
        assert [i for i, _ in got] == [i for i, _ in expected]
        assert [s for _, s in got] == pytest.approx([s for _, s in expected], rel=1e-12)
