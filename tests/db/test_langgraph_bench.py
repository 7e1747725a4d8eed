"""`pymem bench --langgraph` end to end at a small size: every figure is reported, PymemStore
returns the full top k for every search at every namespace size, and the scratch database is
gone afterwards. A benchmark: nothing here asserts a timing."""

from __future__ import annotations

import os

import psycopg
import pytest

from benchmarks.langgraph_bench import VARIANTS, LangGraphBenchConfig, format_report, run


@pytest.mark.slow
def test_the_langgraph_bench_runs_complete_and_cleans_up(store, server_dsn):
    name = f"pymem_bench_lg_test_{os.getpid()}"
    report = run(store, LangGraphBenchConfig(rows=3_000, dims=16, queries=5, database=name))
    assert [s["share"] for s in report["search"]] == ["0.1%", "1%", "10%", "50%"]
    assert [s["items"] for s in report["search"]] == [3, 30, 300, 1500]
    for s in report["search"]:
        assert set(s["variants"]) == set(VARIANTS)
        assert s["variants"]["PymemStore"]["full_top_k_share"] == 1.0  # complete however small the namespace
        assert s["variants"]["PymemStore"]["recall"] >= 0.9
    assert report["load"]["items"] == 3_000
    text = format_report(report)
    assert "PostgresStore iterative" in text and "items/s" in text
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        assert conn.execute("select count(*) from pg_database where datname = %s", (name,)).fetchone()[0] == 0
