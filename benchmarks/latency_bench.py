"""`pymem bench --latency`: what `recall` and `deliver` cost per call at k = 10, embedding excluded.

It builds a scratch database next to the store (default `pymem_bench_latency`, dropped afterwards
unless asked to keep it) with one tenant of `memories` memories (default 600, about one long
conversation) admitted through the write gate across `sessions` sessions, each a sentence of a
few topic words, embedded with the store's text embedder (e5 when installed, else the lexical
hash; `--embedder` forces one). Every query is embedded before the clock starts: the calls are
handed an embedder that answers the benchmark's queries from that table (same name, dimension
and similarity floor as the real one, so the store accepts it and the floor is the real floor),
so what is timed is pymem's own work: the search (hybrid: text and vector fused in SQL), the
re-judging of each hit under the policy in force, the floor, and for `deliver` the digest, the
hot memories, the fitting and the injection record.

Variants, each `calls` times in rotating order after a warm pass (the verdict cache, the pool and
the plans warm, as in a running agent):

- `search hybrid` / `search vector`: pymem.search alone (search_rows), top 30 (what recall asks
  for at k = 10), with and without the query's words;
- `recall`: recall(k = 10), hybrid, the default floor;
- `recall cold verdicts`: the same with an empty verdict cache (every hit re-judged by the
  detector: the cost before verdicts were reused); the shared cache is set aside for the call and
  put back, so the other variants stay warm;
- `deliver`: deliver(top_k = 10) of one session's turns (each call records its injection).

Reported: p50 / p95 per variant, kept hits per recall, and the targets (recall p50 <= 15 ms,
deliver p50 <= 30 ms) beside them.
"""

from __future__ import annotations

import dataclasses
import importlib
import random
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from pymem.admission.gate import admit
from pymem.admission.policy import AdmissionPolicy
from pymem.admission.provenance import Provenance
from pymem.admission.trust import AdapterTrustPolicy
from pymem.context import Context
from pymem.delivery.deliver import deliver
from pymem.delivery.sessions import start_session
from pymem.delivery.tiers import TrustTiers
from pymem.embedder import Embedder, embed_query, get_embedder
from pymem.errors import InvalidArguments
from pymem.recall import candidate_count, recall
from pymem.storage.search import search_rows

from .bench import scratch_database, server_facts

__all__ = ["LatencyBenchConfig", "FixedQueryEmbedder", "VARIANTS", "TARGETS_MS", "run", "format_report"]

TOP_K = 10
VARIANTS = ("search hybrid", "search vector", "recall", "recall cold verdicts", "deliver")
#: The goals (issue "recall fast enough for every turn"), p50 in ms, on a quiet machine.
TARGETS_MS = {"recall": 15.0, "deliver": 30.0}

_TOPICS = ("hiking", "pottery", "adoption", "painting", "concert", "camping", "marathon", "library", "garden",
           "violin", "bakery", "museum", "volunteer", "beach", "guitar", "school", "charity", "wedding", "puppy",
           "roadtrip", "photography", "yoga", "novel", "festival", "kitchen", "birthday", "workshop", "sunrise")
_PEOPLE = ("Caroline", "Melanie", "Jon", "Gina", "Maria", "John", "Tim", "Audrey", "Andrew", "Nate")
_FRAMES = ("{p} talked about the {a} last week and said the {b} made it special.",
           "{p} is planning a {a} with friends and wants to try {b} too.",
           "Yesterday {p} went to a {a}; afterwards they spent the evening on {b}.",
           "{p} thinks {a} helps with stress, much like {b} did last year.",
           "{p} shared a photo from the {a} and mentioned the {b} nearby.")


