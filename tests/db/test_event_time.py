"""A memory's event time: set by the writer (record field event_at), distinct from created_at,
checked by the gate, returned by recall and shown in the delivered block."""

from __future__ import annotations

import pytest
from helpers.delivery import DEFAULTS, EMBEDDER, POLICY

from pymem import Context, InvalidArguments, Provenance, admit, deliver, recall, start_session


@pytest.fixture
def acme(store):
    return store.bind(Context(tenant="acme", actor="u-1"))


def test_the_event_time_is_the_writers_and_shown_in_the_block(acme):
    start_session(acme, "s", "chat")
    prov = Provenance("user_asserted", source="chat")
    admit(acme, {"id": "trip", "content": "Caroline went hiking in Yosemite", "event_at": "2023-05-08T13:56:00"},
          prov, policy=POLICY, embedder=EMBEDDER)
    kept = recall(acme, "Caroline hiking Yosemite", floor=-1.0, **DEFAULTS).kept
    assert kept[0].id == "trip" and kept[0].event_at.isoformat() == "2023-05-08T13:56:00+00:00"
    assert kept[0].created_at != kept[0].event_at
    block = deliver(acme, "s", "Caroline hiking Yosemite", floor=-1.0, **DEFAULTS)
    assert "| happened 2023-05-08T13:56:00Z |" in block.text or "| happened 2023-05-08" in block.text
    assert block.items[0].event_at == kept[0].event_at


@pytest.mark.parametrize("bad", ["last tuesday", 12, "2023-13-45", "x" * 100])
def test_a_bad_event_time_is_refused_and_nothing_is_written(acme, bad):
    with pytest.raises(InvalidArguments, match="event_at"):
        admit(acme, {"content": "Caroline went hiking", "event_at": bad}, Provenance("user_asserted", source="chat"),
              policy=POLICY, embedder=EMBEDDER)
    assert acme.list_chunks()["chunks"] == []
