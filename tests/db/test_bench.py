"""`pymem bench` end to end at a toy size: the report has every figure, and the scratch database
is gone afterwards. It is a benchmark, so nothing here asserts a timing."""

from __future__ import annotations

import os

import psycopg
import pytest

from pymem.tools.bench import VARIANTS, BenchConfig, format_report, run


@pytest.mark.slow
def test_bench_runs_and_cleans_up(store, server_dsn):
    name = f"pymem_bench_test_{os.getpid()}"
    report = run(store, BenchConfig(rows=1_000, dims=8, queries=3, write_rows=500, database=name))
    assert [s["share"] for s in report["search"]] == ["0.1%", "1%", "10%", "50%"]
    for s in report["search"]:
        assert set(s["variants"]) == set(VARIANTS)
        assert s["variants"]["pymem"]["full_top_k_share"] == 1.0  # top_k counts in-scope rows, always
        assert s["variants"]["raw exact"]["recall"] == 1.0
    assert report["load"]["rows"] == 1_000
    assert report["upsert"]["rows"] == 500 and report["upsert"]["pymem_rows_per_s"] > 0
    assert report["verify"]["entries"] == 1_500
    text = format_report(report)
    assert "raw iterative" in text and "entries/s" in text
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        assert conn.execute("select count(*) from pg_database where datname = %s", (name,)).fetchone()[0] == 0
