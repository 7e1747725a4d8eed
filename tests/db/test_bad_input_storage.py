"""Bad input for every storage verb: a typed error, and nothing written (rows, ledger, keys)."""

from __future__ import annotations

import math

import pytest

from pymem.context import Context
from pymem.errors import InvalidArguments

pytestmark = pytest.mark.parity

DIM = 384
GOOD = [0.5] + [0.0] * (DIM - 1)


def good(memory_id: str = "a", **extra) -> dict:
    return {"id": memory_id, "embedding": list(GOOD), "distillate": "x", **extra}


@pytest.fixture
def mem(store):
    m = store.bind(Context(tenant="acme", actor="u1"))
    m.upsert_many([good("existing")], idempotency_key="seed")
    return m


@pytest.fixture
def unchanged(database):
    """snapshot() of what a write would change: rows, ledger entries, idempotency keys, revisions."""
    def snapshot():
        with database.admin() as conn:
            return conn.execute(
                "select (select count(*) from pymem.memories), (select count(*) from pymem.ledger),"
                " (select count(*) from pymem.idempotency_keys),"
                " (select coalesce(sum(revision), 0) from pymem.memories)").fetchone()
    return snapshot


def refused(snapshot, cases: dict, call, error=InvalidArguments) -> None:
    """Every case raises `error` and leaves the database as it was. One database for all the
    cases of a verb keeps this fast; the case name is in the failure message."""
    before = snapshot()
    for name, value in cases.items():
        try:
            call(value)
        except error:
            pass
        except Exception as exc:  # pragma: no cover - reported
            raise AssertionError(f"case {name!r}: {type(exc).__name__} instead of {error.__name__}") from exc
        else:  # pragma: no cover - reported
            raise AssertionError(f"case {name!r}: accepted")
        assert snapshot() == before, f"case {name!r} wrote something"


BAD_VECTORS = {
    "short": GOOD[:-1],
    "long": [*GOOD, 0.0],
    "empty": [],
    "nan": [math.nan, *GOOD[1:]],
    "inf": [math.inf, *GOOD[1:]],
    "-inf": [*GOOD[:-1], -math.inf],
    "string": "0.5, 0, 0",
    "dict": {"0": 0.5},
    "number": 0.5,
    "bools": [True] + [False] * (DIM - 1),
    "strings": ["0.5"] * DIM,
    "nested": [[0.5]] * DIM,
    "zero": [0.0] * DIM,
    "float4 overflow": [1e+39, *GOOD[1:]],
}

BAD_KEYS = {"none": None, "empty": "", "blank": "   ", "int": 7, "list": ["k"], "too long": "k" * 257,
            "nul": "k\x00"}


def test_upsert_bad_idempotency_key(mem, unchanged):
    refused(unchanged, BAD_KEYS, lambda key: mem.upsert_many([good()], idempotency_key=key))


def test_upsert_missing_idempotency_key(mem, unchanged):
    # keyword-only and required: there is no default to fall back on
    refused(unchanged, {"missing": None}, lambda _: mem.upsert_many([good()]), error=TypeError)


def test_upsert_bad_vector(mem, unchanged):
    # the bad record comes second: the good first one must not land either
    refused(unchanged, BAD_VECTORS,
            lambda v: mem.upsert_many([good("b"), {"id": "c", "embedding": v}], idempotency_key="k"))
    refused(unchanged, BAD_VECTORS, lambda v: mem.upsert_many([{"id": "c", "vector": v}], idempotency_key="k2"))


BAD_RECORDS = {
    "not a list": good(),
    "a string": "records",
    "none": None,
    "element not an object": [good("b"), "chunk"],
    "element is a list": [[("id", "a")]],
    "no id": [{"embedding": GOOD}],
    "int id": [{"id": 7}],
    "float chunk_id": [{"chunk_id": 1.5}],
    "empty id": [{"id": ""}],
    "long id": [{"id": "x" * 257}],
    "nul in id": [{"id": "a\x00b"}],
    "nested scope": [good(scope={"agent": {"name": "x"}})],
    "scope not an object": [good(scope="agent=x")],
    "empty scope value": [good(scope={"agent": ""})],
    "unknown origin": [good(origin="rumour")],
    "origin not a string": [good(origin=["user_asserted"])],
    "injected without source": [good(origin="injected_context")],
    "source without injection": [good(origin="tool_output", injection_source="web")],
    "empty injection source": [good(origin="injected_context", injection_source="")],
    "repeated id": [good("b"), good("b")],
    "nan in payload": [good(score=math.nan)],
    "set in payload": [good(tags={"a"})],
    "bytes in payload": [good(blob=b"\x00")],
    "non-string key": [{**good(), 3: "x"}],
    "nul in payload": [good(note="a\x00b")],
    "content too large": [good(content="x" * 70_000)],
    "too many records": [good(f"r{i}") for i in range(10_001)],
}


