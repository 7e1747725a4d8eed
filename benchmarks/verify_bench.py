"""`pymem bench --verify`: full verification against verification since the newest checkpoint.

In a scratch database of its own (default `pymem_bench_verify`, dropped afterwards unless kept) it
writes `rows` memories through pymem's write path (upsert_many, batches of 500, vectors of `dims`
dimensions in the rows and their records, spread over `tenants` tenants), signs every tenant's head
as `pymem anchor` does, then writes `new` more ledger entries (three quarters new memories, a
quarter updates of old ones, spread over the tenants). It then times, in rounds of rotating order on
the same snapshot of data:

- full: what `pymem verify` runs (pymem.integrity.verify.verify_store: every entry, every live row
  re-hashed, on JOBS connections);
- since: what `pymem verify --since-checkpoint` runs (the chain from each newest checkpoint, the rows
  of the memories with an event since, one connection);
- and the same two with the independent verifier (every hash computed in Python from the raw rows),

and reports each one's median, the entries and rows each one checked, and since / full.
"""

from __future__ import annotations

import dataclasses
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from pymem.context import Context
from pymem.errors import InvalidArguments, ServerError

from .bench import scratch_database, server_facts

BATCH = 500


@dataclass
class VerifyBenchConfig:
    rows: int = 100_000
    new: int = 1_000
    dims: int = 384
    tenants: int = 4
    rounds: int = 3
    seed: int = 42
    database: str = "pymem_bench_verify"
    keep: bool = False

    def check(self) -> None:
        if not 1_000 <= self.rows <= 10_000_000 or not 1 <= self.new <= self.rows:
            raise InvalidArguments("--rows must be between 1,000 and 10,000,000, and the new entries at most --rows")
        if not 2 <= self.dims <= 2_000 or not 1 <= self.tenants <= 100 or not 1 <= self.rounds <= 20:
            raise InvalidArguments("--dims must be 2..2,000")
        if not self.database.replace("_", "").isalnum():
            raise InvalidArguments("the bench database name must be letters, digits and underscores")


def _record(rng: random.Random, tenant: str, i: int, dims: int, note: str = "") -> dict[str, Any]:
    vector = [round(rng.uniform(-1, 1), 6) for _ in range(dims)]
    return {"id": f"{tenant}-{i}", "scope": {"agent": f"a{i % 4}"}, "content": f"synthetic memory {i}{note}",
            "embedding": vector}


def _load(store, admin, config: VerifyBenchConfig, progress: Callable[[str], None]) -> dict[str, int]:
    """`rows` memories, tenants interleaved batch by batch; the HNSW index is dropped (verification
    never reads it, and building it would only lengthen the run)."""
    admin.execute("drop index if exists pymem.memories_embedding_hnsw")
    rng = random.Random(config.seed)
    names = [f"t{j + 1}" for j in range(config.tenants)]
    sizes = {t: config.rows // config.tenants + (1 if j < config.rows % config.tenants else 0)
             for j, t in enumerate(names)}
    batches = [(t, start, min(start + BATCH, n)) for t, n in sizes.items() for start in range(0, n, BATCH)]
    rng.shuffle(batches)
    done = 0
    t0 = time.perf_counter()
    for i, (tenant, start, end) in enumerate(batches):
        mem = store.bind(Context(tenant=tenant, actor="bench"))
        mem.upsert_many([_record(rng, tenant, j, config.dims) for j in range(start, end)],
                        idempotency_key=f"load-{start}")
        done += end - start
        if i % 20 == 0 or i == len(batches) - 1:
            progress(f"loaded {done:,} / {config.rows:,} rows ({done / (time.perf_counter() - t0):,.0f} rows/s)")
    admin.execute("vacuum analyze pymem.memories")
    admin.execute("vacuum analyze pymem.ledger")
    return sizes


def _write_new(store, sizes: dict[str, int], config: VerifyBenchConfig) -> dict[str, int]:
    """`new` ledger entries after the checkpoint: three quarters new memories, a quarter updates of
    old ones, spread over the tenants in batches of at most 50."""
    rng = random.Random(config.seed + 1)
    names = list(sizes)
    inserts = config.new - config.new // 4
    writes: dict[str, list[dict[str, Any]]] = {t: [] for t in names}
    for k in range(config.new):
        t = names[k % len(names)]
        i = sizes[t] + k if k < inserts else rng.randrange(sizes[t])
        writes[t].append(_record(rng, t, i, config.dims, note=" (after the checkpoint)"))
    calls = 0
    for t, records in writes.items():
        mem = store.bind(Context(tenant=t, actor="bench"))
        batch: list[dict[str, Any]] = []
        for r in [*records, None]:
            # a batch names an id once: a second write of it waits for the next batch
            if r is None or len(batch) == 50 or any(b["id"] == r["id"] for b in batch):
                if batch:
                    calls += 1
                    mem.upsert_many(batch, idempotency_key=f"new-{calls}")
                batch = []
            if r is not None:
                batch.append(r)
    return {"inserts": inserts, "updates": config.new - inserts}


