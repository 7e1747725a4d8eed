"""`pymem bench --aio`: the verbs through pymem.aio beside the same verbs through pymem, measured
side by side in one run.

It builds a scratch database next to the store (default `pymem_bench_aio`, dropped afterwards
unless asked to keep it) with one tenant of `memories` memories (random vectors: nothing is
embedded, so what is timed is the verbs' own work and their waits for Postgres), opens a
`pymem.Store` and a `pymem.aio.Store` on it, and reports:

- per call, one caller: wall time p50 / p95 and the process's CPU time per call, for `search`
  (top 10, vectors left out), `get`, `upsert_many` of one record and `recall` by vector, each
  `calls` times, the two surfaces interleaved call by call;
- under concurrency: `workers` callers each making `calls` calls (half searches, half one-record
  upserts), as threads on the sync store and as tasks on one event loop on the async store:
  calls per second and the CPU time per call.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from pymem import aio
from pymem.admission.policy import AdmissionPolicy
from pymem.admission.trust import AdapterTrustPolicy
from pymem.context import Context
from pymem.errors import InvalidArguments
from pymem.recall import recall

from .bench import scratch_database, server_facts

__all__ = ["AioBenchConfig", "VARIANTS", "run", "format_report"]

VARIANTS = ("search", "get", "upsert_many", "recall")
TOP_K = 10


@dataclass
class AioBenchConfig:
    memories: int = 1000
    calls: int = 200
    workers: int = 16
    dims: int = 384
    database: str = "pymem_bench_aio"
    keep: bool = False
    seed: int = 5

    def check(self) -> None:
        for name in ("memories", "calls", "workers", "dims"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidArguments(f"{name} must be a positive integer")


def _summary(ms: list[float], cpu: float) -> dict[str, float]:
    lat = sorted(ms)
    return {"calls": len(lat), "p50_ms": round(statistics.median(lat), 3),
            "p95_ms": round(lat[min(len(lat) - 1, int(0.95 * len(lat)))], 3),
            "cpu_ms_per_call": round(cpu / len(lat) * 1000, 3)}


def run(store, config: AioBenchConfig, progress: Callable[[str], None] = lambda _m: None) -> dict[str, Any]:
    """Run the benchmark next to `store` (same server, its own database); returns the report."""
    from pymem.storage.endpoints import Endpoints
    from pymem.storage.store import Store

    config.check()
    started = time.perf_counter()
    rng = random.Random(config.seed)
    vectors = [[rng.gauss(0, 1) for _ in range(config.dims)] for _ in range(256)]
    report: dict[str, Any] = {"config": dataclasses.asdict(config) | {"top_k": TOP_K}}
    options = dict(policy=AdmissionPolicy(), trust=AdapterTrustPolicy(), floor=-1.0)
    scratch_config = SimpleNamespace(database=config.database, keep=config.keep, dims=config.dims)
    with scratch_database(store, scratch_config, progress) as scratch:
        report["server"] = server_facts(scratch.admin)
        settings = dataclasses.replace(store.settings, embedding_dim=config.dims)
        sync_store = Store(Endpoints(app=scratch.app_dsn, admin=scratch.admin_dsn), settings,
                           pool_size=config.workers)
        ctx = Context(tenant="bench", actor="agent")
        try:
            mem = sync_store.bind(ctx)
            progress(f"writing {config.memories} memories")
            for start in range(0, config.memories, 500):
                batch = [{"id": f"m{i}", "content": f"memory {i}", "embedding": vectors[i % len(vectors)]}
                         for i in range(start, min(config.memories, start + 500))]
                mem.upsert_many(batch, idempotency_key=f"seed-{start}")
            report["single"] = asyncio.run(_single(sync_store, settings, scratch.app_dsn, scratch.admin_dsn, ctx,
                                                   vectors, config, options, progress))
            report["concurrent"] = _concurrent(sync_store, settings, scratch.app_dsn, scratch.admin_dsn, ctx,
                                               vectors, config, progress)
        finally:
            sync_store.close()
    report["seconds"] = round(time.perf_counter() - started, 1)
    return report


async def _single(sync_store, settings, app_dsn: str, admin_dsn: str, ctx: Context, vectors, config: AioBenchConfig,
                  options: dict[str, Any], progress) -> dict[str, Any]:
    """One caller, the two surfaces interleaved call by call (the sync calls block this loop,
    which nothing else uses meanwhile)."""
    astore = await aio.Store.open(dataclasses.replace(settings, dsn=app_dsn, admin_dsn=admin_dsn), pool_size=4)
    try:
        smem, amem = sync_store.bind(ctx), astore.bind(ctx)
        counter = iter(range(10**9))

        def sync_calls(i: int) -> dict[str, Callable[[], Any]]:
            v = vectors[i % len(vectors)]
            return {
                "search": lambda: smem.search(v, top_k=TOP_K, include={"embedding": False}),
                "get": lambda: smem.get(f"m{i % config.memories}"),
                "upsert_many": lambda: smem.upsert_many([{"id": f"s{next(counter)}", "content": "x", "embedding": v}],
                                                        idempotency_key=f"s{next(counter)}"),
                "recall": lambda: recall(smem, v, top_k=TOP_K, **options),
            }

        def async_calls(i: int) -> dict[str, Callable[[], Any]]:
            v = vectors[i % len(vectors)]
            return {
                "search": lambda: amem.search(v, top_k=TOP_K, include={"embedding": False}),
                "get": lambda: amem.get(f"m{i % config.memories}"),
                "upsert_many": lambda: amem.upsert_many([{"id": f"a{next(counter)}", "content": "x", "embedding": v}],
                                                        idempotency_key=f"a{next(counter)}"),
                "recall": lambda: aio.recall(amem, v, top_k=TOP_K, **options),
            }

        for i in range(10):  # warm: pools filled, plans cached, verdicts judged once
            for name in VARIANTS:
                sync_calls(i)[name]()
                await async_calls(i)[name]()
        times = {(s, n): [] for s in ("sync", "aio") for n in VARIANTS}
        cpu = {(s, n): 0.0 for s in ("sync", "aio") for n in VARIANTS}
        progress(f"{config.calls} calls per verb and surface")
        for i in range(config.calls):
            for name in VARIANTS:
                c0, t0 = time.process_time(), time.perf_counter()
                sync_calls(i)[name]()
                times["sync", name].append((time.perf_counter() - t0) * 1000)
                cpu["sync", name] += time.process_time() - c0
                c0, t0 = time.process_time(), time.perf_counter()
                await async_calls(i)[name]()
                times["aio", name].append((time.perf_counter() - t0) * 1000)
                cpu["aio", name] += time.process_time() - c0
        return {name: {surface: _summary(times[surface, name], cpu[surface, name]) for surface in ("sync", "aio")}
                for name in VARIANTS}
    finally:
        await astore.close()


def _concurrent(sync_store, settings, app_dsn: str, admin_dsn: str, ctx: Context, vectors, config: AioBenchConfig,
                progress) -> dict[str, Any]:
    """`workers` callers at once: threads on the sync store, tasks on one loop on the async one."""
    total = config.workers * config.calls
    progress(f"{config.workers} concurrent callers x {config.calls} calls, threads")
    errors: list[str] = []
    mem = sync_store.bind(ctx)

    def thread(w: int) -> None:
        for i in range(config.calls):
            v = vectors[(w * 31 + i) % len(vectors)]
            try:
                if i % 2:
                    mem.search(v, top_k=TOP_K, include={"embedding": False})
                else:
                    mem.upsert_many([{"id": f"t{w}-{i}", "content": "x", "embedding": v}], idempotency_key=f"t{w}-{i}")
            except Exception as exc:  # noqa: BLE001 - counted and reported
                errors.append(type(exc).__name__)

    def threads(first: int) -> tuple[float, float]:
        running = [threading.Thread(target=thread, args=(first + w,)) for w in range(config.workers)]
        c0, t0 = time.process_time(), time.perf_counter()
        for t in running:
            t.start()
        for t in running:
            t.join()
        return time.perf_counter() - t0, time.process_time() - c0

    threads(0)  # warm the pool first
    sync_wall, sync_cpu = threads(config.workers)

    async def tasks() -> tuple[float, float]:
        astore = await aio.Store.open(dataclasses.replace(settings, dsn=app_dsn, admin_dsn=admin_dsn),
                                      pool_size=config.workers)
        try:
            amem = astore.bind(ctx)

            async def task(w: int) -> None:
                for i in range(config.calls):
                    v = vectors[(w * 31 + i) % len(vectors)]
                    try:
                        if i % 2:
                            await amem.search(v, top_k=TOP_K, include={"embedding": False})
                        else:
                            await amem.upsert_many([{"id": f"a{w}-{i}", "content": "x", "embedding": v}],
                                                   idempotency_key=f"a{w}-{i}")
                    except Exception as exc:  # noqa: BLE001 - counted and reported
                        errors.append(type(exc).__name__)
            await asyncio.gather(*(task(w) for w in range(config.workers)))  # warm the pool first
            c0, t0 = time.process_time(), time.perf_counter()
            await asyncio.gather(*(task(w + config.workers) for w in range(config.workers)))
            return time.perf_counter() - t0, time.process_time() - c0
        finally:
            await astore.close()

    progress(f"{config.workers} concurrent callers x {config.calls} calls, tasks on one loop")
    aio_wall, aio_cpu = asyncio.run(tasks())
    def figures(wall: float, cpu: float) -> dict[str, float]:
        return {"calls_per_s": round(total / wall, 1), "cpu_ms_per_call": round(cpu / total * 1000, 3)}

    return {"sync_threads": figures(sync_wall, sync_cpu), "aio_tasks": figures(aio_wall, aio_cpu),
            "errors": len(errors)}


def format_report(report: dict[str, Any]) -> str:
    c = report["config"]
    lines = [f"pymem.aio beside pymem: {c['memories']} memories, {c['calls']} calls per verb and surface, "
             f"{c['dims']} dims; PostgreSQL {report['server']['postgres']}, pgvector {report['server']['pgvector']}",
             "", f"{'one caller':<14}{'sync p50':>10}{'aio p50':>10}{'sync p95':>10}{'aio p95':>10}"
             f"{'sync cpu':>10}{'aio cpu':>10}   (ms per call)"]
    for name, v in report["single"].items():
        s, a = v["sync"], v["aio"]
        lines.append(f"{name:<14}{s['p50_ms']:>10.2f}{a['p50_ms']:>10.2f}{s['p95_ms']:>10.2f}{a['p95_ms']:>10.2f}"
                     f"{s['cpu_ms_per_call']:>10.3f}{a['cpu_ms_per_call']:>10.3f}")
    k = report["concurrent"]
    lines += ["", f"{c['workers']} callers at once (half searches, half one-record upserts):",
              f"  threads on pymem.Store:        {k['sync_threads']['calls_per_s']:>8} calls/s, "
              f"{k['sync_threads']['cpu_ms_per_call']} ms CPU per call",
              f"  tasks on one loop, pymem.aio:  {k['aio_tasks']['calls_per_s']:>8} calls/s, "
              f"{k['aio_tasks']['cpu_ms_per_call']} ms CPU per call",
              f"  errors: {k['errors']}"]
    return "\n".join(lines)
