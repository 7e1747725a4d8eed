"""`pymem eval admission` and `pymem.admission.evaluate_admission`: the committed leave-one-source-out result,
read by the library (recomputing it is a training command: tests/unit/test_training.py).

No database.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest
from click.testing import CliRunner

from pymem import PymemError
from pymem.admission import AdmissionEvaluation, evaluate_admission, evaluation
from pymem.admission.model import default_model, weights_sha256
from pymem.cli import main

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = json.loads(resources.files("pymem.admission").joinpath(evaluation.COMMITTED_FILE).read_text())


def run(*args):
    return CliRunner().invoke(main, ["eval", "admission", *args], catch_exceptions=False)


def test_the_committed_result_belongs_to_the_shipped_weights_and_data():
    assert COMMITTED["weights_sha256"] == weights_sha256()
    assert COMMITTED["data_sha256"] == default_model().meta["data_sha256"]
    assert sorted(s["source"] for s in COMMITTED["sources"]) == sorted(default_model().meta["examples"])
    # every example of the training data was held out once
    for s in COMMITTED["sources"]:
        counts = default_model().meta["examples"][s["source"]]
        assert (s["payloads"]["n"], s["benign"]["n"]) == (counts["payloads"], counts["benign"])
        for key in ("payloads", "benign"):
            part = s[key]
            assert part["combined"] >= max(part["signatures"], part["classifier"])
            assert part["combined"] <= min(part["n"], part["signatures"] + part["classifier"])


def test_the_committed_result_is_the_report_in_the_repository():
    report = (ROOT / "training" / "REPORT.md").read_text()
    for s in COMMITTED["sources"]:
        p = s["payloads"]
        if p["n"]:
            stopped = p["combined"] + p["held"]
            row = next(line for line in report.splitlines() if line.startswith(f"| {s['source']} |"))
            assert f"| {100 * p['combined'] / p['n']:.1f} % ({p['combined']}/{p['n']}) |" in row, s["source"]
            assert f"**{100 * stopped / p['n']:.1f} % ({stopped}/{p['n']})**" in row, s["source"]


def test_evaluate_admission_returns_the_committed_table():
    ev = evaluate_admission()
    assert isinstance(ev, AdmissionEvaluation) and not ev.recomputed and "committed" in ev.note
    assert [s.source for s in ev.sources] == [s["source"] for s in COMMITTED["sources"]]
    assert ev.benign == sum(s["benign"]["n"] for s in COMMITTED["sources"])
    assert ev.benign_refused == sum(s["benign"]["combined"] for s in COMMITTED["sources"])
    missed = [s.source for s in ev.sources if s.payload_rate is not None and s.payload_rate < ev.payload_goal]
    missed += [s.source for s in ev.sources if s.stopped_rate is not None and s.stopped_rate < ev.stopped_goal]
    assert [line.split(":")[0] for line in ev.missed_goals if not line.startswith("benign")] == missed
    assert ev.benign_held == sum(s["benign"]["held"] for s in COMMITTED["sources"])
    data = ev.to_json()
    assert json.loads(json.dumps(data)) == data and data["benign_rate"] == ev.benign_rate


def test_the_command_prints_the_table_and_the_overall_benign_rate():
    result = run()
    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert lines[0].split() == ["held-out", "source", "payloads", "refused", "held", "signatures", "alone", "benign",
                                "falsely", "refused", "held", "threshold"]
    ev = evaluate_admission()
    for s in ev.sources:
        [row] = [line for line in lines if line.startswith(s.source + " ")]
        if s.payloads:
            assert f"({s.payloads_refused}/{s.payloads})" in row and f"({s.payloads_held}/{s.payloads})" in row
        if s.benign:
            assert f"({s.benign_refused}/{s.benign})" in row and f"({s.benign_held}/{s.benign})" in row
    assert f"benign notes falsely refused overall: {100 * ev.benign_rate:.1f} % ({ev.benign_refused}/{ev.benign})" in lines
    assert f"benign notes held for review overall: {100 * ev.benign_held_rate:.1f} % ({ev.benign_held}/{ev.benign})" in lines
    assert ("goals met" in lines) == (ev.missed_goals == [])
    assert lines[-1] == ev.note
    as_json = json.loads(run("--json").output)
    assert as_json["recomputed"] is False and len(as_json["sources"]) == len(ev.sources)


def test_the_library_reads_the_committed_result_and_runs_no_training():
    """The library's evaluation reads a file: no arguments to recompute, no process started, and no
    import of the training code (which is not in the wheel)."""
    import ast
    import inspect

    assert list(inspect.signature(evaluate_admission).parameters) == []
    tree = ast.parse(Path(evaluation.__file__).read_text())
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {(n.module or "").split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not imported & {"subprocess", "multiprocessing", "training", "sklearn", "numpy", "scipy"}, imported
    ev = evaluate_admission()
    assert evaluation.RECOMPUTE_COMMAND in ev.note and evaluation.RECOMPUTE_COMMAND == "python -m training.evaluate_loso"


def test_the_command_takes_no_recompute_options_and_names_the_training_command():
    result = CliRunner().invoke(main, ["eval", "admission", "--help"])
    assert result.exit_code == 0 and "python -m training.evaluate_loso" in " ".join(result.output.split())
    for gone in ("--only", "--committed"):
        bad = run(gone) if gone == "--committed" else run(gone, "spikee")
        assert bad.exit_code == 2 and "No such option" in bad.output


def test_the_committed_result_has_the_multilingual_and_encoded_rows_and_three_decisions():
    ev = evaluate_admission()
    rows = {s.source: s for s in ev.sources}
    for family in ("multilingual", "encoded"):
        assert rows[family].payloads > 0 and rows[family].benign > 0
    for s in ev.sources:
        assert s.band is not None and 0 < s.band <= s.threshold
        assert s.payloads_refused + s.payloads_held <= s.payloads and s.benign_refused + s.benign_held <= s.benign
    assert ev.stopped_goal == 0.95 and ev.payload_goal == 0.85 and ev.benign_goal == 0.01 and ev.benign_held_goal == 0.03


def test_a_result_of_the_two_decision_format_still_reads():
    data = {"goals": {"payloads_refused": 0.9, "benign_refused": 0.02},
            "sources": [{"source": "s", "threshold": 0.7, "payloads": {"n": 10, "combined": 9, "signatures": 5, "classifier": 8},
                         "benign": {"n": 10, "combined": 0, "signatures": 0, "classifier": 0}}]}
    ev = evaluation._from_json(data, recomputed=False, note="old")
    assert ev.sources[0].payloads_held == 0 and ev.sources[0].band is None and ev.stopped_goal is None
    assert ev.missed_goals == []


def test_a_malformed_committed_result_is_a_typed_error(monkeypatch):
    monkeypatch.setattr(evaluation, "_committed", lambda: {"sources": [{"source": "x"}], "goals": {}})
    with pytest.raises(PymemError, match="malformed"):
        evaluate_admission()
