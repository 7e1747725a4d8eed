"""Random sequences of upserts, deletes, searches and gets give the same answers from Postgres and
from the in-memory reference (tests/reference_store.py).

Data sets stay small, so pymem.search takes its exact plan and results are compared row by row
(up to float32 rounding of scores). Each example runs in a fresh tenant of one database.
"""

from __future__ import annotations

import itertools
import uuid

import pytest
from helpers.reference_store import ReferenceStore, assert_same_search
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule, run_state_machine_as_test

from pymem.context import Context
from pymem.errors import IdempotencyConflict, InvalidArguments, PymemError, RevisionMismatch

DIM = 384
IDS = ["a", "b", "c", "d", "e", "f"]
KEYS = ["k0", "k1", "k2", "k3"]
ACTORS = ["u1", "u2"]
SCOPES = [None, {"agent": "x"}, {"agent": "y"}, {"agent": "x", "team": "t"}]

# Vectors live in a 3-dimensional corner of the space with small integer coordinates, so that
# parallel vectors (exact score ties) and near-ties are common.
head = st.tuples(*[st.integers(-2, 2)] * 3).filter(any)


def expand(h: tuple[int, ...]) -> list[float]:
    return [float(x) for x in h] + [0.0] * (DIM - len(h))


@st.composite
def records(draw):
    memory_id = draw(st.sampled_from(IDS))
    id_key = draw(st.sampled_from(["id", "id", "chunk_id", "memory_id"]))
    record = {id_key: memory_id}
    if draw(st.booleans()):
        record[draw(st.sampled_from(["embedding", "embedding", "vector"]))] = expand(draw(head))
    scope = draw(st.sampled_from(SCOPES))
    if scope is not None:
        record["scope"] = scope
    if draw(st.booleans()):
        record["distillate"] = draw(st.text(max_size=8).filter(lambda s: "\x00" not in s))
    origin = draw(st.sampled_from([None, "user_asserted", "injected_context"]))
    if origin is not None:
        record["origin"] = origin
    # mostly follow the injection rule, sometimes break it
    follows = draw(st.sampled_from([True] * 19 + [False]))
    if (origin == "injected_context") == follows:
        record["injection_source"] = "retrieval"
    record["payload"] = draw(st.dictionaries(st.sampled_from(["n", "s", "l"]),
                                             st.one_of(st.integers(-1000, 1000), st.booleans(), st.none(),
                                                       st.lists(st.floats(-10, 10, allow_nan=False), max_size=3)),
                                             max_size=2))
    return record


def record_id(record: dict) -> str:
    return record.get("id") or record.get("chunk_id") or record.get("memory_id")


class StorageMachine(RuleBasedStateMachine):
    store = None  # set by the test

    @initialize()
    def fresh_tenant(self):
        self.tenant = f"prop-{uuid.uuid4().hex[:12]}"
        self.mems = {a: self.store.bind(Context(tenant=self.tenant, actor=a)) for a in ACTORS}
        self.ref = ReferenceStore(DIM)

    def both(self, pg_call, ref_call):
        """Run one verb on both sides: the same result, or the same error type."""
        try:
            expected = ref_call()
        except PymemError as exc:
            kind = type(exc) if not isinstance(exc, InvalidArguments) else InvalidArguments
            with pytest.raises(kind):
                pg_call()
            return None
        got = pg_call()
        assert got == expected
        return got

    @rule(batch=st.lists(records(), min_size=1, max_size=4, unique_by=record_id)
          | st.lists(records(), min_size=2, max_size=3),  # occasionally a repeated id
          key=st.sampled_from(KEYS),
          actor=st.sampled_from(ACTORS), use_expected=st.booleans(), data=st.data())
    def upsert(self, batch, key, actor, use_expected, data):
        expected = None
        if use_expected:
            ids = {record_id(r) for r in batch}
            expected = {i: data.draw(st.integers(0, 3)) for i in sorted(ids)}
        self.both(lambda: self.mems[actor].upsert_many(batch, idempotency_key=key, expected_revisions=expected),
                  lambda: self.ref.upsert_many(batch, idempotency_key=key, actor=actor, expected_revisions=expected))

    @rule(memory_id=st.sampled_from([*IDS, "zz"]))
    def get(self, memory_id):
        self.both(lambda: self.mems["u1"].get(memory_id), lambda: self.ref.get(memory_id))

    @rule(ids=st.lists(st.sampled_from([*IDS, "zz"]), max_size=5))
    def get_many(self, ids):
        self.both(lambda: self.mems["u2"].get_many(ids), lambda: self.ref.get_many(ids))

    @rule(ids=st.lists(st.sampled_from([*IDS, "zz"]), max_size=3))
    def delete(self, ids):
        self.both(lambda: self.mems["u1"].delete_many(ids), lambda: self.ref.delete_many(ids))

    @rule(h=head, top_k=st.integers(1, 7), scope_filter=st.sampled_from([None, {"agent": "x"}, {"team": "t"}]))
    def search(self, h, top_k, scope_filter):
        vector = expand(h)
        got = self.mems["u1"].search(vector, top_k=top_k, scope_filter=scope_filter)
        assert_same_search(got, self.ref, vector, top_k, scope_filter)

    @invariant()
    def same_contents(self):
        if not hasattr(self, "ref"):
            return
        assert self.mems["u1"].get_many(IDS) == self.ref.get_many(IDS)


@pytest.mark.slow
def test_storage_matches_the_reference(store):
    StorageMachine.store = store
    run_state_machine_as_test(
        StorageMachine,
        settings=settings(max_examples=40, stateful_step_count=20, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]),
    )


def test_reference_and_postgres_agree_on_a_worked_example(store):
    """A readable instance of the property, in case the machine's shrinking is ever needed."""
    mem = store.bind(Context(tenant="worked", actor="u1"))
    ref = ReferenceStore(DIM)
    batch = [{"id": "a", "embedding": expand((1, 0, 0)), "scope": {"agent": "x"}},
             {"id": "b", "embedding": expand((2, 0, 0))},  # parallel to a: an exact tie, broken by id
             {"id": "c", "embedding": expand((1, 1, 0)), "distillate": "c!"}]
    for side in (lambda **kw: mem.upsert_many(batch, **kw), lambda **kw: ref.upsert_many(batch, actor="u1", **kw)):
        assert side(idempotency_key="k") == {"upserted": 3, "replayed": False}
    for q, k, f in itertools.product([(1, 0, 0), (0, 1, 0), (1, 1, 1)], [1, 2, 5], [None, {"agent": "x"}]):
        assert_same_search(mem.search(expand(q), top_k=k, scope_filter=f), ref, expand(q), k, f)
    assert [h["chunk_id"] for h in mem.search(expand((1, 0, 0)), top_k=2)] == ["a", "b"]
    with pytest.raises(IdempotencyConflict):
        mem.upsert_many(batch[:1], idempotency_key="k")
    with pytest.raises(RevisionMismatch):
        mem.upsert_many(batch[:1], idempotency_key="k2", expected_revisions={"a": 2})