@dataclass
class LatencyBenchConfig:
    memories: int = 600
    sessions: int = 20
    calls: int = 200
    embedder: str | None = None  # default: the store's default text embedder
    database: str = "pymem_bench_latency"
    keep: bool = False
    seed: int = 11

    def check(self) -> None:
        if not 20 <= self.memories <= 100_000 or not 1 <= self.sessions <= 1000 or not 1 <= self.calls <= 100_000:
            raise InvalidArguments("memories 20-100000, sessions 1-1000, calls 1-100000")
        if not self.database.replace("_", "").isalnum():
            raise InvalidArguments("the bench database name must be letters, digits and underscores")


class FixedQueryEmbedder:
    """The real embedder for memories, and a table for queries: each benchmark query's vector was
    computed before the timing began, so a timed call spends nothing on embedding. Same name,
    dimension and similarity floor as `inner` (the store checks the name)."""

    def __init__(self, inner: Embedder, queries: dict[str, list[float]]):
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        floor = getattr(inner, "similarity_floor", None)
        if floor is not None:
            self.similarity_floor = floor
        self.queries = queries

    def embed(self, texts: list[str]) -> list[list[float]]:
        return self.inner.embed(texts)

    def embed_query(self, texts: list[str]) -> list[list[float]]:
        missing = [t for t in texts if t not in self.queries]
        if missing:
            raise InvalidArguments("FixedQueryEmbedder was asked for a query it was not given")
        return [self.queries[t] for t in texts]


def _sentence(rng: random.Random) -> str:
    a, b = rng.sample(_TOPICS, 2)
    return rng.choice(_FRAMES).format(p=rng.choice(_PEOPLE), a=a, b=b)


def _query(rng: random.Random) -> str:
    a, b = rng.sample(_TOPICS, 2)
    return rng.choice(("What did {p} say about the {a}?", "When did {p} go to the {a}?",
                       "Why does {p} like {a} and {b}?")).format(p=rng.choice(_PEOPLE), a=a, b=b)


def _seed(store, ctx: Context, config: LatencyBenchConfig, embedder: Embedder, progress) -> list[str]:
    rng = random.Random(config.seed)
    mem = store.bind(ctx)
    policy = AdmissionPolicy()
    sessions = [f"conv-{i}" for i in range(config.sessions)]
    for i, session in enumerate(sessions):
        start_session(mem, session, "chat", first_message=f"Session {i}")
    progress(f"admitting {config.memories} memories through the write gate ({embedder.name})")
    for i in range(config.memories):
        admit(mem, {"content": _sentence(rng)}, Provenance("user_asserted", session_id=sessions[i % len(sessions)]),
              policy=policy, embedder=embedder)
    return [_query(rng) for _ in range(50)]


@contextmanager
def _cold_verdicts() -> Iterator[None]:
    """Recall's verdict cache swapped for an empty one for the duration, then put back as it was."""
    module = importlib.import_module("pymem.recall")  # `pymem.recall` is also the name of the function
    kept = module._verdicts
    module._verdicts = type(kept)(kept.size)
    try:
        yield
    finally:
        module._verdicts = kept


def _summary(ms: list[float]) -> dict[str, float]:
    lat = sorted(ms)
    return {"calls": len(lat), "p50_ms": round(statistics.median(lat), 2),
            "p95_ms": round(lat[min(len(lat) - 1, int(0.95 * len(lat)))], 2)}


