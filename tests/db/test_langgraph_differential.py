"""Differential conformance: one random sequence of LangGraph store operations, applied to
LangGraph's own InMemoryStore and to PymemStore, gives the same results: the items a get
returns, the items and their order a search without a query returns, the namespaces a listing
returns, and for a search with a query the same items ranked the same (scores aside: pgvector
computes them in float4; tied scores may come back in either order).

The reference is InMemoryStore with two normalisations, the deviations this test found:

- a namespace in PymemStore exists while it holds an item, whereas InMemoryStore keeps every
  namespace it has ever touched (a get of a missing item, a delete, a namespace whose items were
  all deleted), lists it and keeps its place in the order of a search. The reference forgets
  namespaces left empty after each operation;
- InMemoryStore fails a batch that puts two items with the same text to embed (it embeds each
  distinct text once, then finds fewer vectors than items); the reference applies such a batch
  in runs that do not repeat a text, which is what the one batch means;
- an item updated with index=False keeps its old vector in InMemoryStore (it is still ranked by
  the text it no longer has); in PymemStore the update removes it, as LangGraph documents
  index=False ("won't have a vector representation"). The reference drops the stale vector.

Operations cover nested namespaces, puts, updates, deletes (put of None), batches, filters with
every operator on fields of every JSON type, query searches (with items put unindexed), offsets
and limits, listings with prefix and suffix conditions, "*" wildcards and max_depth. The values
avoid the cases InMemoryStore leaves undefined or decides in Python's terms rather than JSON's
(a range operator on a string or a missing field raises there; True == 1 there): those are
pinned by test_langgraph_store.py instead.
"""

from __future__ import annotations

import uuid

import pytest
from helpers.graph_store import cosine, index, text_vector
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.store.base import GetOp, ListNamespacesOp, MatchCondition, PutOp, SearchOp
from langgraph.store.memory import InMemoryStore

from pymem.context import Context
from pymem.langgraph import PymemStore


class Reference(InMemoryStore):
    """InMemoryStore whose namespaces exist while they hold items. Each read runs on its own
    (reads see the store as it was before the batch either way), so a get of a missing item
    cannot make a namespace appear to a listing in the same batch."""

    def batch(self, ops):
        ops = list(ops)
        results = [None] * len(ops)
        for i, op in enumerate(ops):
            if not isinstance(op, PutOp):
                results[i] = super().batch([op])[0]
                self._forget_empty()
        # The batch's writes: the last write to an item wins, in the place of its first. They
        # go in runs without a repeated text: InMemoryStore embeds each distinct text once and
        # then fails the batch (ValueError: "Number of embeddings (1) does not match number of
        # indices (2)") when two items of one batch share a text.
        last = {}
        for op in ops:
            if isinstance(op, PutOp):
                last[(op.namespace, op.key)] = op
        run, texts = [], set()
        for op in last.values():
            text = op.value["text"] if op.value is not None and op.index is not False else None
            if text in texts:
                super().batch(run)
                run, texts = [], set()
            run.append(op)
            if text is not None:
                texts.add(text)
        if run:
            super().batch(run)
        for op in last.values():
            if op.value is not None and op.index is False:
                self._vectors[op.namespace].pop(op.key, None)
        self._forget_empty()
        return results

    def _forget_empty(self):
        for namespace in [n for n, items in self._data.items() if not items]:
            del self._data[namespace]
            self._vectors.pop(namespace, None)


LABELS = ["a", "b"]
namespaces = st.lists(st.sampled_from(LABELS), min_size=1, max_size=3).map(tuple)
prefixes = st.one_of(st.just(()), st.lists(st.sampled_from(LABELS), min_size=1, max_size=3).map(tuple))
patterns = st.lists(st.sampled_from([*LABELS, "*"]), min_size=0, max_size=3).map(tuple)
keys = st.sampled_from(["k1", "k2", "k3", "k4"])
TEXTS = ["likes tea", "likes coffee", "prefers dark mode", "lives in Lyon", "has a cat", "works nights"]
NUMBERS = [-2, 0, 1, 1.0, 1.5, 9, 10, 100]
STRINGS = ["", "a", "b", "ab", "9", "10"]


@st.composite
def values(draw):
    value = {
        "text": draw(st.sampled_from(TEXTS)),
        "n": draw(st.sampled_from(NUMBERS)),
        "s": draw(st.sampled_from(STRINGS)),
        "b": draw(st.booleans()),
        "o": {"x": draw(st.sampled_from([0, 1, 2])), "tags": draw(st.lists(st.sampled_from(["a", "b"]), max_size=2))},
    }
    mixed = draw(st.sampled_from(["missing", None, 1, 10, "a", "10"]))
    if mixed != "missing":
        value["m"] = mixed
    return value


