"""`pymem bench` end to end at a toy size: the report has every figure, and the scratch database
is gone afterwards. It is a benchmark, so nothing here asserts a timing."""

from __future__ import annotations

import os

import psycopg
import pytest

from benchmarks.bench import VARIANTS, BenchConfig, format_report, run


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


@pytest.mark.slow
def test_bench_reports_the_stable_keys_and_scales(store, server_dsn):
    """The figures the issue tracks sit under stable keys, and --scaling tabulates each size."""
    from benchmarks.bench import format_scaling, run_scaling

    name = f"pymem_bench_scale_{os.getpid()}"
    result = run_scaling(store, BenchConfig(dims=8, queries=2, write_rows=500, database=name), sizes=(1_000, 2_000))
    assert [t["rows"] for t in result["scaling"]] == [1_000, 2_000]
    for report in result["reports"]:
        assert report["verify"]["entries_per_s"] > 0 and report["verify"]["rows_checked"] == report["verify"]["entries"]
        assert report["load"]["pymem_vs_raw_copy"] > 0 and report["upsert"]["pymem_vs_raw_insert"] > 0
        assert all("pymem_p50_vs_fastest_good_raw" in s for s in report["search"])
        assert report["load"]["raw_copy_rows_per_s"] == max(report["load"]["raw_copy_binary_rows_per_s"],
                                                            report["load"]["raw_copy_text_rows_per_s"])
    for t in result["scaling"]:
        assert set(t["search_p50_ms"]) == {"0.1%", "1%", "10%", "50%"} and t["verify_us_per_entry"] > 0
    text = format_scaling(result)
    assert "2,000" in text and "us/entry" in text
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        assert conn.execute("select count(*) from pg_database where datname = %s", (name,)).fetchone()[0] == 0


@pytest.mark.slow
def test_bench_hybrid_mode_reports_hybrid_beside_vector(store, server_dsn):
    """--hybrid: rows carry words, the hybrid variants run beside the vector ones, each measured
    against its exact twin, and pymem's hybrid search returns the full top_k at every size."""
    from benchmarks.bench import HYBRID_VARIANTS

    name = f"pymem_bench_hybrid_{os.getpid()}"
    report = run(store, BenchConfig(rows=1_000, dims=8, queries=3, write_rows=500, database=name, hybrid=True))
    for s in report["search"]:
        assert set(s["variants"]) == set(VARIANTS) | set(HYBRID_VARIANTS)
        for variant in ("pymem hybrid", "pymem hybrid exact", "raw hybrid", "raw hybrid exact"):
            assert s["variants"][variant]["full_top_k_share"] == 1.0, (s["share"], variant)
        assert s["variants"]["pymem hybrid exact"]["recall"] == 1.0
        assert s["variants"]["raw hybrid exact"]["recall"] == 1.0
        assert "hybrid_p50_vs_fastest_good_raw_hybrid" in s and "hybrid_p50_vs_fastest_good_raw" in s
    text = format_report(report)
    assert "pymem hybrid p50 =" in text and "raw hybrid exact" in text
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        assert conn.execute("select count(*) from pg_database where datname = %s", (name,)).fetchone()[0] == 0


def test_hybrid_rows_keep_the_vectors_of_the_vector_only_run():
    """The words come from a random source of their own: --hybrid times the same vectors."""
    from benchmarks.bench import _Data

    plain, worded = _Data(8, 4, 1), _Data(8, 4, 1, words=True)
    a = [plain.record("t", i) for i in range(20)]
    b = [worded.record("t", i) for i in range(20)]
    assert [r["embedding"] for r in a] == [r["embedding"] for r in b]
    assert all("content" not in r for r in a) and all(len(r["content"].split()) == 12 for r in b)
    vector, words = worded.query()
    assert len(vector) == 8 and len(words.split()) == 4
