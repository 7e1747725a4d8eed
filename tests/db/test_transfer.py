"""Import/export: 10,000 records round-trip verbatim; an interrupted import resumes without
duplicates; bad files are refused with their line number and nothing written; the CLI."""

from __future__ import annotations

import io
import json
import random

import pytest
from click.testing import CliRunner

from pymem.cli import main
from pymem.context import Context
from pymem.errors import InvalidArguments
from pymem.storage.transfer import export_records, import_file

DIM = 384


def make_records(n: int, seed: int = 7, vectors_every: int = 100) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        record = {"id": f"rec-{i:05d}", "distillate": f"memory {i} — ünïcødé ✓", "trust_tier": rng.choice("abc"),
                  "scope": {"agent": f"a{i % 3}"}, "metadata": {"i": i, "f": rng.random(), "tags": ["x", i % 7],
                                                                  "none": None, "ok": bool(i % 2)}}
        if i % vectors_every == 0:
            record["embedding"] = [rng.uniform(-1, 1) for _ in range(DIM)]
        out.append(record)
    return out


def write_jsonl(path, records, blank_lines: bool = False) -> None:
    with path.open("w", encoding="utf-8") as fh:
        for r in records:
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")
            if blank_lines:
                fh.write("\n")


def counts(database) -> tuple[int, int]:
    with database.admin() as conn:
        return conn.execute("select (select count(*) from pymem.memories), (select count(*) from pymem.ledger)").fetchone()


@pytest.fixture
def mem(store):
    return store.bind(Context(tenant="acme", actor="importer"))


@pytest.mark.slow
def test_ten_thousand_records_round_trip(mem, store, tmp_path, database):
    records = make_records(10_000)
    source = tmp_path / "in.jsonl"
    write_jsonl(source, records)
    report = import_file(mem, source)
    assert report.as_dict() | {"digest": None} == {"records": 10_000, "batches": 20, "written_batches": 20,
                                                    "replayed_batches": 0, "batch_size": 500, "digest": None}
    out = io.StringIO()
    assert export_records(mem, out) == 10_000
    exported = [json.loads(line) for line in out.getvalue().splitlines()]
    assert exported == sorted(records, key=lambda r: r["id"])  # verbatim, in id order
    # the export imports back to the same records, and exports to the same bytes
    again = tmp_path / "out.jsonl"
    again.write_text(out.getvalue(), encoding="utf-8")
    other = store.bind(Context(tenant="copy", actor="importer"))
    import_file(other, again)
    out2 = io.StringIO()
    export_records(other, out2)
    assert out2.getvalue() == out.getvalue()
    assert other.get("rec-00100") == {**records[100], "revision": 1}
    assert counts(database) == (20_000, 20_000)


def test_an_interrupted_import_resumes_without_duplicates(mem, tmp_path, database):
    records = make_records(2_000, vectors_every=50)
    source = tmp_path / "in.jsonl"
    write_jsonl(source, records, blank_lines=True)

    class Interrupted(Exception):
        pass

    def crash_after_three(index, n, replayed):
        if index == 2:
            raise Interrupted

    with pytest.raises(Interrupted):
        import_file(mem, source, batch_size=300, on_batch=crash_after_three)
    assert counts(database) == (900, 900)
    report = import_file(mem, source, batch_size=300)
    assert (report.batches, report.replayed_batches, report.written_batches) == (7, 3, 4)
    assert counts(database) == (2_000, 2_000)  # each record once, and no update events
    with database.admin() as conn:
        assert conn.execute("select count(distinct id), max(revision) from pymem.memories").fetchone() == (2_000, 1)
        assert conn.execute("select count(*) from pymem.ledger where event <> 'memory.insert'").fetchone()[0] == 0
    assert import_file(mem, source, batch_size=300).replayed_batches == 7  # a third run writes nothing
    assert counts(database) == (2_000, 2_000)


@pytest.mark.parametrize("lines, line_no, words", [
    (['{"id": "a"}', '{"id": "b",'], 2, "not valid JSON"),
    (['{"id": "a"}', '', '[1, 2]'], 3, "expected a JSON object"),
    (['{"id": "a"}', '{"id": "b", "embedding": [1, 2]}'], 2, "dimensions"),
    (['{"id": "a", "origin": "injected_context"}'], 1, "injection_source"),
    (['{"id": "a"}', '{"chunk_id": "a"}'], 2, "repeats line 1"),
    (['{"id": "a"}', '{"no": "id"}'], 2, "no id"),
])
def test_a_bad_file_is_refused_with_its_line_number_and_nothing_written(mem, tmp_path, database, lines, line_no,
                                                                         words):
    source = tmp_path / "bad.jsonl"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    before = counts(database)
    with pytest.raises(InvalidArguments) as err:
        import_file(mem, source)
    assert f"line {line_no}" in str(err.value) and words in str(err.value)
    assert counts(database) == before


def test_import_refuses_a_bad_batch_size(mem, tmp_path):
    source = tmp_path / "in.jsonl"
    write_jsonl(source, make_records(3))
    for bad in (0, 10_001, True, "5"):
        with pytest.raises(InvalidArguments):
            import_file(mem, source, batch_size=bad)


# -- the command line ----------------------------------------------------------------------------