def run(store, config: VerifyBenchConfig, progress: Callable[[str], None] = lambda _m: None) -> dict[str, Any]:
    """Run the benchmark next to `store` (same server, its own database); returns the report."""
    from pymem.integrity.checkpoints import FileSink, anchor
    from pymem.integrity.incremental import verify_since
    from pymem.integrity.independent import PythonBytes, verify_independently
    from pymem.integrity.signing import load_or_create_key
    from pymem.integrity.streamed import DatabaseBytes
    from pymem.integrity.verify import JOBS, verify_store

    config.check()
    started = time.perf_counter()
    report: dict[str, Any] = {"config": dataclasses.asdict(config)}
    with scratch_database(store, config, progress) as scratch, tempfile.TemporaryDirectory() as keys:
        admin, bench_store = scratch.admin, scratch.store
        sizes = _load(bench_store, admin, config, progress)
        report["server"] = server_facts(admin)
        key = load_or_create_key(Path(keys) / "signing-ed25519.pem")
        sink = FileSink(Path(keys) / "checkpoints.jsonl")
        with psycopg.connect(scratch.admin_dsn) as conn:
            made, earlier = anchor(conn, sink, key)
        if not earlier.clean or len(made) != len(sizes):  # pragma: no cover - would be a bug in pymem
            raise ServerError("anchoring the bench's tenants failed")
        progress(f"anchored {len(made)} tenant heads; writing {config.new:,} entries after them")
        report["new"] = _write_new(bench_store, sizes, config)
        admin.execute("vacuum analyze pymem.memories")
        admin.execute("vacuum analyze pymem.ledger")

        def connect():
            return psycopg.connect(scratch.admin_dsn)

        def full_independent():
            with psycopg.connect(scratch.admin_dsn) as conn:
                return verify_independently(conn)

        variants = {
            "full": lambda: verify_store(bench_store),
            "since": lambda: verify_since(connect, None, DatabaseBytes(), sink.read(), trusted_key=key.public_hex),
            "full independent": full_independent,
            "since independent": lambda: verify_since(connect, None, PythonBytes(), sink.read(),
                                                      trusted_key=key.public_hex),
        }
        seconds: dict[str, list[float]] = {name: [] for name in variants}
        checked: dict[str, dict[str, int]] = {}
        names = list(variants)
        for r in range(config.rounds):
            for name in names[r % len(names):] + names[:r % len(names)]:
                progress(f"round {r + 1}/{config.rounds}: {name}")
                t0 = time.perf_counter()
                result = variants[name]()
                seconds[name].append(time.perf_counter() - t0)
                if not result.clean:  # pragma: no cover - would be a bug in pymem
                    raise ServerError(f"{name} verification found a problem: {result.first_problem}")
                checked[name] = {"entries": result.entries,
                                 "rows_checked": sum(t.rows_checked for t in result.tenants)}
        report["jobs_full"] = JOBS
        report["variants"] = {name: {**checked[name], "median_s": round(statistics.median(s), 4),
                                     "runs_s": [round(x, 4) for x in s]} for name, s in seconds.items()}
        v = report["variants"]
        report["since_vs_full"] = round(v["since"]["median_s"] / v["full"]["median_s"], 4)
        report["since_vs_full_independent"] = round(
            v["since independent"]["median_s"] / v["full independent"]["median_s"], 4)
    report["seconds"] = round(time.perf_counter() - started, 1)
    return report


def format_report(report: dict[str, Any]) -> str:
    c, v = report["config"], report["variants"]
    lines = [f"pymem bench --verify: {c['rows']:,} rows x {c['dims']} dims in {c['tenants']} tenants, anchored, then "
             f"{c['new']:,} new entries ({report['new']['inserts']:,} inserts, {report['new']['updates']:,} updates); "
             f"median of {c['rounds']} rounds; PostgreSQL {report['server']['postgres']}",
             "", f"{'variant':<18} {'entries':>9} {'rows':>9} {'median s':>9}"]
    for name, r in v.items():
        lines.append(f"{name:<18} {r['entries']:>9,} {r['rows_checked']:>9,} {r['median_s']:>9.3f}")
    lines += ["", f"since / full: {report['since_vs_full']:.2%} (goal <= 10 %); independent: "
                  f"{report['since_vs_full_independent']:.2%}; full verification on {report['jobs_full']} connections, "
                  "since on one"]
    return "\n".join(lines)


__all__ = ["VerifyBenchConfig", "run", "format_report"]
