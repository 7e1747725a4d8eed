"""`pymem bench --langgraph`: PymemStore against LangGraph's own PostgresStore, on the same items.

It builds a synthetic, clustered data set in a database of its own (default
`pymem_bench_langgraph`, dropped afterwards unless asked to keep it) on the store's server: one
tenant whose items sit in namespaces holding about 0.1 %, 1 %, 10 % and 50 % of them (filler
namespaces hold the rest), as when one shared table serves every user of an application. The
same items (value {"text": ...}, one vector each, found by an embedding function that looks the
text up) are put

- through PymemStore (the write gate on, as by default; batches of 1,000), and
- through PostgresStore (`setup()`, then `batch`; its tables in the same database), with its
  index configured as LangGraph documents: {"dims", "embed", "fields"}, cosine distance, the
  default HNSW index (m 16, ef_construction 64).

Both HNSW indexes are dropped before the load and rebuilt after it with their own definitions
(maintenance_work_mem 1 GB), which gives the same index in a fraction of the time. Then, per
namespace size, the same queries go to PymemStore.search, to PostgresStore.search with default
settings, and to PostgresStore.search on a connection with pgvector's iterative scans switched
on (`hnsw.iterative_scan = relaxed_order`, the other settings at their defaults), each after an
untimed pass. Reported: p50 / p95 latency of the store call, the share of searches returning the
full top k, and recall@k against exact search (all the namespace's items ranked in SQL).
"""

from __future__ import annotations

import dataclasses
import random
import statistics
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pgvector import Vector

from pymem.context import Context

from .bench import BenchConfig, _Data, scratch_database, server_facts

SHARES = (("0.1%", "share-0_1", 0.001), ("1%", "share-1", 0.01), ("10%", "share-10", 0.1), ("50%", "share-50", 0.5))
VARIANTS = ("PymemStore", "PostgresStore", "PostgresStore iterative")
BATCH = 1_000
FILLERS = 4


@dataclass
class LangGraphBenchConfig:
    rows: int = 100_000
    dims: int = 384
    queries: int = 200
    top_k: int = 10
    clusters: int = 64
    seed: int = 42
    database: str = "pymem_bench_langgraph"
    keep: bool = False

    def check(self) -> None:
        BenchConfig.check(self)  # type: ignore[arg-type]  # the same fields; the same bounds on rows, dims, queries, top_k and the database name


class _Vectors:
    """The data set's vectors, compactly (float4 arrays), and the embedding function both stores
    use: a text ("item-N", "query-N") is looked up, never computed."""

    def __init__(self) -> None:
        self.by_text: dict[str, array] = {}

    def add(self, text: str, vector: list[float]) -> None:
        self.by_text[text] = array("f", vector)

    def embed(self, texts: list[str]) -> list[list[float]]:
        return [self.by_text[t].tolist() for t in texts]