@pytest.fixture
def cli(database):
    env = {"PYMEM_DSN": database.app_dsn, "PYMEM_ADMIN_DSN": database.admin_dsn, "PYMEM_EMBEDDING_DIM": str(DIM),
           "PYMEM_TENANT": "acme", "PYMEM_ACTOR": "cli", "PYMEM_SCOPE": "", "PYMEM_ADAPTER": ""}
    runner = CliRunner()

    def run(*args, input=None):
        return runner.invoke(main, list(args), env=env, input=input, catch_exceptions=False)
    return run


def test_cli_import_export_get_delete_search(cli, tmp_path):
    records = make_records(30, vectors_every=1)
    source = tmp_path / "in.jsonl"
    write_jsonl(source, records)
    result = cli("import", str(source), "--batch-size", "10")
    assert result.exit_code == 0 and "imported 30 records in 3 batches (3 written, 0 already done)" in result.output
    result = cli("import", str(source), "--batch-size", "10", "--json")
    assert json.loads(result.output)["replayed_batches"] == 3

    out = tmp_path / "out.jsonl"
    assert cli("export", "--output", str(out)).exit_code == 0
    assert [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()] == records
    assert cli("export").output == out.read_text(encoding="utf-8")

    got = cli("get", "rec-00003", "--json")
    assert got.exit_code == 0 and json.loads(got.output) == {**records[3], "revision": 1}
    shown = cli("get", "rec-00003").output
    assert "<384 numbers>" in shown and "memory 3" in shown
    missing = cli("get", "nope")
    assert missing.exit_code == 1

    query = tmp_path / "q.json"
    query.write_text(json.dumps(records[4]["embedding"]), encoding="utf-8")
    hits = json.loads(cli("search", "--vector-file", str(query), "--top-k", "3", "--json").output)
    assert [set(h) for h in hits] == [{"chunk_id", "score", "revision", "chunk"}] * 3
    assert hits[0]["chunk_id"] == "rec-00004" and hits[0]["chunk"] == records[4]
    scoped = json.loads(cli("search", "--vector-file", "-", "--top-k", "30", "--scope-filter", "agent=a1", "--json",
                            input=json.dumps(records[4]["embedding"])).output)
    assert len(scoped) == 10 and all(h["chunk"]["scope"] == {"agent": "a1"} for h in scoped)
    table = cli("search", "--vector-file", str(query), "--top-k", "2").output
    assert table.splitlines()[0].split() == ["rank", "chunk_id", "score", "revision", "recalled_view"]
    assert "rec-00004" in table.splitlines()[1]

    deleted = cli("delete", "rec-00003", "rec-00004", "nope", "--json")
    assert json.loads(deleted.output) == {"deleted": 2}
    assert cli("get", "rec-00003").exit_code == 1


def test_cli_errors_are_clear(cli, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a"}\n{oops\n', encoding="utf-8")
    result = cli("import", str(bad))
    assert result.exit_code == 2 and "bad.jsonl, line 2: not valid JSON" in result.output
    query = tmp_path / "q.json"
    query.write_text("[1, 2, 3]", encoding="utf-8")
    result = cli("search", "--vector-file", str(query), "--top-k", "3")
    assert result.exit_code == 2 and "3 dimensions" in result.output
    query.write_text(json.dumps([0.1] * DIM), encoding="utf-8")
    assert cli("search", "--vector-file", str(query), "--top-k", "0").exit_code == 2
    assert cli("search", "--vector-file", str(query), "--scope-filter", "agent").exit_code == 2


@pytest.mark.parametrize("command", ["import", "export", "get", "delete", "search"])
def test_every_data_command_has_an_example_and_the_context_options(command):
    result = CliRunner().invoke(main, [command, "--help"])
    assert result.exit_code == 0
    assert "Example: pymem " + command in result.output
    for option in ("--tenant", "--actor", "--adapter", "--scope"):
        assert option in result.output


@pytest.mark.slow
def test_an_import_process_killed_halfway_then_rerun_writes_each_record_once(database, tmp_path):
    """A real `pymem import` process is SIGKILLed after some batches committed; the re-run
    replays those batches and writes the rest, each record exactly once."""
    import os
    import signal
    import subprocess
    import sys
    import time

    total = 10_000
    records = make_records(total, vectors_every=10)
    path = tmp_path / "big.jsonl"
    write_jsonl(path, records)
    env = dict(os.environ, PYMEM_DSN=database.app_dsn, PYMEM_ADMIN_DSN=database.admin_dsn,
               PYMEM_EMBEDDING_DIM=str(DIM), PYMEM_TENANT="acme", PYMEM_ACTOR="importer",
               PYMEM_SCOPE="", PYMEM_ADAPTER="")
    command = [sys.executable, "-m", "pymem.cli", "import", "--batch-size", "100", str(path)]
    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        written = 0
        while time.monotonic() < deadline and proc.poll() is None:
            written = counts(database)[0]
            if written >= 1_000:
                break
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    at_kill = counts(database)[0]
    assert 0 < at_kill < total, f"the kill should land mid-import (found {at_kill} of {total} rows)"

    rerun = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    with database.admin() as conn:
        ids = [r[0] for r in conn.execute("select id from pymem.memories where tenant_id = 'acme'")]
    assert len(ids) == total and len(set(ids)) == total
    assert set(ids) == {r["id"] for r in records}