RANGE = ["$gt", "$gte", "$lt", "$lte"]
field_filters = st.one_of(
    st.tuples(st.just("n"), st.sampled_from(NUMBERS)),
    st.tuples(st.just("n"), st.dictionaries(st.sampled_from([*RANGE, "$eq", "$ne"]), st.sampled_from(NUMBERS),
                                            min_size=1, max_size=2)),
    st.tuples(st.just("s"), st.sampled_from(STRINGS)),
    st.tuples(st.just("s"), st.dictionaries(st.sampled_from(["$eq", "$ne"]), st.sampled_from(STRINGS), min_size=1)),
    st.tuples(st.just("b"), st.booleans()),
    st.tuples(st.just("b"), st.dictionaries(st.sampled_from(["$eq", "$ne"]), st.booleans(), min_size=1)),
    st.tuples(st.just("m"), st.sampled_from([None, 1, 10, "a", "10"])),
    st.tuples(st.just("m"), st.dictionaries(st.sampled_from(["$eq", "$ne"]), st.sampled_from([None, 1, "a"]),
                                            min_size=1)),
    st.tuples(st.just("o"), st.sampled_from([{}, {"x": 1}, {"tags": []}, {"tags": ["a"]}, {"x": 0, "tags": ["a", "b"]},
                                             {"x": {"$gte": 1}}])),
    st.tuples(st.just("o"), st.dictionaries(st.just("$eq"), st.sampled_from([{"x": 1, "tags": []}]), min_size=1)),
    st.tuples(st.just("text"), st.sampled_from(TEXTS)),
)
filters = st.one_of(st.none(), st.lists(field_filters, min_size=1, max_size=1).map(dict),
                    st.lists(field_filters, min_size=2, max_size=2).map(dict))

puts = st.builds(lambda n, k, v, i: PutOp(n, k, v, index=i), namespaces, keys, values(),
                 st.sampled_from([None, None, None, False]))
deletes = st.builds(lambda n, k: PutOp(n, k, None), namespaces, keys)
gets = st.builds(GetOp, namespaces, keys)
searches = st.builds(
    lambda p, f, limit, offset, q: SearchOp(p, f, limit, offset, q),
    prefixes, filters, st.integers(0, 6), st.sampled_from([0, 0, 0, 1, 2, 4]),
    st.one_of(st.none(), st.sampled_from(TEXTS)))
listings = st.builds(
    lambda p, s, d, limit, offset: ListNamespacesOp(
        tuple(c for c in (MatchCondition("prefix", p) if p else None, MatchCondition("suffix", s) if s else None) if c),
        d, limit, offset),
    patterns, patterns, st.one_of(st.none(), st.integers(1, 3)), st.integers(0, 8), st.integers(0, 3))
operations = st.one_of(puts, puts, deletes, gets, searches, searches, searches, listings)
# A few items first, one put at a time and in a batch, then anything.
steps = st.tuples(
    st.lists(puts.map(lambda op: [op]), min_size=1, max_size=6),
    st.lists(puts, min_size=8, max_size=16),
    st.lists(st.one_of(operations.map(lambda op: [op]), st.lists(operations, min_size=2, max_size=4)),
             min_size=1, max_size=25),
).map(lambda parts: parts[0] + ([parts[1]] if parts[1] else []) + parts[2])


def _items(result):
    return [(tuple(i.namespace), i.key, i.value) for i in result]


def _assert_same(op, mine, ref, texts):
    if isinstance(op, GetOp):
        assert (mine is None) == (ref is None), op
        if ref is not None:
            assert _items([mine]) == _items([ref]), op
    elif isinstance(op, ListNamespacesOp):
        assert mine == ref, op
    elif isinstance(op, SearchOp) and op.query is None:
        assert _items(mine) == _items(ref), op
    elif isinstance(op, SearchOp):
        # Ranked items first, then unranked ones in order. Ranked: the same reference score at
        # every place (so ties may swap), and the same items as the reference wherever no other
        # item of the store has the same text (the same score).
        q = text_vector(op.query)
        assert len(mine) == len(ref), op
        assert [i.score is None for i in mine] == [i.score is None for i in ref], op
        ranked_ref = [i for i in ref if i.score is not None]
        ranked_mine = [i for i in mine if i.score is not None]
        ref_scores = [cosine(q, text_vector(i.value["text"])) for i in ranked_ref]
        mine_scores = [cosine(q, text_vector(i.value["text"])) for i in ranked_mine]
        assert mine_scores == pytest.approx(ref_scores, abs=1e-6), op
        for item, score in zip(ranked_mine, mine_scores, strict=False):
            assert item.score == pytest.approx(score, abs=1e-5)
        untied = {(tuple(i.namespace), i.key) for i in ranked_ref if texts.count(i.value["text"]) == 1}
        assert untied <= {(tuple(i.namespace), i.key) for i in ranked_mine}, op
        assert _items([i for i in mine if i.score is None]) == _items([i for i in ref if i.score is None]), op
    else:
        assert mine is None and ref is None


def _run(store, sequence):
    mine = PymemStore(store.bind(Context(tenant=f"t-{uuid.uuid4().hex[:12]}", actor="graph")), index=index(), hybrid=False)
    ref = Reference(index=index())
    for batch in sequence:
        texts = [item.value["text"] for items in ref._data.values() for item in items.values()]  # before the batch
        got, want = mine.batch(batch), ref.batch(batch)
        for op, m, r in zip(batch, got, want, strict=False):
            _assert_same(op, m, r, texts)
    # and the whole store, at the end
    listing = ListNamespacesOp(None, None, 1000, 0)
    assert mine.batch([listing]) == ref.batch([listing])
    everything = SearchOp((), None, 1000, 0, None)
    assert _items(mine.batch([everything])[0]) == _items(ref.batch([everything])[0])


COMMON = dict(deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                       HealthCheck.too_slow])


@settings(max_examples=60, **COMMON)
@given(sequence=steps)
def test_pymem_store_behaves_as_the_in_memory_store(store, sequence):
    _run(store, sequence)


# The connection pool draws jitter from the random module in its own thread (each new
# connection's lifetime); Hypothesis notices the global random state move while it draws.
@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisDeprecationWarning")
@settings(max_examples=300, **{**COMMON, "derandomize": False})
@given(sequence=steps)
def test_pymem_store_behaves_as_the_in_memory_store_at_length(store, sequence):
    _run(store, sequence)
