"""Foundation-level bad input: a typed error and nothing written.

Through the library (`Memories.add` / `prepare_row`) every bad row raises
pymem.errors.InvalidArguments before anything reaches the database; and the database itself is
the backstop for raw SQL from the app login (CHECK constraints, the vector type).
"""

from __future__ import annotations

import math

import psycopg
import pytest
from psycopg import errors as pgerr
from psycopg.types.json import Jsonb

from pymem.config import DEFAULT_MAX_CONTENT_BYTES
from pymem.context import Context
from pymem.errors import InvalidArguments

DIM = 384


def vec(*head: float) -> list[float]:
    return list(head) + [0.1] * (DIM - len(head))


def counts(database):
    with database.admin() as conn:
        return conn.execute(
            "select (select count(*) from pymem.memories), (select count(*) from pymem.ledger),"
            " (select count(*) from pymem.chain_heads)").fetchone()


GOOD = {"content": "fine", "embedding": vec(0.5)}

BAD_ROWS = {
    # vectors
    "dim too small": {"content": "x", "embedding": [0.1] * (DIM - 1)},
    "dim too large": {"content": "x", "embedding": [0.1] * (DIM + 1)},
    "dim empty": {"content": "x", "embedding": []},
    "nan in vector": {"content": "x", "embedding": vec(math.nan)},
    "inf in vector": {"content": "x", "embedding": vec(0.0, math.inf)},
    "-inf in vector": {"content": "x", "embedding": vec(0.0, 0.0, -math.inf)},
    "float4 overflow": {"content": "x", "embedding": vec(1e39)},
    "squared norm overflows float4": {"content": "x", "embedding": vec(-1.0, 3.4e38)},
    "zero vector": {"content": "x", "embedding": [0.0] * DIM},
    "string in vector": {"content": "x", "embedding": vec("0.1")},
    "bool in vector": {"content": "x", "embedding": vec(True)},
    "vector as string": {"content": "x", "embedding": "[0.1, 0.2]"},
    # NUL bytes
    "nul in content": {"content": "before\x00after"},
    "nul in scope value": {"content": "x", "scope": {"project": "a\x00b"}},
    "nul in scope key": {"content": "x", "scope": {"pro\x00ject": "a"}},
    "nul in tag": {"content": "x", "tags": ["ok", "b\x00d"]},
    "nul in record": {"content": "x", "record": {"note": "a\x00b"}},
    "nul in record key": {"content": "x", "record": {"n\x00te": "ab"}},
    "nul in id": {"id": "a\x00b", "content": "x"},
    # size
    "oversize content": {"content": "x" * (DEFAULT_MAX_CONTENT_BYTES + 1)},
    "oversize content in bytes": {"content": "\u00e9" * (DEFAULT_MAX_CONTENT_BYTES // 2 + 1)},
    "lone surrogate": {"content": "\ud800"},
    # scope shape
    "scope a list": {"content": "x", "scope": ["project", "a"]},
    "scope a string": {"content": "x", "scope": "project=a"},
    "scope nested object": {"content": "x", "scope": {"project": {"name": "a"}}},
    "scope nested list": {"content": "x", "scope": {"project": ["a"]}},
    "scope empty value": {"content": "x", "scope": {"project": ""}},
    "scope empty key": {"content": "x", "scope": {"": "a"}},
    "scope int value": {"content": "x", "scope": {"project": 1}},
    "scope null value": {"content": "x", "scope": {"project": None}},
    "scope bool value": {"content": "x", "scope": {"project": True}},
    # fields
    "unknown field": {"content": "x", "colour": "red"},
    "tenant_id field": {"content": "x", "tenant_id": "globex"},
    "source_adapter field": {"content": "x", "source_adapter": "claude"},
    "revision field": {"content": "x", "revision": 7},
    "content_hash field": {"content": "x", "content_hash": "00"},
    "erased_at field": {"content": "x", "erased_at": "2020-01-01"},
    # other values
    "content not a string": {"content": 42},
    "importance out of range": {"content": "x", "importance": 1.5},
    "confidence nan": {"content": "x", "confidence": math.nan},
    "tags a string": {"content": "x", "tags": "a,b"},
    "empty tag": {"content": "x", "tags": [""]},
    "unknown origin": {"content": "x", "origin": "hearsay"},
    "injected without source": {"content": "x", "origin": "injected_context"},
    "empty id": {"id": "", "content": "x"},
    "id not a string": {"id": 5, "content": "x"},
    "nan in record": {"content": "x", "record": {"score": math.nan}},
}


@pytest.fixture
def mem(store):
    return store.bind(Context(tenant="acme", actor="u1", scope={}))


def test_every_bad_row_is_refused_and_nothing_is_written(mem, database):
    """One database for all cases: each is a typed error, as a single row and last in a batch."""
    mem.add([GOOD])
    before = counts(database)
    assert before == (1, 1, 1)
    untyped = []
    for label, row in BAD_ROWS.items():
        for batch in ([row], [dict(GOOD), dict(GOOD, content="second"), row]):
            try:
                mem.add(batch)
            except InvalidArguments:
                pass
            except Exception as exc:  # noqa: BLE001 - a wrong error type is what we report
                untyped.append(f"{label}: {type(exc).__name__}: {str(exc)[:120]}")
            else:
                untyped.append(f"{label}: accepted")
        try:
            mem.prepare_row(row)
        except InvalidArguments:
            pass
        except Exception as exc:  # noqa: BLE001
            untyped.append(f"prepare_row {label}: {type(exc).__name__}")
        else:
            untyped.append(f"prepare_row {label}: accepted")
    assert untyped == []
    assert counts(database) == before


@pytest.mark.parametrize("label", ["nan in vector", "dim too small", "nul in content", "scope nested object",
                                   "scope a list", "oversize content", "unknown field"])
def test_bad_last_row_of_a_batch_writes_nothing(mem, database, label):
    before = counts(database)
    batch = [{"id": f"ok{i}", "content": f"row {i}", "embedding": vec(i / 10)} for i in range(5)]
    with pytest.raises(InvalidArguments):
        mem.add([*batch, BAD_ROWS[label]])
    assert counts(database) == before
    assert mem.get_row("ok0") is None


def test_error_messages_do_not_echo_content(mem):
    with pytest.raises(InvalidArguments) as info:
        mem.add([{"content": "top secret\x00payload"}])
    assert "top secret" not in str(info.value)
    with pytest.raises(InvalidArguments) as info:
        mem.add([{"content": "x", "embedding": vec(0.123456789, math.nan)}])
    assert "0.123456789" not in str(info.value)


def test_configured_content_limit(database):
    store = database.store(max_content_bytes=10)
    try:
        mem = store.bind(Context(tenant="acme"))
        mem.add([{"content": "0123456789"}])  # exactly the limit
        before = counts(database)
        with pytest.raises(InvalidArguments):
            mem.add([{"content": "0123456789a"}])
        with pytest.raises(InvalidArguments):
            mem.add([{"content": "\u00e9" * 6}])  # 6 characters, 12 bytes
        assert counts(database) == before
    finally:
        store.close()


def test_rows_argument_must_be_a_list(mem, database):
    before = counts(database)
    for bad in ({"content": "x"}, "content", None, 5, [None], ["x"]):
        with pytest.raises(InvalidArguments):
            mem.add(bad)
    assert counts(database) == before


def test_good_edge_values_are_accepted(mem):
    """The refusals above are not just refusing everything."""
    ids = mem.add([
        {"content": "x" * DEFAULT_MAX_CONTENT_BYTES},
        {"content": "\u00e9\u6f22\U0001f600", "scope": {"project": "a", "user": "\u00fc"}, "tags": ["t"] * 3},
        # the largest components whose squared norm still fits float4 (pgvector's cosine needs it)
        {"content": None, "embedding": vec(-1.0, 1.8e19)},
        {"content": "x", "origin": "injected_context", "injection_source": "web"},
    ])
    assert len(ids) == 4
    assert mem.get_row(ids[1])["scope"] == {"project": "a", "user": "\u00fc"}


# -- the database backstop (raw SQL as the app login) ------------------------------------------

def _raw_insert(conn, **cols):
    names = ", ".join(["tenant_id", "id", *cols])
    marks = ", ".join(["'acme'", "'raw'", *(["%s"] * len(cols))])
    conn.execute(f"insert into pymem.memories ({names}) values ({marks})", tuple(cols.values()))


BACKSTOP = [
    ("nested scope", dict(scope=Jsonb({"project": {"a": "b"}})), pgerr.CheckViolation),
    # A non-object scope contains nothing, so RLS may refuse it before the CHECK does.
    ("scope a json string", dict(scope=Jsonb("project=a")), (pgerr.CheckViolation, pgerr.InsufficientPrivilege)),
    ("scope array", dict(scope=Jsonb(["a"])), (pgerr.CheckViolation, pgerr.InsufficientPrivilege)),
    ("scope empty value", dict(scope=Jsonb({"project": ""})), pgerr.CheckViolation),
    ("scope number value", dict(scope=Jsonb({"project": 1})), pgerr.CheckViolation),
    ("wrong dimension", dict(embedding="[1,2,3]"), pgerr.DataException),
    ("nan in vector", dict(embedding="[" + ",".join(["NaN"] + ["0"] * (DIM - 1)) + "]"), pgerr.DataException),
    ("inf in vector", dict(embedding="[" + ",".join(["Infinity"] + ["0"] * (DIM - 1)) + "]"), pgerr.DataException),
    ("nul in content", dict(content="a\x00b"), psycopg.DataError),
    ("oversize content", dict(content="x" * (1048576 + 1)), pgerr.CheckViolation),
    ("bad kind", dict(kind="Not A Kind"), pgerr.CheckViolation),
    ("bad origin", dict(origin="hearsay"), pgerr.CheckViolation),
    ("injected without source", dict(origin="injected_context"), pgerr.CheckViolation),
    ("importance out of range", dict(importance=2.0), pgerr.CheckViolation),
    ("empty adapter tag", dict(source_adapter=""), psycopg.Error),
    ("provenance not an object", dict(provenance=Jsonb([1])), pgerr.CheckViolation),
    # the app login may not name erased_at on insert at all (column privileges); see below for
    # the trigger that refuses it to whoever may
    ("erased on insert", dict(erased_at="2020-01-01"), pgerr.InsufficientPrivilege),
]


def test_database_refuses_bad_rows_from_raw_sql(database):
    before = counts(database)
    accepted = []
    with database.app() as conn:
        for label, cols, exc in BACKSTOP:
            conn.execute("select pymem.set_context('acme')")
            if "embedding" in cols:
                cols = dict(cols)
                emb = cols.pop("embedding")
                try:
                    conn.execute("insert into pymem.memories (tenant_id, id, embedding) values ('acme', 'raw', %s::vector)",
                                 (emb,))
                except exc:
                    conn.rollback()
                    continue
                accepted.append(label)
                conn.rollback()
                continue
            try:
                _raw_insert(conn, **cols)
            except exc:
                conn.rollback()
                continue
            except psycopg.Error as other:
                accepted.append(f"{label}: {type(other).__name__}: {other}")
                conn.rollback()
                continue
            accepted.append(label)
            conn.rollback()
        # And the same refusals when the row passes RLS via an update.
        conn.execute("select pymem.set_context('acme')")
        _raw_insert(conn, content="ok")
        conn.commit()
        conn.execute("select pymem.set_context('acme')")
        with pytest.raises(pgerr.CheckViolation):
            conn.execute("update pymem.memories set scope = '{\"a\": {\"b\": \"c\"}}' where id = 'raw'")
        conn.rollback()
        conn.execute("select pymem.set_context('acme')")
        with pytest.raises(pgerr.DataException):
            conn.execute("update pymem.memories set embedding = '[1,2]' where id = 'raw'")
        conn.rollback()
    assert accepted == []
    with database.admin() as admin, pytest.raises(pgerr.InvalidParameterValue), admin.transaction():
        admin.execute("select pymem.set_context('acme')")
        _raw_insert(admin, erased_at="2020-01-01")
    after = counts(database)
    assert after == (before[0] + 1, before[1] + 1, before[2] + 1)  # only the one good row
