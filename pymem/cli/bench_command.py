"""`pymem bench`: pymem's search and writes side by side with raw pgvector on the same rows.

The benchmarks live in the source checkout's `benchmarks/` package (not in the wheel): the command
imports them when it runs, and says how to get them where they are absent.
"""

from __future__ import annotations

import json

import click

from .common import echo_json, handle_errors, json_option, open_store, stderr, workshop


@click.command()
@click.option("--rows", type=click.IntRange(1_000, 10_000_000), default=100_000, show_default=True,
              help="Rows in the synthetic data set.")
@click.option("--dims", type=click.IntRange(2, 2_000), default=384, show_default=True, help="Vector dimensions.")
@click.option("--queries", type=click.IntRange(1, 10_000), default=None,
              help="Queries per tenant (or namespace) size and variant [default: 100; 200 with --langgraph].")
@click.option("--top-k", type=click.IntRange(1, 1_000), default=10, show_default=True)
@click.option("--write-rows", type=click.IntRange(500, 1_000_000), default=None,
              help="Rows for the upsert-throughput test [default: 5 % of --rows, 1,000 to 5,000].")
@click.option("--database", default=None,
              help="Scratch database to create (dropped and recreated) on the store's server "
                   "[default: pymem_bench, or pymem_bench_langgraph with --langgraph].")
@click.option("--keep", is_flag=True, help="Keep the scratch database afterwards.")
@click.option("--langgraph", "langgraph", is_flag=True,
              help="Instead: PymemStore against LangGraph's PostgresStore on the same items, in namespaces "
                   "holding 0.1 %, 1 %, 10 % and 50 % of them (needs pip install 'pymem-pg[test]').")
@click.option("--admission", is_flag=True,
              help="Instead: the write gate's content check per note, signatures only vs with the classifier "
                   "(offline, no database).")
@click.option("--deliver", "deliver", is_flag=True,
              help="Instead: what one deliver costs (pool checkouts, round trips and statements on the wire, "
                   "p50/p95), deliver and deliver with lessons (what the service runs); --queries sets the calls "
                   "[default: 200].")
@click.option("--latency", is_flag=True,
              help="Instead: recall and deliver p50/p95 at k = 10 with embedding excluded (queries embedded "
                   "beforehand), on one tenant of 600 memories, beside pymem.search alone (hybrid and vector) and "
                   "recall with its verdict cache emptied; --queries sets the calls [default: 200].")
@click.option("--aio", "aio_", is_flag=True,
              help="Instead: the storage verbs and recall through pymem.aio beside pymem, one caller (p50/p95, CPU per "
                   "call) and --workers callers at once (threads vs tasks on one loop); --queries sets the calls "
                   "[default: 200].")
@click.option("--workers", type=click.IntRange(1, 256), default=16, show_default=True,
              help="Concurrent callers for --aio.")
@click.option("--hostile", is_flag=True,
              help="Instead: through `pymem serve`, 4 clients sending 64 KiB notes for --seconds; /healthz p99 and a "
                   "quiet tenant's recall p50 against idle, and one 64 KiB note's decision time.")
@click.option("--fairness", is_flag=True,
              help="Instead: through `pymem serve`, one tenant running 4 concurrent 2,000-record upsert_many for "
                   "--seconds; a quiet tenant's list p50 against idle.")
@click.option("--verify", "verify", is_flag=True,
              help="Instead: full verification against verification since the newest checkpoint, on --rows memories "
                   "anchored and then --write-rows new ledger entries [default 1,000], in a scratch database "
                   "(pymem_bench_verify).")
@click.option("--seconds", type=click.FloatRange(5, 3600), default=30.0, show_default=True,
              help="How long --hostile and --fairness load the service.")
@click.option("--hybrid", is_flag=True,
              help="Storage benchmark: rows get words, and hybrid search (text + vector fused in SQL) is timed too, "
                   "beside raw SQL doing the same fusion on the plain table (recall against each one's exact twin).")
@click.option("--scaling", is_flag=True,
              help="Run the whole benchmark at 10,000, 30,000 and 100,000 rows (--rows is ignored) and tabulate "
                   "search p50, upsert rows/s and verification throughput per size.")