def _namespaces(rows: int) -> list[tuple[tuple[str, ...], int, str | None]]:
    sized = [(("bench", name), max(1, round(rows * share)), label) for label, name, share in SHARES]
    rest = rows - sum(n for _, n, _ in sized)
    fillers = [(("bench", f"filler-{j + 1}"), rest // FILLERS + (1 if j < rest % FILLERS else 0), None)
               for j in range(FILLERS)]
    return sized + [f for f in fillers if f[1]]


def run(store, config: LangGraphBenchConfig, progress: Callable[[str], None] = lambda _m: None) -> dict[str, Any]:
    """Run the comparison next to `store` (same server, its own database); returns the report."""
    from langgraph.store.postgres import PostgresStore

    from pymem.langgraph import PymemStore

    config.check()
    started = time.perf_counter()
    report: dict[str, Any] = {"config": dataclasses.asdict(config)}
    with scratch_database(store, config, progress) as scratch:
        admin = scratch.admin
        vectors = _Vectors()
        index = {"dims": config.dims, "embed": vectors.embed, "fields": ["text"]}
        pymem_store = PymemStore(scratch.store.bind(Context(tenant="app", actor="bench")), index=index)
        pg_index: Any = {**index, "distance_type": "cosine"}  # a PostgresIndexConfig
        with PostgresStore.from_conn_string(scratch.admin_dsn, index=pg_index) as pg_store:
            pg_store.setup()
            layout = _namespaces(config.rows)
            report["namespaces"] = {"/".join(ns): n for ns, n, _ in layout}
            data = _Data(config.dims, config.clusters, config.seed)  # the items, then queries like them
            report["load"] = _load(admin, pymem_store, pg_store, vectors, data, layout, config, progress)
            report["server"] = server_facts(admin)
            with PostgresStore.from_conn_string(scratch.admin_dsn, index=pg_index) as iterative:
                iterative.conn.execute(  # type: ignore[union-attr]  # from_conn_string opens a connection
                    "set hnsw.iterative_scan = relaxed_order")
                stores = {"PymemStore": pymem_store, "PostgresStore": pg_store, "PostgresStore iterative": iterative}
                report["search"] = _search(admin, stores, vectors, data, layout, config, progress)
    report["seconds"] = round(time.perf_counter() - started, 1)
    return report


def _load(admin, pymem_store, pg_store, vectors: _Vectors, data: _Data, layout, config, progress) -> dict[str, Any]:
    from langgraph.store.base import PutOp

    hnsw = {
        "pymem": admin.execute("select indexdef from pg_indexes where schemaname = 'pymem'"
                               " and indexname = 'memories_embedding_hnsw'").fetchone()[0],
        "postgres": admin.execute("select indexdef from pg_indexes where indexname = 'store_vectors_embedding_idx'")
        .fetchone()[0],
    }
    admin.execute("drop index pymem.memories_embedding_hnsw")
    admin.execute("drop index store_vectors_embedding_idx")
    batches = []
    serial = 0
    for namespace, n, _ in layout:
        for start in range(0, n, BATCH):
            items = []
            for _ in range(start, min(start + BATCH, n)):
                text = f"item-{serial}"
                vectors.add(text, data.vector())
                items.append((namespace, text))
                serial += 1
            batches.append(items)
    random.Random(config.seed).shuffle(batches)  # namespaces interleaved in time, as in real life
    seconds = {"pymem": 0.0, "postgres": 0.0}
    for i, items in enumerate(batches):
        ops = [PutOp(namespace, text, {"text": text}) for namespace, text in items]
        t0 = time.perf_counter()
        pymem_store.batch(ops)
        t1 = time.perf_counter()
        pg_store.batch(ops)
        seconds["pymem"] += t1 - t0
        seconds["postgres"] += time.perf_counter() - t1
        if i % 10 == 0 or i == len(batches) - 1:
            progress(f"loaded {min(serial, (i + 1) * BATCH):,} / {config.rows:,} items into both stores")
    progress("building the HNSW indexes (maintenance_work_mem 1GB)")
    admin.execute("set maintenance_work_mem = '1GB'")
    built = {}
    for name, definition in hnsw.items():
        t0 = time.perf_counter()
        admin.execute(definition)
        built[name] = round(time.perf_counter() - t0, 1)
    admin.execute("reset maintenance_work_mem")
    admin.execute("analyze pymem.memories")
    admin.execute("analyze store")
    admin.execute("analyze store_vectors")
    return {"items": serial, "pymem_items_per_s": round(serial / seconds["pymem"]),
            "postgres_store_items_per_s": round(serial / seconds["postgres"]), "index_build_s": built,
            "index_definitions": hnsw}


def _exact(admin, namespace: tuple[str, ...], vector: list[float], k: int) -> list[str]:
    """The namespace's k nearest items by cosine, every item ranked (no index)."""
    rows = admin.execute(
        "select s.key from store s join store_vectors v on v.prefix = s.prefix and v.key = s.key"
        " where s.prefix = %s order by (v.embedding <=> %s) + 0, s.key limit %s",
        (".".join(namespace), Vector(vector), k)).fetchall()
    return [r[0] for r in rows]


def _search(admin, stores: dict[str, Any], vectors: _Vectors, data: _Data, layout, config,
            progress) -> list[dict[str, Any]]:
    k = config.top_k
    results = []
    for namespace, n, label in layout:
        if label is None:
            continue
        progress(f"searching the {label} namespace ({n:,} items): {config.queries} queries x {len(VARIANTS)} stores")
        queries = []
        for j in range(config.queries):
            text = f"query-{label}-{j}"
            vectors.add(text, data.vector())
            queries.append(text)
        truth = [_exact(admin, namespace, vectors.by_text[q].tolist(), k) for q in queries]
        variants = {}
        for name in VARIANTS:
            lg = stores[name]
            for q in queries:  # untimed: the index and rows as warm as the cache allows
                lg.search(namespace, query=q, limit=k)
            latencies, full, recall = [], 0, 0.0
            for q, want in zip(queries, truth, strict=False):
                t0 = time.perf_counter()
                got = lg.search(namespace, query=q, limit=k)
                latencies.append((time.perf_counter() - t0) * 1000)
                keys = [item.key for item in got]
                full += len(keys) == min(k, n)
                recall += len(set(want) & set(keys)) / max(1, len(want))
            latencies.sort()
            variants[name] = {
                "p50_ms": round(statistics.median(latencies), 3),
                "p95_ms": round(latencies[min(len(latencies) - 1, max(0, round(0.95 * len(latencies)) - 1))], 3),
                "full_top_k_share": round(full / len(queries), 4),
                "recall": round(recall / len(queries), 4),
            }
        results.append({"share": label, "namespace": "/".join(namespace), "items": n, "variants": variants,
                         "pymem_p50_vs_iterative": round(variants["PymemStore"]["p50_ms"]
                                                         / variants["PostgresStore iterative"]["p50_ms"], 2)})
    return results


def format_report(report: dict[str, Any]) -> str:
    c, srv, load = report["config"], report["server"], report["load"]
    lines = [f"pymem bench --langgraph: {load['items']:,} items x {c['dims']} dims in one tenant, {c['clusters']} "
             f"clusters,"
             f" top {c['top_k']}, {c['queries']} searches per namespace size",
             f"PostgreSQL {srv['postgres']}, pgvector {srv['pgvector']}, shared_buffers {srv['shared_buffers']};"
             " HNSW m=16 ef_construction=64 (cosine) for both",
             "PostgresStore: default settings; 'iterative': hnsw.iterative_scan = relaxed_order on its connection", ""]
    header = f"{'namespace':>9} {'items':>7}  {'store':<24} {'p50 ms':>8} {'p95 ms':>8} {'full':>6} {'recall':>7}"
    lines += [header, "-" * len(header)]
    for s in report["search"]:
        for i, name in enumerate(VARIANTS):
            v = s["variants"][name]
            lead = f"{s['share']:>9} {s['items']:>7,}" if i == 0 else " " * 17
            lines.append(f"{lead}  {name:<24} {v['p50_ms']:>8.3f} {v['p95_ms']:>8.3f} "
                         f"{v['full_top_k_share']:>6.0%} {v['recall']:>7.3f}")
        lines.append(" " * 19 + f"PymemStore p50 = {s['pymem_p50_vs_iterative']:.2f}x PostgresStore iterative")
    lines += ["", f"load: PymemStore {load['pymem_items_per_s']:,} items/s (write gate on), PostgresStore "
              f"{load['postgres_store_items_per_s']:,} items/s (no vector index during the load); HNSW build "
              f"{load['index_build_s']['pymem']} s (pymem), {load['index_build_s']['postgres']} s (PostgresStore)",
              f"total {report['seconds']} s"]
    return "\n".join(lines)


__all__ = ["LangGraphBenchConfig", "run", "format_report", "VARIANTS"]
