"""One write path: the write gate, Memories.add, upsert_many and import refuse the same bad rows
with the same typed error, and none of them writes anything (rows, ledger entries, keys)."""

from __future__ import annotations

import json
import math

import pytest

from pymem.admission.gate import admit
from pymem.admission.policy import AdmissionPolicy
from pymem.admission.provenance import Provenance
from pymem.context import Context
from pymem.errors import InvalidArguments
from pymem.storage.transfer import import_file

DIM = 384
GOOD = [0.5] + [0.0] * (DIM - 1)

# name -> what the row carries besides its text (the gate reads `content`, a chunk `distillate`)
BAD = {
    "zero vector": {"embedding": [0.0] * DIM},
    "NaN in the vector": {"embedding": [math.nan, *GOOD[1:]]},
    "infinity in the vector": {"embedding": [*GOOD[:-1], math.inf]},
    "squared norm overflows float4": {"embedding": [3.4e+38, *GOOD[1:]]},
    "dimension too small": {"embedding": GOOD[:-1]},
    "dimension too large": {"embedding": [*GOOD, 0.0]},
    "record over 1 MiB": {"embedding": GOOD, "numbers": [0.125] * 200_000},
    "content too large": {"embedding": GOOD, "content": "x" * 70_000},
}


@pytest.fixture
def mem(store):
    return store.bind(Context(tenant="acme", actor="u1"))


@pytest.fixture
def snapshot(database):
    def counts():
        with database.admin() as conn:
            return conn.execute(
                "select (select count(*) from pymem.memories), (select count(*) from pymem.ledger),"
                " (select count(*) from pymem.idempotency_keys)").fetchone()
    return counts


def _gate(mem, extra, _tmp):
    admit(mem, {"content": "a note", **extra}, Provenance("user_asserted", source="chat"), policy=AdmissionPolicy())


def _add(mem, extra, _tmp):
    mem.add([{"content": "a note", **{k: v for k, v in extra.items() if k != "numbers"},
              **({"record": {"numbers": extra["numbers"]}} if "numbers" in extra else {})}])


def _upsert(mem, extra, _tmp):
    mem.upsert_many([{"id": "c1", "distillate": "a note", **extra}], idempotency_key="k")


def _import(mem, extra, tmp):
    path = tmp / "chunks.jsonl"
    path.write_text(json.dumps({"id": "c1", "distillate": "a note", **extra}) + "\n", encoding="utf-8")
    import_file(mem, path)


PATHS = {"write gate": _gate, "Memories.add": _add, "upsert_many": _upsert, "import": _import}


@pytest.mark.parametrize("case", BAD)
def test_every_path_refuses_the_same_rows_the_same_way(mem, snapshot, tmp_path, case):
    before = snapshot()
    outcomes = {}
    for name, write in PATHS.items():
        try:
            write(mem, BAD[case], tmp_path)
        except Exception as exc:  # noqa: BLE001 - which error it is, is the point
            outcomes[name] = type(exc)
        else:
            outcomes[name] = None
        assert snapshot() == before, f"{name} wrote something for {case}"
    assert outcomes == dict.fromkeys(PATHS, InvalidArguments), outcomes


def test_and_every_path_takes_a_good_row(mem, snapshot, tmp_path):
    before = snapshot()
    for _name, write in PATHS.items():
        write(mem, {"embedding": GOOD}, tmp_path)
    rows, ledger, keys = snapshot()
    assert rows > before[0] and ledger > before[1] and keys > before[2]
