"""The store holds the configuration: verbs read their policies from the store's settings, never
from the environment at call time; a changed policy file is picked up by the running store, and
Store.reload() takes new settings' policies but never a new connection."""

from __future__ import annotations

import dataclasses
import json

import pytest
from helpers.lessons import EMBEDDER

from pymem import Context, InvalidArguments, MemoryAdmissionError, Provenance, admit

INFERRED = {"content": "Ivan might like sailing", "confidence": 0.9}


@pytest.fixture
def own_store(database):
    """A store opened from settings built in code (the environment's PYMEM_* values not among them)."""
    s = database.store()
    yield s
    s.close()


def test_a_verb_does_not_read_the_environment(own_store, monkeypatch):
    mem = own_store.bind(Context(tenant="cfg"))
    monkeypatch.setenv("PYMEM_DENY_ORIGINS", "model_inferred")  # after the settings were built
    out = admit(mem, INFERRED, Provenance("model_inferred"), embedder=EMBEDDER)
    assert out["confidence"] <= 0.9 and mem.get_row(out["id"])["origin"] == "model_inferred"


def test_a_changed_policy_file_is_the_policy_in_force(own_store, tmp_path, monkeypatch):
    path = tmp_path / "policy.json"
    path.write_text(json.dumps({"inferred_ceiling": 0.5}), encoding="utf-8")
    own_store.reload(dataclasses.replace(own_store.settings, environ={"PYMEM_POLICY_FILE": str(path)}))
    mem = own_store.bind(Context(tenant="cfg"))
    assert admit(mem, INFERRED, Provenance("model_inferred"), embedder=EMBEDDER)["confidence"] == 0.5
    path.write_text(json.dumps({"inferred_ceiling": 0.25, "deny_origins": []}), encoding="utf-8")
    assert admit(mem, {**INFERRED, "content": "Ivan might like rowing"}, Provenance("model_inferred"),
                 embedder=EMBEDDER)["confidence"] == 0.25
    path.write_text(json.dumps({"deny_origins": ["model_inferred"]}), encoding="utf-8")
    with pytest.raises(MemoryAdmissionError, match="not persisted"):
        admit(mem, {**INFERRED, "content": "Ivan might like chess"}, Provenance("model_inferred"), embedder=EMBEDDER)


def test_reload_refuses_another_connection_and_changes_nothing(own_store):
    before = own_store.settings
    with pytest.raises(InvalidArguments, match="dsn"):
        own_store.reload(dataclasses.replace(before, dsn="postgresql://elsewhere/db"))
    with pytest.raises(InvalidArguments, match="Settings"):
        own_store.reload({"PYMEM_DENY_ORIGINS": "model_inferred"})
    assert own_store.settings is before
