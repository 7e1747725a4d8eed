"""`pymem eval admission` and `pymem.admission.evaluate_admission`: the committed leave-one-source-out result,
what happens when it cannot be recomputed, and (slow) recomputing one held-out source.

No database.
"""

from __future__ import annotations

import json
from importlib import resources
from importlib.util import find_spec
from pathlib import Path

import pytest
from click.testing import CliRunner

from pymem import InvalidArguments
from pymem.admission import AdmissionEvaluation, evaluate_admission
from pymem.admission import evaluation
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
            assert f"**{100 * p['combined'] / p['n']:.1f} % ({p['combined']}/{p['n']})**" in report, s["source"]


def test_evaluate_admission_returns_the_committed_table():
    ev = evaluate_admission(recompute=False)
    assert isinstance(ev, AdmissionEvaluation) and not ev.recomputed and "committed" in ev.note
    assert [s.source for s in ev.sources] == [s["source"] for s in COMMITTED["sources"]]
    assert ev.benign == sum(s["benign"]["n"] for s in COMMITTED["sources"])
    assert ev.benign_refused == sum(s["benign"]["combined"] for s in COMMITTED["sources"])
    missed = [s.source for s in ev.sources if s.payload_rate is not None and s.payload_rate < 0.9]
    assert [line.split(":")[0] for line in ev.missed_goals if not line.startswith("benign")] == missed
    data = ev.to_json()
    assert json.loads(json.dumps(data)) == data and data["benign_rate"] == ev.benign_rate


def test_the_command_prints_the_table_and_the_overall_benign_rate():
    result = run("--committed")
    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert lines[0].split() == ["held-out", "source", "payloads", "refused", "signatures", "alone", "benign", "falsely",
                                "refused", "threshold"]
    ev = evaluate_admission(recompute=False)
    for s in ev.sources:
        [row] = [line for line in lines if line.startswith(s.source + " ")]
        if s.payloads:
            assert f"({s.payloads_refused}/{s.payloads})" in row
        if s.benign:
            assert f"({s.benign_refused}/{s.benign})" in row
    assert f"benign notes falsely refused overall: {100 * ev.benign_rate:.1f} % ({ev.benign_refused}/{ev.benign})" in lines
    assert ("goals met" in lines) == (ev.missed_goals == [])
    assert lines[-1] == ev.note
    as_json = json.loads(run("--committed", "--json").output)
    assert as_json["recomputed"] is False and len(as_json["sources"]) == len(ev.sources)


def test_bad_arguments_are_typed_errors():
    with pytest.raises(InvalidArguments, match="unknown source"):
        evaluate_admission(sources=["no-such-source"])
    with pytest.raises(InvalidArguments, match="recomputing"):
        evaluate_admission(recompute=False, sources=["spikee"])
    with pytest.raises(InvalidArguments):
        evaluate_admission(recompute="yes")
    with pytest.raises(InvalidArguments):
        evaluate_admission(sources="spikee")
    result = run("--committed", "--only", "spikee")
    assert result.exit_code == 2 and "recomputing" in result.output


def test_without_the_training_code_the_committed_result_says_why(monkeypatch, tmp_path):
    monkeypatch.setattr(evaluation, "_TRAINING", tmp_path)
    ev = evaluate_admission()
    assert not ev.recomputed and "training code is not here" in ev.note
    with pytest.raises(InvalidArguments, match="cannot recompute: the training code"):
        evaluate_admission(recompute=True)


def test_without_the_train_extra_the_committed_result_says_why(monkeypatch):
    monkeypatch.setattr(evaluation, "TRAIN_MODULES", ("sklearn", "pymem_no_such_module"))
    ev = evaluate_admission()
    assert not ev.recomputed and "train extra is not installed" in ev.note and "pymem_no_such_module" in ev.note
    result = run()
    assert result.exit_code == 0 and "not recomputed: the train extra is not installed" in result.output


def test_without_the_cached_source_data_nothing_is_downloaded(monkeypatch, tmp_path):
    if any(find_spec(m) is None for m in evaluation.TRAIN_MODULES):
        pytest.skip("the train extra is not installed here")
    monkeypatch.setenv("PYMEM_TRAINING_CACHE", str(tmp_path))  # an empty cache
    ev = evaluate_admission()
    assert not ev.recomputed and "source data is not cached" in ev.note
    assert list(tmp_path.iterdir()) == []  # and nothing was fetched into it


@pytest.mark.slow
def test_recomputing_one_held_out_source():
    reason = evaluation.why_not_recomputable()
    if reason is not None:
        pytest.skip(reason)
    lines: list[str] = []
    ev = evaluate_admission(sources=["project-corpus"], progress=lines.append)
    assert ev.recomputed and [s.source for s in ev.sources] == ["project-corpus"]
    [got] = ev.sources
    [committed] = [s for s in COMMITTED["sources"] if s["source"] == "project-corpus"]
    # the same data, code and solver give the same figures as the committed run
    assert (got.payloads_refused, got.benign_refused, got.threshold) == (
        committed["payloads"]["combined"], committed["benign"]["combined"], committed["threshold"])
    assert any(line.startswith("project-corpus") for line in lines)
