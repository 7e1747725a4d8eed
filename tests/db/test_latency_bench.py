"""`pymem bench --latency` end to end at a toy size: every variant is reported with its p50/p95,
the targets stand beside them, and the scratch database is gone afterwards. A benchmark: nothing
here asserts a timing."""

from __future__ import annotations

import os

import psycopg
import pytest

from benchmarks.latency_bench import TARGETS_MS, VARIANTS, FixedQueryEmbedder, LatencyBenchConfig, format_report, run
from pymem.embedder import LexicalEmbedder
from pymem.errors import InvalidArguments


@pytest.mark.slow
def test_latency_bench_runs_every_variant_and_cleans_up(store, server_dsn):
    name = f"pymem_bench_latency_{os.getpid()}"
    report = run(store, LatencyBenchConfig(memories=40, sessions=3, calls=4, embedder="lexical", database=name))
    assert list(report["variants"]) == list(VARIANTS)
    for v in report["variants"].values():
        assert v["calls"] == 4 and 0 < v["p50_ms"] <= v["p95_ms"]
    assert report["config"]["embedder"] == LexicalEmbedder.name and report["config"]["top_k"] == 10
    assert report["targets_p50_ms"] == TARGETS_MS and isinstance(report["meets_targets"], bool)
    assert report["recall_kept_median"] > 0  # the queries share words with the memories: recall finds some
    text = format_report(report)
    assert "recall cold verdicts" in text and "<= 15" in text and "<= 30" in text
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        assert conn.execute("select count(*) from pg_database where datname = %s", (name,)).fetchone()[0] == 0


def test_the_fixed_query_embedder_answers_only_its_queries_and_passes_for_the_real_one():
    inner = LexicalEmbedder(16)
    fixed = FixedQueryEmbedder(inner, {"a question": [1.0] + [0.0] * 15})
    assert (fixed.name, fixed.dim, fixed.similarity_floor) == (inner.name, 16, inner.similarity_floor)
    assert fixed.embed_query(["a question"]) == [[1.0] + [0.0] * 15]
    assert fixed.embed(["a memory"]) == inner.embed(["a memory"])
    with pytest.raises(InvalidArguments):
        fixed.embed_query(["another question"])


def test_latency_bench_refuses_bad_sizes():
    with pytest.raises(InvalidArguments):
        LatencyBenchConfig(memories=5).check()
    with pytest.raises(InvalidArguments):
        LatencyBenchConfig(database="no-dashes").check()
