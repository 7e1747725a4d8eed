"""`pymem bench --deliver`: what one `deliver` costs: pool checkouts, round trips, statements, time.

It builds a scratch database of its own next to the store (default `pymem_bench_deliver`, dropped
afterwards unless asked to keep it) and one tenant in it: `sessions` sessions (the digest lists
them), `memories` memories admitted through the write gate with the lexical embedder (`hot` of them
tagged hot), then runs `calls` deliveries of one session's turns, each with a query that recalls,
as `pymem.deliver` and as `pymem.lessons.deliver_with_lessons` (what the service's, HTTP's and MCP's
`deliver` runs), one after the other in rotating order. The store's connections go through a
counting proxy (benchmarks.wire), so each call's round trips and statements are read off the
wire; checkouts are the pool's own count of connection requests, plus the connections of the
store's one-statement set (StatementConnections) a call takes. Reported per variant: the median
of each count per call and the latency p50 / p95.
"""

from __future__ import annotations

import dataclasses
import random
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from pymem.admission.gate import admit
from pymem.admission.policy import AdmissionPolicy
from pymem.admission.provenance import Provenance
from pymem.admission.trust import AdapterTrustPolicy
from pymem.context import Context
from pymem.delivery.deliver import deliver
from pymem.delivery.sessions import start_session
from pymem.delivery.tiers import TrustTiers
from pymem.embedder import LexicalEmbedder
from pymem.errors import InvalidArguments
from pymem.lessons import deliver_with_lessons, file_lesson

from .bench import scratch_database, server_facts
from .wire import WireCounter

__all__ = ["DeliverBenchConfig", "run", "format_report"]

VARIANTS = ("deliver", "with lessons")
_WORDS = ("invoice", "currency", "contact", "billing", "shipping", "address", "order", "refund", "account",
          "renewal", "contract", "discount", "warehouse", "carrier", "deadline", "budget", "supplier", "quote",
          "priority", "ticket", "escalation", "holiday", "schedule", "timezone", "language", "format")


@dataclass
class DeliverBenchConfig:
    memories: int = 300
    sessions: int = 12
    hot: int = 5
    calls: int = 200
    dims: int = 384
    database: str = "pymem_bench_deliver"
    keep: bool = False
    seed: int = 7

    def check(self) -> None:
        if not 10 <= self.memories <= 100_000 or not 1 <= self.sessions <= 1000 or not 0 <= self.hot <= 50 \
                or not 1 <= self.calls <= 100_000 or not 2 <= self.dims <= 2000:
            raise InvalidArguments("memories 10-100000, sessions 1-1000, hot 0-50, calls 1-100000, dims 2-2000")


def _sentence(rng: random.Random) -> str:
    return "The customer " + " ".join(rng.choice(_WORDS) for _ in range(8)) + "."


def _seed(store, ctx: Context, config: DeliverBenchConfig, embedder, progress) -> list[str]:
    rng = random.Random(config.seed)
    mem = store.bind(ctx)
    policy = AdmissionPolicy()
    sessions = [f"bench-{i}" for i in range(config.sessions)]
    for i, session in enumerate(sessions):
        start_session(mem, session, "chat", first_message=f"Help with account {i}")
    progress(f"admitting {config.memories} memories")
    for i in range(config.memories):
        record = {"content": _sentence(rng), **({"tags": ["hot"]} if i < config.hot else {})}
        admit(mem, record, Provenance("user_asserted", session_id=sessions[i % len(sessions)]), policy=policy,
              embedder=embedder)
    return [" ".join(rng.choice(_WORDS) for _ in range(3)) for _ in range(50)]


class _Meter:
    """Counts what one call cost: the proxy's messages and the store's checkouts."""

    def __init__(self, store, wire: WireCounter):
        self.store, self.wire = store, wire
        self.statement_checkouts = 0
        statements = store.statements
        original = statements.connection

        @contextmanager
        def counted() -> Iterator[Any]:
            self.statement_checkouts += 1
            with original() as conn:
                yield conn

        statements.connection = counted  # the instance attribute shadows the method for this store only

    @contextmanager
    def call(self, out: dict[str, list[float]]) -> Iterator[None]:
        requests = self.store.pool.get_stats().get("requests_num", 0)
        statement_checkouts = self.statement_checkouts
        self.wire.reset()
        started = time.perf_counter()
        yield
        elapsed = time.perf_counter() - started
        counts = self.wire.counts()
        out["ms"].append(elapsed * 1000)
        out["round_trips"].append(counts["round_trips"])
        out["statements"].append(counts["statements"])
        out["checkouts"].append(self.store.pool.get_stats().get("requests_num", 0) - requests
                                + self.statement_checkouts - statement_checkouts)
        out["connections_opened"].append(counts["connections"])


