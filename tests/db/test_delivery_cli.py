"""The delivery commands through click's CliRunner against the test database, checked through the
library afterwards."""

from __future__ import annotations

import json

import pytest
from helpers.cli import cli_runner
from helpers.delivery import block_memory_ids

from pymem import Context
from pymem.delivery import list_sessions, session_injections
from pymem.integrity import history


@pytest.fixture
def cli(database, monkeypatch):
    return cli_runner(database, monkeypatch)


@pytest.fixture
def acme(store):
    return store.bind(Context(tenant="acme"))


def remembered(result) -> str:
    assert result.exit_code == 0, result.output
    return result.output.split()[1]


def test_a_session_from_start_to_the_delivered_block(cli, acme):
    started = cli("session", "start", "chat-1", "--surface", "chat", "--first-message", "Set up Initech invoicing")
    assert started.exit_code == 0 and "topic Set up Initech invoicing" in started.output
    old = remembered(cli("remember", "Initech wants invoices in EUR.", "--origin", "user_asserted",
                         "--session", "chat-1"))
    hot = remembered(cli("remember", "Initech's contact is Dr. Lumbergh.", "--origin", "user_asserted",
                         "--session", "chat-1", "--hot"))
    assert [e.event for e in history(acme, hot)] == ["memory.insert", "hot.marked"]
    assert cli("session", "end", "chat-1", "--summary", "Initech is invoiced in EUR.").exit_code == 0
    assert cli("session", "start", "chat-2", "--surface", "chat").exit_code == 0

    result = cli("deliver", "--session", "chat-2", "--query", "Which currency does Initech want its invoices in?")
    assert result.exit_code == 0, result.stderr
    block = result.stdout.rstrip("\n")
    assert block.startswith("<<<pymem reference data ") and block.splitlines()[-1].startswith("<<<end of pymem")
    assert block_memory_ids(block) == [hot, old] and '- session "chat-1"' in block
    [record] = session_injections(acme, "chat-2")
    assert f"ledger seq {record.seq}" in result.stderr and record.memory_ids == [hot, old]

    as_json = json.loads(cli("deliver", "--session", "chat-2", "--query", "Initech invoices", "--budget", "2000",
                             "--json").stdout)
    assert as_json["turn"] == 1 and as_json["injection_seq"] > record.seq and as_json["block"].startswith("<<<")
    assert [i["id"] for i in as_json["items"]] == block_memory_ids(as_json["block"])

    shown = cli("session", "show", "chat-1")
    assert "summary: Initech is invoiced in EUR." in shown.output
    listed = [s["id"] for s in json.loads(cli("session", "list", "--json").stdout)]
    assert listed == ["chat-2", "chat-1"]

    audit = cli("audit", "injections", "--session", "chat-2", "--turn", "0", "--json")
    [row] = json.loads(audit.stdout)
    assert row["seq"] == record.seq and row["memory_ids"] == [hot, old]
    turns = json.loads(cli("audit", "injections", "--memory", hot, "--json").stdout)
    assert [(t["turn"], t["section"]) for t in turns] == [(0, "hot"), (1, "hot")]
    assert "memories: " + ", ".join([hot, old]) in cli("audit", "injections", "--session", "chat-2", "--turn", "0").output


def test_supersede_erase_recall_as_of_and_the_inspector(cli, acme, database):
    cli("session", "start", "s", "--surface", "api")
    old = remembered(cli("remember", "Initech wants invoices in EUR.", "--origin", "user_asserted", "--session", "s"))
    with database.admin() as conn:
        between = conn.execute("select clock_timestamp()").fetchone()[0].isoformat()
    replaced = cli("supersede", old, "Initech now wants invoices in USD.", "--origin", "user_asserted", "--session", "s",
                   "--json")
    new = json.loads(replaced.stdout)["id"]
    assert json.loads(replaced.stdout)["supersedes"] == old
    query = "Which currency does Initech want its invoices in?"
    now = json.loads(cli("recall", query, "--json").stdout)
    assert [k["id"] for k in now["kept"]] == [new] and now["kept"][0]["tier"] == "user"
    then = json.loads(cli("recall", query, "--as-of", between, "--json").stdout)
    assert [k["id"] for k in then["kept"]] == [old]
    table = cli("recall", query).output
    assert "tier" in table and "session" in table

    listed = json.loads(cli("inspect", "memories", "--superseded", "--json").stdout)
    assert {m["id"]: m["superseded_by"] for m in listed} == {old: new, new: None}
    shown = json.loads(cli("inspect", "memory", old, "--json").stdout)
    assert [h["event"] for h in shown["history"]] == ["memory.insert", "memory.supersede"]

    erased = cli("erase", new, "--reason", "user asked")
    assert erased.exit_code == 0 and "reason at ledger seq" in erased.output
    assert cli("inspect", "memory", new).exit_code == 1
    assert json.loads(cli("recall", query, "--json").stdout)["kept"] == []
    assert cli("erase", new, "--reason", "again").exit_code == 1
    assert cli("verify").exit_code == 0


def test_refusals_and_usage_errors(cli, acme):
    unknown = cli("remember", "Initech wants invoices in EUR.", "--origin", "user_asserted", "--session", "nope")
    assert unknown.exit_code == 1 and "unknown session" in unknown.output and "audit seq:" in unknown.output
    assert cli("deliver", "--session", "nope", "--query", "x").exit_code == 1
    assert cli("session", "start", "s", "--surface", "fax").exit_code == 2
    assert cli("audit", "injections").exit_code == 2
    assert cli("audit", "injections", "--session", "s", "--memory", "m").exit_code == 2
    assert cli("erase", "m").exit_code == 2  # --reason is required
    cli("session", "start", "private", "--surface", "chat", "--incognito", "--first-message", "secret plans")
    refused = cli("remember", "secret plans", "--origin", "user_asserted", "--session", "private")
    assert refused.exit_code == 1 and "incognito" in refused.output
    nothing = cli("deliver", "--session", "private", "--query", "secret plans")
    assert nothing.exit_code == 0 and nothing.stdout == "" and "incognito" in nothing.stderr
    assert cli("session", "end", "private", "--summary", "secret plans").exit_code == 0
    assert [s.id for s in list_sessions(acme)] == []
    erased = cli("session", "start", "t", "--surface", "chat")
    assert erased.exit_code == 0 and cli("session", "erase", "t", "--reason", "asked").exit_code == 0
    assert cli("session", "show", "t").exit_code == 1