def run(store, config: LatencyBenchConfig, progress: Callable[[str], None] = lambda _m: None) -> dict[str, Any]:
    """Run the benchmark next to `store` (same server, its own database); returns the report."""
    from pymem.storage.endpoints import Endpoints
    from pymem.storage.store import Store

    config.check()
    started = time.perf_counter()
    inner = get_embedder(config.embedder) if config.embedder else store.embedder.resolve()
    dims = inner.dim
    report: dict[str, Any] = {"config": dataclasses.asdict(config) | {"embedder": inner.name, "dims": dims,
                                                                     "top_k": TOP_K}}
    scratch_config = SimpleNamespace(database=config.database, keep=config.keep, dims=dims)  # migrated at dims
    with scratch_database(store, scratch_config, progress) as scratch:
        report["server"] = server_facts(scratch.admin)
        settings = dataclasses.replace(store.settings, embedding_dim=dims)
        measured = Store(Endpoints(app=scratch.app_dsn, admin=scratch.admin_dsn), settings, pool_size=4)
        try:
            ctx = Context(tenant="bench", actor="agent")
            texts = _seed(measured, ctx, config, inner, progress)
            progress(f"embedding {len(texts)} queries before the clock starts")
            embedder = FixedQueryEmbedder(inner, {t: embed_query(inner, t) for t in texts})
            mem = measured.bind(ctx)
            session = "bench-turns"
            start_session(mem, session, "chat", first_message="The turns the benchmark delivers")
            options = dict(policy=AdmissionPolicy(), trust=AdapterTrustPolicy())
            fetch = candidate_count(TOP_K)
            kept: list[int] = []

            def search(text: str, hybrid: bool) -> None:
                with measured.transaction(ctx, None, snapshot=True) as c:
                    search_rows(c, ctx, embedder.queries[text], fetch, dim=dims, with_vectors=False,
                                text=text if hybrid else None)

            def recalled(text: str) -> None:
                kept.append(len(recall(mem, text, top_k=TOP_K, embedder=embedder, **options).kept))

            def cold(text: str) -> None:
                # judged with an empty cache of its own: emptying the shared one would make the next
                # recall and deliver judge again too, and time the cold path under their names
                with _cold_verdicts():
                    recall(mem, text, top_k=TOP_K, embedder=embedder, **options)

            calls = {
                "search hybrid": lambda q: search(q, True),
                "search vector": lambda q: search(q, False),
                "recall": recalled,
                "recall cold verdicts": cold,
                "deliver": lambda q: deliver(mem, session, q, top_k=TOP_K, embedder=embedder, tiers=TrustTiers(),
                                             **options),
            }
            for fn in calls.values():  # warm: pool filled, plans cached, verdicts judged once
                for q in texts:
                    fn(q)
            kept.clear()
            times: dict[str, list[float]] = {name: [] for name in VARIANTS}
            progress(f"{config.calls} calls per variant")
            for i in range(config.calls):
                q = texts[i % len(texts)]
                for name in VARIANTS[i % len(VARIANTS):] + VARIANTS[:i % len(VARIANTS)]:
                    t0 = time.perf_counter()
                    calls[name](q)
                    times[name].append((time.perf_counter() - t0) * 1000)
            report["variants"] = {name: _summary(values) for name, values in times.items()}
            report["recall_kept_median"] = statistics.median(kept) if kept else 0
            report["targets_p50_ms"] = dict(TARGETS_MS)
            report["meets_targets"] = all(report["variants"][n]["p50_ms"] <= t for n, t in TARGETS_MS.items())
        finally:
            measured.close()
    report["seconds"] = round(time.perf_counter() - started, 1)
    return report


def format_report(report: dict[str, Any]) -> str:
    c = report["config"]
    lines = [f"latency at k = {c['top_k']}, embedding excluded: {c['memories']} memories in {c['sessions']} sessions, "
             f"{c['calls']} calls per variant, embedder {c['embedder']} ({c['dims']} dims); PostgreSQL "
             f"{report['server']['postgres']}, pgvector {report['server']['pgvector']}", "",
             f"{'variant':<22}{'p50 ms':>9}{'p95 ms':>9}{'target p50':>12}"]
    for name, v in report["variants"].items():
        target = report["targets_p50_ms"].get(name)
        lines.append(f"{name:<22}{v['p50_ms']:>9.2f}{v['p95_ms']:>9.2f}"
                     + (f"{'<= ' + format(target, 'g'):>12}" if target is not None else ""))
    lines += ["", f"recall kept a median of {report['recall_kept_median']:g} memories per call (the rest under "
                  "the similarity floor); targets " + ("met" if report["meets_targets"] else "NOT met")]
    return "\n".join(lines)