def test_upsert_bad_records(mem, unchanged):
    refused(unchanged, BAD_RECORDS, lambda records: mem.upsert_many(records, idempotency_key="k"))


BAD_EXPECTED = {
    "not an object": ["a", 1],
    "negative": {"b": -1},
    "bool": {"b": True},
    "float": {"b": 1.0},
    "string revision": {"b": "1"},
    "id not in records": {"zzz": 1},
    "int id": {1: 1},
}


def test_upsert_bad_expected_revisions_and_class(mem, unchanged):
    refused(unchanged, BAD_EXPECTED,
            lambda e: mem.upsert_many([good("b")], idempotency_key="k", expected_revisions=e))
    refused(unchanged, {"unknown": "forever", "empty": "", "int": 1, "list": ["default"]},
            lambda c: mem.upsert_many([good("b")], idempotency_key="k", idempotency_class=c))


def test_search_bad_vector(mem, unchanged):
    refused(unchanged, BAD_VECTORS, lambda v: mem.search(v, top_k=3))


def test_search_bad_top_k(mem, unchanged):
    cases = {"0": 0, "-1": -1, "1001": 1001, "1e9": 10**9, "True": True, "False": False, "1.5": 1.5, "str": "5",
             "None": None}
    refused(unchanged, cases, lambda k: mem.search(GOOD, top_k=k))


BAD_SEARCH_OPTIONS = {
    "nested scope_filter": dict(scope_filter={"agent": {"a": "b"}}),
    "scope_filter not an object": dict(scope_filter=["agent", "x"]),
    "scope_filter empty value": dict(scope_filter={"agent": ""}),
    "metadata_filter": dict(metadata_filter={"trust_tier": "t1"}),
    "metadata_filter not an object": dict(metadata_filter="trust_tier=t1"),
    "unknown include key": dict(include={"vectors": True}),
    "include not bool": dict(include={"embedding": "no"}),
    "include not an object": dict(include=["embedding"]),
    "fidelity_target": dict(fidelity_target=0.99),
}


def test_search_bad_options(mem, unchanged):
    refused(unchanged, BAD_SEARCH_OPTIONS, lambda options: mem.search(GOOD, top_k=3, **options))


BAD_IDS = {"int": 7, "none": None, "list": ["a"], "empty": "", "too long": "x" * 257, "bytes": b"a"}
BAD_ID_LISTS = {"a string": "abc", "none": None, "ints": [1, 2], "mixed": ["a", 2], "nested": [["a"]],
                "dict": {"a": 1}, "too many": [f"i{i}" for i in range(10_001)]}


def test_get_bad_ids(mem, unchanged):
    refused(unchanged, BAD_IDS, mem.get)
    refused(unchanged, BAD_ID_LISTS, mem.get_many)


def test_delete_many_bad_ids(mem, unchanged):
    refused(unchanged, BAD_ID_LISTS, mem.delete_many)
    assert mem.get("existing") is not None


def test_a_valid_call_after_all_that_still_works(mem):
    assert mem.upsert_many([good("b")], idempotency_key="k") == {"upserted": 1, "replayed": False}
    assert [h["chunk_id"] for h in mem.search(GOOD, top_k=5)] == ["b", "existing"]


def test_adding_an_existing_id_is_a_typed_error_and_writes_nothing(mem, unchanged):
    """Memories.add of an id that exists: InvalidArguments naming it (not the driver's
    UniqueViolation), alone or in a batch, and the batch's other rows are not written either."""
    import psycopg

    before = unchanged()
    for rows in ([{"id": "existing", "content": "again"}],
                 [{"id": "fresh-1", "content": "x"}, {"id": "existing", "content": "again"}]):
        with pytest.raises(InvalidArguments, match="existing") as info:
            mem.add(rows)
        assert not isinstance(info.value, psycopg.Error)
        assert "already exists" in str(info.value)
        assert unchanged() == before
    assert mem.get_row("fresh-1") is None
    assert mem.add([{"id": "fresh-1", "content": "x"}]) == ["fresh-1"]  # the connection is usable after
