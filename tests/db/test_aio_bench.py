"""`pymem bench --aio` end to end at a toy size: every verb is reported for both surfaces, the
concurrent figures too, and the scratch database is gone afterwards. A benchmark: nothing here
asserts a timing."""

from __future__ import annotations

import os

import psycopg
import pytest

from benchmarks.aio_bench import VARIANTS, AioBenchConfig, format_report, run
from pymem.errors import InvalidArguments


@pytest.mark.slow
def test_aio_bench_runs_every_verb_on_both_surfaces_and_cleans_up(store, server_dsn):
    name = f"pymem_bench_aio_{os.getpid()}"
    report = run(store, AioBenchConfig(memories=30, calls=3, workers=2, database=name))
    assert list(report["single"]) == list(VARIANTS)
    for figures in report["single"].values():
        for surface in ("sync", "aio"):
            assert figures[surface]["calls"] == 3 and 0 < figures[surface]["p50_ms"] <= figures[surface]["p95_ms"]
    assert report["concurrent"]["errors"] == 0
    assert report["concurrent"]["sync_threads"]["calls_per_s"] > 0 and report["concurrent"]["aio_tasks"]["calls_per_s"] > 0
    text = format_report(report)
    assert "tasks on one loop" in text and "upsert_many" in text
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        assert conn.execute("select count(*) from pg_database where datname = %s", (name,)).fetchone()[0] == 0


def test_the_configuration_is_checked():
    with pytest.raises(InvalidArguments):
        AioBenchConfig(workers=0).check()