@json_option
@handle_errors
def bench(rows: int, dims: int, queries: int | None, top_k: int, write_rows: int | None, database: str | None,
          keep: bool, langgraph: bool, admission: bool, deliver: bool, latency: bool, aio_: bool, workers: int,
          hostile: bool, fairness: bool, verify: bool, seconds: float,
          hybrid: bool, scaling: bool, as_json: bool) -> None:
    """Benchmark pymem against raw pgvector on the same synthetic, clustered rows.

    Builds a separate database with tenants holding about 0.1 %, 1 %, 10 % and 50 % of the rows
    and prints, per tenant size, search latency p50/p95, the share of queries returning the full
    top_k and recall@k vs exact search, for pymem and for raw SQL on a plain table with the same
    HNSW index (naive, iterative scan, exact); then the initial load (pymem vs raw COPY), upsert
    rows/s into the indexed tables (pymem vs raw INSERT and COPY) and full verification entries/s
    (as `pymem verify` runs it, and inside the database). --scaling repeats it at 10k, 30k and
    100k rows. Needs the administrative connection (PYMEM_ADMIN_DSN, or the embedded server's) to
    create the database. Progress goes to standard error.

    With --langgraph, the same rows become LangGraph items in one tenant, in namespaces of those
    sizes, and it prints per namespace size, side by side, PymemStore, PostgresStore with default
    settings and PostgresStore with iterative scans switched on: p50/p95, the share of searches
    returning the full top_k and recall@k vs exact search.

    With --admission, instead: the write gate's content check on 400 ordinary notes of 50 to
    2,000 characters, as it was (signatures only) and as it is (signatures + the classifier),
    p50/p99 per note side by side, and the ratio against the goal (at most 3x at p50 for notes
    of 200 to 500 characters).

    With --deliver, instead: one tenant with 300 memories and 12 sessions in a scratch database
    (pymem_bench_deliver), and --queries deliveries of one session's turns, as deliver and as
    deliver_with_lessons (what the service's deliver runs), side by side: pool checkouts, round trips and statements per
    call (read off the wire by a counting proxy) and latency p50/p95.

    With --latency, instead: one tenant of 600 memories in a scratch database
    (pymem_bench_latency) and --queries calls each of recall and deliver at k = 10, the queries
    embedded before the clock starts, beside pymem.search alone (hybrid and vector) and recall
    with the verdict cache emptied before each call: p50/p95 against the targets (recall <= 15 ms,
    deliver <= 30 ms).

    With --verify, instead: --rows memories (--dims dimensions, 4 tenants) written through pymem,
    every tenant's head anchored, then --write-rows new ledger entries (default 1,000: three
    quarters new memories, a quarter updates); full verification and verification since the
    checkpoint (pymem verify and pymem verify --since-checkpoint, and each with the independent
    verifier), median of 3 rounds, and since / full against the goal of at most 10 %.

    With --aio, instead: one tenant of 1,000 memories in a scratch database (pymem_bench_aio), and
    search, get, a one-record upsert_many and recall by vector through pymem.aio beside the same
    calls through pymem, interleaved: p50/p95 and CPU per call; then --workers callers at once,
    threads on pymem.Store against tasks on one event loop on pymem.aio.Store: calls per second.

    With --hostile or --fairness, instead: `pymem serve` is started on a loopback port against the
    configured store and loaded from other processes (benchmarks.load_bench); the quiet tenant's
    p50 is reported beside its idle value in the same run.

    Development installs only: the benchmarks are the source checkout's benchmarks/ package, not
    in the wheel (pip install -e '.[test]' in a clone).

    Example: pymem bench --rows 20000 --queries 50
    """
    if hostile or fairness:
        load_bench = workshop("load_bench", "pymem bench")

        run = load_bench.run_hostile if hostile else load_bench.run_fairness
        result = run(seconds, progress=lambda message: stderr(f"bench: {message}"))
        click.echo(json.dumps(result) if as_json else load_bench.format_load_report(result))
        return
    if sum((langgraph, admission, deliver, latency, aio_, verify)) > 1:
        raise click.UsageError("choose one of --langgraph, --admission, --deliver, --latency, --aio and --verify")
    if verify and (scaling or hybrid):
        raise click.UsageError("--scaling and --hybrid apply to the storage benchmark, not to --verify")
    if verify:
        tool = workshop("verify_bench", "pymem bench")
        config = tool.VerifyBenchConfig(rows=rows, new=write_rows or 1_000, dims=dims,
                                        database=database or "pymem_bench_verify", keep=keep)
        with open_store() as store:
            report = tool.run(store, config, progress=lambda message: stderr(f"bench: {message}"))
        click.echo(json.dumps(report) if as_json else tool.format_report(report))
        return
    if scaling and (langgraph or admission or deliver or latency or aio_):
        raise click.UsageError("--scaling applies to the storage benchmark, not to --langgraph, --admission, "
                               "--deliver, --latency or --aio")
    if hybrid and (langgraph or admission or deliver or latency or aio_):
        raise click.UsageError("--hybrid applies to the storage benchmark")
    if admission:
        admission_bench = workshop("admission_bench", "pymem bench")
        result = admission_bench.run_admission_bench(progress=lambda message: stderr(f"bench: {message}"))
        if as_json:
            echo_json(result)
        else:
            click.echo(admission_bench.format_admission_report(result))
        return
    if deliver:
        tool = workshop("deliver_bench", "pymem bench")

        config = tool.DeliverBenchConfig(calls=queries or 200, dims=dims, database=database or "pymem_bench_deliver",
                                         keep=keep)
    elif aio_:
        tool = workshop("aio_bench", "pymem bench")

        config = tool.AioBenchConfig(calls=queries or 200, workers=workers, dims=dims,
                                     database=database or "pymem_bench_aio", keep=keep)
    elif latency:
        tool = workshop("latency_bench", "pymem bench")

        config = tool.LatencyBenchConfig(calls=queries or 200, database=database or "pymem_bench_latency", keep=keep)
    elif langgraph:
        tool = workshop("langgraph_bench", "pymem bench")

        config = tool.LangGraphBenchConfig(rows=rows, dims=dims, queries=queries or 200, top_k=top_k,
                                           database=database or "pymem_bench_langgraph", keep=keep)
    else:
        tool = workshop("bench", "pymem bench")

        config = tool.BenchConfig(rows=rows, dims=dims, queries=queries or 100, top_k=top_k, write_rows=write_rows,
                                  database=database or "pymem_bench", keep=keep, hybrid=hybrid)
    progress = lambda message: stderr(f"bench: {message}")  # noqa: E731
    with open_store() as store:
        report = tool.run_scaling(store, config, progress) if scaling else tool.run(store, config, progress=progress)
    if as_json:
        echo_json(report)
    elif scaling:
        click.echo("\n\n".join([tool.format_scaling(report)] + [tool.format_report(r) for r in report["reports"]]))
    else:
        click.echo(tool.format_report(report))


def register(main: click.Group) -> None:
    main.add_command(bench)


__all__ = ["bench", "register"]