def run(store, config: DeliverBenchConfig, progress: Callable[[str], None] = lambda _m: None) -> dict[str, Any]:
    """Run the benchmark next to `store` (same server, its own database); returns the report."""
    from pymem.storage.endpoints import Endpoints
    from pymem.storage.store import Store

    config.check()
    started = time.perf_counter()
    report: dict[str, Any] = {"config": dataclasses.asdict(config)}
    embedder = LexicalEmbedder(config.dims)
    with scratch_database(store, config, progress) as scratch, WireCounter(scratch.app_dsn) as wire:
        report["server"] = server_facts(scratch.admin)
        settings = dataclasses.replace(store.settings, embedding_dim=config.dims)
        measured = Store(Endpoints(app=wire.proxied(scratch.app_dsn), admin=scratch.admin_dsn), settings, pool_size=4)
        try:
            ctx = Context(tenant="bench", actor="agent")
            queries = _seed(measured, ctx, config, embedder, progress)
            session = "bench-turns"
            mem = measured.bind(ctx)
            start_session(mem, session, "chat", first_message="The turns the benchmark delivers")
            file_lesson(mem, "Check the customer's timezone before a deadline.", ["support"], "project", 0.8,
                        origin="operator", policy=AdmissionPolicy(), embedder=embedder)
            options = dict(policy=AdmissionPolicy(), trust=AdapterTrustPolicy(), tiers=TrustTiers(), embedder=embedder)
            runs = {
                "deliver": lambda q: deliver(mem, session, q, **options),
                "with lessons": lambda q: deliver_with_lessons(mem, session, q, ["support"], cache=None, **options),
            }
            for fn in runs.values():  # warm: the pool filled, plans cached, the embedder's tables built
                for q in queries[:5]:
                    fn(q)
            meter = _Meter(measured, wire)
            results = {name: {k: [] for k in ("ms", "round_trips", "statements", "checkouts", "connections_opened")}
                       for name in VARIANTS}
            progress(f"{config.calls} deliveries per variant")
            for i in range(config.calls):
                order = VARIANTS if i % 2 == 0 else tuple(reversed(VARIANTS))
                for name in order:
                    with meter.call(results[name]):
                        runs[name](queries[i % len(queries)])
            report["variants"] = {name: _summary(values) for name, values in results.items()}
        finally:
            measured.close()
    report["seconds"] = round(time.perf_counter() - started, 1)
    return report


def _summary(values: dict[str, list[float]]) -> dict[str, Any]:
    ms = sorted(values["ms"])
    return {
        "calls": len(ms),
        "p50_ms": round(statistics.median(ms), 2),
        "p95_ms": round(ms[min(len(ms) - 1, int(0.95 * len(ms)))], 2),
        **{f"{k}_median": statistics.median(values[k]) for k in ("round_trips", "statements", "checkouts",
                                                                   "connections_opened")},
        **{f"{k}_max": max(values[k]) for k in ("round_trips", "checkouts")},
    }


def format_report(report: dict[str, Any]) -> str:
    c = report["config"]
    lines = [f"deliver: {c['calls']} calls per variant, {c['memories']} memories ({c['hot']} hot), {c['sessions']} "
             f"sessions, {c['dims']} dims; PostgreSQL {report['server']['postgres']}, pgvector "
             f"{report['server']['pgvector']}", "",
             f"{'variant':<14}{'p50 ms':>9}{'p95 ms':>9}{'checkouts':>11}{'round trips':>13}{'statements':>12}"]
    for name, v in report["variants"].items():
        lines.append(f"{name:<14}{v['p50_ms']:>9.2f}{v['p95_ms']:>9.2f}{v['checkouts_median']:>11g}"
                     f"{v['round_trips_median']:>13g}{v['statements_median']:>12g}")
    lines.append("")
    lines.append("checkouts, round trips and statements are medians per call (round trips: Sync + Query messages "
                 "the client sent, read off the wire)")
    return "\n".join(lines)
