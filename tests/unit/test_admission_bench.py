"""`pymem bench --admission`: its notes, its report's shape, and the command (no timings asserted:
performance targets live in the benchmark itself). No database."""

from __future__ import annotations

import functools
import json

import pytest
from click.testing import CliRunner

from benchmarks import admission_bench
from benchmarks.admission_bench import BANDS, format_admission_report, measure, run_admission_bench, sample_notes
from pymem.admission.judge import check_content
from pymem.admission.policy import AdmissionPolicy
from pymem.admission.provenance import Provenance
from pymem.cli import main
from pymem.errors import InvalidArguments


def test_the_notes_fill_every_band_and_are_the_same_every_time():
    notes = sample_notes(5)
    assert notes == sample_notes(5) and len(notes) == 5 * len(BANDS)
    for k, (lo, hi) in enumerate(BANDS):
        assert all(lo <= len(n) < hi for n in notes[5 * k:5 * k + 5])


def test_the_benchmark_notes_are_ordinary_memory_the_gate_admits():
    provenance = Provenance("user_asserted", source="chat")
    refused = [n[:60] for n in sample_notes(100) if check_content({"content": n, "kind": "note"}, provenance,
                                                                   AdmissionPolicy()) is not None]
    assert refused == []


def test_the_report_compares_both_checks_per_band():
    report = run_admission_bench(per_band=3, repeat=1)
    assert [b["chars"] for b in report["bands"]] == [f"{lo}-{hi}" for lo, hi in BANDS]
    for row in [*report["bands"], report["all"]]:
        assert row["signatures_p50_ms"] > 0 and row["with_classifier_p50_ms"] > 0
        assert row["ratio_mean"] == pytest.approx(row["with_classifier_mean_ms"] / row["signatures_mean_ms"], rel=0.01)
    assert report["all"]["notes"] == 3 * len(BANDS) and report["classifier"] == "classifier.v1"
    text = format_admission_report(report)
    assert "before p50" in text and "after p99" in text and "goal at most 3x" in text


def test_bad_arguments_are_typed_errors():
    with pytest.raises(InvalidArguments):
        run_admission_bench(per_band=0)
    with pytest.raises(InvalidArguments):
        measure(["a note"], repeat=0)
    with pytest.raises(InvalidArguments):
        measure([])


@pytest.mark.slow
def test_the_command_runs_offline_and_prints_json(monkeypatch):
    # Every default note is checked as the command checks it; each is timed once rather than best
    # of three (what is asserted here is the report, not its timings), which takes 3/7 of the time.
    monkeypatch.setattr(admission_bench, "run_admission_bench",
                        functools.partial(admission_bench.run_admission_bench, repeat=1))
    result = CliRunner().invoke(main, ["bench", "--admission", "--json"], catch_exceptions=False,
                                env={"PYMEM_DSN": "postgresql://nobody@127.0.0.1:1/none"})  # never connects
    assert result.exit_code == 0
    report = json.loads(result.output.splitlines()[-1])
    assert report["all"]["notes"] == 100 * len(BANDS) and report["refused"] == 0
    assert report["repeat"] == 1
