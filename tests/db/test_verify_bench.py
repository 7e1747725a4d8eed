"""`pymem bench --verify` end to end at a toy size: every variant checks exactly the entries and rows
it should, and the scratch database is gone afterwards. A benchmark: nothing here asserts a timing."""

from __future__ import annotations

import os

import psycopg
import pytest
from click.testing import CliRunner

from benchmarks.verify_bench import VerifyBenchConfig, format_report, run
from pymem.errors import InvalidArguments


@pytest.mark.slow
def test_verify_bench_counts_what_each_variant_checks_and_cleans_up(store, server_dsn):
    name = f"pymem_bench_verify_{os.getpid()}"
    report = run(store, VerifyBenchConfig(rows=1_000, new=200, dims=8, rounds=1, database=name))
    v = report["variants"]
    assert report["new"] == {"inserts": 150, "updates": 50}
    for full in ("full", "full independent"):
        assert v[full]["entries"] == 1_200 and v[full]["rows_checked"] == 1_150
    for since in ("since", "since independent"):
        # the entries after the checkpoints, and the rows of the memories they concern (an update
        # may land on a memory another update or an insert of the same tenant touched: at most 200)
        assert v[since]["entries"] == 200 and 150 < v[since]["rows_checked"] <= 200
    assert report["since_vs_full"] > 0 and report["since_vs_full_independent"] > 0
    assert "since / full" in format_report(report)
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        assert conn.execute("select count(*) from pg_database where datname = %s", (name,)).fetchone()[0] == 0


def test_verify_bench_refuses_bad_sizes():
    with pytest.raises(InvalidArguments):
        VerifyBenchConfig(rows=10).check()
    with pytest.raises(InvalidArguments):
        VerifyBenchConfig(rows=1_000, new=2_000).check()
    with pytest.raises(InvalidArguments):
        VerifyBenchConfig(database="no-dashes").check()


def test_the_verify_bench_is_one_of_the_choices(database):
    from pymem.cli import main

    result = CliRunner().invoke(main, ["bench", "--verify", "--latency"],
                                env={"PYMEM_DSN": database.app_dsn, "PYMEM_ADMIN_DSN": database.admin_dsn})
    assert result.exit_code == 2 and "--verify" in result.output
