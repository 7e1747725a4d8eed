"""Retention over the wire: the service's remember takes a ttl and a subject key; a bad ttl is a
clear error that writes nothing; an agent's token cannot name a ttl beyond the tenant's maximum."""

from __future__ import annotations

from datetime import timedelta

import pytest
from helpers.service import KEY, call, running, token

from pymem import Context
from pymem.admin import set_retention
from pymem.server.app import build_app
from pymem.service.auth import TokenVerifier


@pytest.fixture
def url(store):
    with running(build_app(store, tokens=TokenVerifier.hs256(KEY))) as base:
        yield base


def _row(database, memory_id):
    with database.admin() as conn:
        return conn.execute("select ttl, subject from pymem.memories where id = %s", (memory_id,)).fetchone()


def test_remember_over_the_wire_takes_a_ttl_and_a_subject(url, database):
    args = {"record": {"id": "w1", "content": "calls after six"}, "provenance": {"origin": "user_asserted"},
            "ttl": 600, "subject": "alice@example.com"}
    status, body = call(url, "remember", args, token=token())
    assert status == 200 and body["ok"], body
    ttl, subject = _row(database, "w1")
    assert ttl == timedelta(minutes=10) and subject.startswith("p:") and "alice" not in subject


@pytest.mark.parametrize("bad", [0, -1, "600", 10 ** 12])
def test_a_bad_ttl_over_the_wire_writes_nothing(url, database, bad):
    args = {"record": {"id": "w2", "content": "x"}, "provenance": {"origin": "user_asserted"}, "ttl": bad}
    status, body = call(url, "remember", args, token=token())
    assert status == 400 and not body["ok"], body
    assert _row(database, "w2") is None


def test_an_agent_token_cannot_exceed_the_tenants_maximum(url, store, database):
    set_retention(store.bind(Context(tenant="acme", actor="ops")), max_ttl=3600)
    args = {"record": {"id": "w3", "content": "x"}, "provenance": {"origin": "user_asserted"}, "ttl": 7200}
    status, body = call(url, "remember", args, token=token(adapter="codex"))
    assert status == 400 and "maximum" in body["error"]["message"], body
    assert _row(database, "w3") is None
