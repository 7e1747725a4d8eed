"""`pymem bench`: pymem's search and writes side by side with raw pgvector on the same rows."""

from __future__ import annotations

import click

from .common import echo_json, handle_errors, json_option, open_store, stderr


@click.command()
@click.option("--rows", type=click.IntRange(1_000, 10_000_000), default=100_000, show_default=True,
              help="Rows in the synthetic data set.")
@click.option("--dims", type=click.IntRange(2, 2_000), default=384, show_default=True, help="Vector dimensions.")
@click.option("--queries", type=click.IntRange(1, 10_000), default=100, show_default=True,
              help="Queries per tenant size and variant.")
@click.option("--top-k", type=click.IntRange(1, 1_000), default=10, show_default=True)
@click.option("--write-rows", type=click.IntRange(500, 1_000_000), default=None,
              help="Rows for the upsert-throughput test [default: 5 % of --rows, 1,000 to 5,000].")
@click.option("--database", default="pymem_bench", show_default=True,
              help="Scratch database to create (dropped and recreated) on the store's server.")
@click.option("--keep", is_flag=True, help="Keep the scratch database afterwards.")
@click.option("--scaling", is_flag=True,
              help="Run the whole benchmark at 10,000, 30,000 and 100,000 rows (--rows is ignored) and tabulate "
                   "search p50, upsert rows/s and verification throughput per size.")
@json_option
@handle_errors
def bench(rows: int, dims: int, queries: int, top_k: int, write_rows: int | None, database: str, keep: bool,
          scaling: bool, as_json: bool) -> None:
    """Benchmark pymem against raw pgvector on the same synthetic, clustered rows.

    Builds a separate database with tenants holding about 0.1 %, 1 %, 10 % and 50 % of the rows
    and prints, per tenant size, search latency p50/p95, the share of queries returning the full
    top_k and recall@k vs exact search, for pymem and for raw SQL on a plain table with the same
    HNSW index (naive, iterative scan, exact); then the initial load (pymem vs raw COPY), upsert
    rows/s into the indexed tables (pymem vs raw INSERT and COPY) and full verification entries/s
    (as `pymem verify` runs it, and inside the database). --scaling repeats it at 10k, 30k and
    100k rows. Needs the administrative connection (PYMEM_ADMIN_DSN, or the embedded server's) to
    create the database. Progress goes to standard error.

    Example: pymem bench --rows 20000 --queries 50
    """
    from ..tools.bench import BenchConfig, format_report, format_scaling, run, run_scaling

    config = BenchConfig(rows=rows, dims=dims, queries=queries, top_k=top_k, write_rows=write_rows,
                         database=database, keep=keep)
    progress = lambda message: stderr(f"bench: {message}")  # noqa: E731
    with open_store() as store:
        report = run_scaling(store, config, progress) if scaling else run(store, config, progress)
    if as_json:
        echo_json(report)
    elif scaling:
        click.echo("\n\n".join([format_scaling(report)] + [format_report(r) for r in report["reports"]]))
    else:
        click.echo(format_report(report))


def register(main: click.Group) -> None:
    main.add_command(bench)


__all__ = ["bench", "register"]
