"""`pymem bench`: pymem's search and writes against raw pgvector on the same rows, in one run.

It builds a synthetic, clustered data set in a database of its own (default `pymem_bench`,
dropped afterwards unless asked to keep it), across tenants sized so that the query tenants hold
about 0.1 %, 1 %, 10 % and 50 % of the rows (filler tenants hold the rest). The same rows go to

- pymem.memories, through pymem's own write path (upsert_many as pymem_app: RLS, triggers,
  ledger; batches of 500), and
- a plain table (`bench_raw.items`: tenant_id, id, embedding, record; no RLS) loaded with COPY,

and both get the same HNSW index (m 16, ef_construction 64), built after the load with
maintenance_work_mem raised. It then reports, per tenant size:

- search latency p50 / p95 through pymem (Memories.search) and in raw SQL on the plain table:
  naive (`where tenant_id = ... order by embedding <=> q limit k`, default settings), with
  iterative scans at pymem's ef_search (materialized CTE, re-sorted), and exact;
- for each, the share of queries that returned the full top_k and recall@k against exact search;

then upsert throughput (rows/s, batches of 500, with the indexes in place) through pymem vs raw
multi-row INSERT and COPY into the plain table, and verification throughput (ledger entries/s
through pymem.verify_chain). Raw queries use custom plans (prepare=False), the strongest raw
baseline; every variant returns the same payload (id, record without its vector, distance).
Each variant runs its queries once untimed and then timed, one variant after the other, so each
is timed on a cache as warm as it can be: at 100k x 384 each HNSW index is about 200 MB, more
than the embedded server's default shared_buffers (128 MB), and the report shows that setting.
"""

from __future__ import annotations

import dataclasses
import random
import statistics
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator
from urllib.parse import urlsplit, urlunsplit

import psycopg
from pgvector import Vector
from pgvector.psycopg import register_vector
from psycopg.types.json import Jsonb

from .. import migrate
from ..context import Context
from ..errors import InvalidArguments, ServerError

QUERY_SHARES = (("0.1%", 0.001), ("1%", 0.01), ("10%", 0.1), ("50%", 0.5))
BATCH = 500
VARIANTS = ("pymem", "raw naive", "raw iterative", "raw exact")

# Every variant ranks first and trims the records (drops the vector) for the top k only.
_RAW = {
    "raw naive": (
        "select id, record - 'embedding' as record, distance from (select id, record, embedding <=> %(q)s as distance"
        " from bench_raw.items where tenant_id = %(t)s order by embedding <=> %(q)s limit %(k)s) x"
    ),
    "raw iterative": (
        "with c as materialized (select id, record, embedding <=> %(q)s as distance from bench_raw.items"
        " where tenant_id = %(t)s order by embedding <=> %(q)s limit %(k)s)"
        " select id, record - 'embedding' as record, distance from c order by distance + 0"
    ),
    "raw exact": (
        "select id, record - 'embedding' as record, distance from (select id, record, embedding <=> %(q)s as distance"
        " from bench_raw.items where tenant_id = %(t)s order by (embedding <=> %(q)s) + 0 limit %(k)s) x"
    ),
}


@dataclass
class BenchConfig:
    rows: int = 100_000
    dims: int = 384
    queries: int = 100
    top_k: int = 10
    write_rows: int | None = None  # default: 5 % of rows, between 1,000 and 5,000
    clusters: int = 64
    seed: int = 42
    database: str = "pymem_bench"
    keep: bool = False

    def check(self) -> None:
        if not 1_000 <= self.rows <= 10_000_000:
            raise InvalidArguments("--rows must be between 1,000 and 10,000,000")
        if not 2 <= self.dims <= 2_000:
            raise InvalidArguments("--dims must be between 2 and 2,000 (HNSW's limit for vector)")
        if not 1 <= self.queries <= 10_000 or not 1 <= self.top_k <= 1_000:
            raise InvalidArguments("--queries must be 1..10,000 and --top-k 1..1,000")
        if not self.database.replace("_", "").isalnum():
            raise InvalidArguments("the bench database name must be letters, digits and underscores")

    @property
    def writes(self) -> int:
        return self.write_rows if self.write_rows is not None else min(5_000, max(1_000, self.rows // 20))


@dataclass
class VariantResult:
    latencies_ms: list[float] = field(default_factory=list)
    full: int = 0
    recall_sum: float = 0.0

    def summary(self) -> dict[str, float]:
        lat = sorted(self.latencies_ms)
        n = len(lat)
        return {
            "p50_ms": round(statistics.median(lat), 3),
            "p95_ms": round(lat[min(n - 1, max(0, int(round(0.95 * n)) - 1))], 3),
            "full_top_k_share": round(self.full / n, 4),
            "recall": round(self.recall_sum / n, 4),
        }


def with_database(dsn: str, database: str) -> str:
    """The same server and login as a postgresql:// DSN, on another database."""
    parts = urlsplit(dsn)
    if parts.scheme not in ("postgresql", "postgres"):
        raise InvalidArguments("pymem bench needs postgresql:// URLs for PYMEM_DSN and PYMEM_ADMIN_DSN")
    return urlunsplit(parts._replace(path="/" + database))


class _Data:
    """Clustered synthetic vectors: cluster centres in [-1, 1]^d, rows and queries scattered
    uniformly around them, rounded to 6 decimals (about what float32 embeddings print)."""

    def __init__(self, dims: int, clusters: int, seed: int):
        self.dims = dims
        self.rng = random.Random(seed)
        self.centres = [[self.rng.uniform(-1, 1) for _ in range(dims)] for _ in range(clusters)]

    def vector(self, spread: float = 0.9) -> list[float]:
        centre = self.rng.choice(self.centres)
        r = self.rng.random
        return [round(c + spread * (2 * r() - 1), 6) for c in centre]

    def record(self, tenant: str, i: int) -> dict[str, Any]:
        return {"id": f"{tenant}-{i}", "scope": {"agent": f"a{i % 4}"}, "distillate": f"synthetic memory {i}",
                "embedding": self.vector()}


def _tenant_sizes(rows: int) -> tuple[list[tuple[str, str, int]], list[tuple[str, int]]]:
    queried = [(f"q{label}", label, max(1, round(rows * share))) for label, share in QUERY_SHARES]
    rest = rows - sum(n for _, _, n in queried)
    fillers, k = [], 4
    for j in range(k):
        n = rest // k + (1 if j < rest % k else 0)
        if n:
            fillers.append((f"filler-{j + 1}", n))
    return queried, fillers


@dataclass
class Scratch:
    """A migrated scratch database on the store's server: its DSNs, an administrative connection
    (autocommit, pgvector registered) and a Store on it (pool of 2)."""

    admin_dsn: str
    app_dsn: str
    admin: psycopg.Connection
    store: Any


@contextmanager
def scratch_database(store, config: Any, progress: Callable[[str], None]) -> Iterator[Scratch]:
    """Create `config.database` next to `store` (dropping any earlier one), migrate it at
    `config.dims`, and drop it afterwards unless `config.keep`."""
    from ..storage.endpoints import Endpoints
    from ..storage.store import Store

    admin_dsn = with_database(store.endpoints.admin, config.database)
    app_dsn = with_database(store.endpoints.app, config.database)
    with psycopg.connect(store.endpoints.admin, autocommit=True) as conn:
        progress(f"creating database {config.database}")
        conn.execute(f'drop database if exists "{config.database}" with (force)')
        conn.execute(f'create database "{config.database}"')
    admin = bench_store = None
    try:
        migrate.upgrade(admin_dsn, embedding_dim=config.dims)
        admin = psycopg.connect(admin_dsn, autocommit=True)
        register_vector(admin)
        settings = dataclasses.replace(store.settings, embedding_dim=config.dims)
        bench_store = Store(Endpoints(app=app_dsn, admin=admin_dsn), settings, pool_size=2)
        yield Scratch(admin_dsn, app_dsn, admin, bench_store)
    finally:
        if bench_store is not None:
            bench_store.close()
        if admin is not None:
            admin.close()
        if not config.keep:
            with psycopg.connect(store.endpoints.admin, autocommit=True) as conn:
                conn.execute(f'drop database if exists "{config.database}" with (force)')


def server_facts(admin: psycopg.Connection) -> dict[str, str]:
    row = admin.execute("select current_setting('server_version'), current_setting('shared_buffers'),"
                        " (select extversion from pg_extension where extname = 'vector')").fetchone()
    return {"postgres": row[0], "shared_buffers": row[1], "pgvector": row[2]}


def run(store, config: BenchConfig, progress: Callable[[str], None] = lambda _m: None) -> dict[str, Any]:
    """Run the benchmark next to `store` (same server, its own database); returns the report."""
    config.check()
    started = time.perf_counter()
    report: dict[str, Any] = {"config": dataclasses.asdict(config) | {"write_rows": config.writes}}
    with scratch_database(store, config, progress) as scratch:
        admin, admin_dsn, bench_store = scratch.admin, scratch.admin_dsn, scratch.store
        admin.execute("drop index pymem.memories_embedding_hnsw")  # rebuilt after the load
        admin.execute("create schema bench_raw")
        admin.execute(f"create table bench_raw.items (tenant_id text not null, id text not null,"
                      f" embedding vector({config.dims}), record jsonb, primary key (tenant_id, id))")
        data = _Data(config.dims, config.clusters, config.seed)
        queried, fillers = _tenant_sizes(config.rows)
        report["tenants"] = {t: n for t, _, n in queried} | dict(fillers)
        report["load"] = _load(bench_store, admin, admin_dsn, data, queried, fillers, config, progress)
        report["server"] = server_facts(admin)
        ef = admin.execute("select pymem._search_ef(%s)", (config.top_k,)).fetchone()[0]
        report["ef_search"] = ef
        report["search"] = _search(bench_store, admin_dsn, data, queried, config, ef, progress)
        report["upsert"] = _writes(bench_store, admin_dsn, data, config, progress)
        report["verify"] = _verify(admin, progress)
    report["seconds"] = round(time.perf_counter() - started, 1)
    return report


def _load(store, admin, admin_dsn: str, data: _Data, queried, fillers, config: BenchConfig,
          progress) -> dict[str, Any]:
    """All rows into both tables (pymem via upsert_many, raw via COPY), then the indexes."""
    batches = []
    for tenant, n in [(t, n) for t, _, n in queried] + fillers:
        batches += [(tenant, start, min(start + BATCH, n)) for start in range(0, n, BATCH)]
    random.Random(config.seed).shuffle(batches)  # tenants interleaved in time, as in real life
    mems = {}
    pymem_s = raw_s = 0.0
    done = 0
    with psycopg.connect(admin_dsn, autocommit=False) as raw:
        register_vector(raw)
        for i, (tenant, start, end) in enumerate(batches):
            records = [data.record(tenant, j) for j in range(start, end)]
            mem = mems.setdefault(tenant, store.bind(Context(tenant=tenant, actor="bench")))
            t0 = time.perf_counter()
            mem.upsert_many(records, idempotency_key=f"load-{start}")
            t1 = time.perf_counter()
            with raw.cursor() as cur, cur.copy("copy bench_raw.items (tenant_id, id, embedding, record) from stdin") as cp:
                for r in records:
                    cp.write_row((tenant, r["id"], Vector(r["embedding"]), Jsonb(r)))
            raw.commit()
            pymem_s += t1 - t0
            raw_s += time.perf_counter() - t1
            done += len(records)
            if i % 20 == 0 or i == len(batches) - 1:
                progress(f"loaded {done:,} / {config.rows:,} rows")
    progress("building the HNSW indexes (maintenance_work_mem 1GB)")
    admin.execute("set maintenance_work_mem = '1GB'")
    t0 = time.perf_counter()
    admin.execute("create index memories_embedding_hnsw on pymem.memories using hnsw (embedding vector_cosine_ops)")
    t1 = time.perf_counter()
    admin.execute("create index items_embedding_hnsw on bench_raw.items using hnsw (embedding vector_cosine_ops)")
    t2 = time.perf_counter()
    admin.execute("reset maintenance_work_mem")
    admin.execute("analyze pymem.memories")
    admin.execute("analyze bench_raw.items")
    return {"rows": done, "pymem_rows_per_s": round(done / pymem_s), "raw_copy_rows_per_s": round(done / raw_s),
            "index_build_s": {"pymem": round(t1 - t0, 1), "raw": round(t2 - t1, 1)}}


def _search(store, admin_dsn: str, data: _Data, queried, config: BenchConfig, ef: int, progress) -> list[dict]:
    conns = {}
    for name in _RAW:
        conn = psycopg.connect(admin_dsn, autocommit=True)
        register_vector(conn)
        if name == "raw iterative":
            conn.execute("set hnsw.iterative_scan = relaxed_order")
            conn.execute(f"set hnsw.ef_search = {int(ef)}")
        conns[name] = conn
    k = config.top_k
    results = []
    try:
        for tenant, label, n in queried:
            progress(f"searching tenant {label} ({n:,} rows): {config.queries} queries x {len(VARIANTS)} variants")
            mem = store.bind(Context(tenant=tenant, actor="bench"))

            def pymem_ids(q):
                return [h["chunk_id"] for h in mem.search(q, top_k=k, include={"embedding": False})]

            def raw_ids(name):
                def call(q):
                    rows = conns[name].execute(_RAW[name], {"q": Vector(q), "t": tenant, "k": k}, prepare=False).fetchall()
                    return [r[0] for r in rows]
                return call

            calls = {"pymem": pymem_ids} | {name: raw_ids(name) for name in _RAW}
            queries = [data.vector() for _ in range(config.queries)]
            stats = {name: VariantResult() for name in VARIANTS}
            got: dict[str, list[list[str]]] = {}
            # One variant at a time, each after an untimed pass over the same queries: every
            # variant is timed with its own index and rows as warm as the cache allows (the
            # two HNSW indexes together rarely fit in shared_buffers, and interleaving would
            # time mostly evictions).
            for name in VARIANTS:
                for q in queries:
                    calls[name](q)
                got[name] = []
                for q in queries:
                    t0 = time.perf_counter()
                    got[name].append(calls[name](q))
                    stats[name].latencies_ms.append((time.perf_counter() - t0) * 1000)
            for i in range(config.queries):
                truth = set(got["raw exact"][i])
                for name in VARIANTS:
                    stats[name].full += len(got[name][i]) == min(k, n)
                    stats[name].recall_sum += len(truth & set(got[name][i])) / max(1, len(truth))
            variants = {name: stats[name].summary() for name in VARIANTS}
            good_raw = {name: v for name, v in variants.items()
                        if name != "pymem" and v["recall"] >= 0.95 and v["full_top_k_share"] == 1.0}
            best = min(good_raw, key=lambda name: good_raw[name]["p50_ms"]) if good_raw else None
            results.append({
                "tenant": tenant, "share": label, "rows": n, "variants": variants, "fastest_good_raw": best,
                "pymem_p50_vs_fastest_good_raw": round(variants["pymem"]["p50_ms"] / good_raw[best]["p50_ms"], 2)
                if best else None,
            })
    finally:
        for conn in conns.values():
            conn.close()
    return results


def _writes(store, admin_dsn: str, data: _Data, config: BenchConfig, progress) -> dict[str, Any]:
    """Upsert throughput with the indexes in place: the same rows through pymem, raw INSERT, COPY."""
    m = config.writes
    rows = [data.record("w", i) for i in range(m)]
    batches = [rows[i:i + BATCH] for i in range(0, m, BATCH)]
    progress(f"writing {m:,} rows three ways (batches of {BATCH})")
    mem = store.bind(Context(tenant="bench-write", actor="bench"))
    t0 = time.perf_counter()
    for i, batch in enumerate(batches):
        mem.upsert_many(batch, idempotency_key=f"write-{i}")
    pymem_s = time.perf_counter() - t0

    with psycopg.connect(admin_dsn) as raw:
        register_vector(raw)
        t0 = time.perf_counter()
        for batch in batches:
            values = ", ".join(["(%s, %s, %s, %s)"] * len(batch))
            params = [x for r in batch for x in ("bench-write-insert", r["id"], Vector(r["embedding"]), Jsonb(r))]
            raw.execute(f"insert into bench_raw.items (tenant_id, id, embedding, record) values {values}", params)
            raw.commit()
        insert_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        for batch in batches:
            with raw.cursor() as cur, cur.copy("copy bench_raw.items (tenant_id, id, embedding, record) from stdin") as cp:
                for r in batch:
                    cp.write_row(("bench-write-copy", r["id"], Vector(r["embedding"]), Jsonb(r)))
            raw.commit()
        copy_s = time.perf_counter() - t0
    out = {"rows": m, "pymem_rows_per_s": round(m / pymem_s), "raw_insert_rows_per_s": round(m / insert_s),
           "raw_copy_rows_per_s": round(m / copy_s)}
    out["pymem_vs_raw_insert"] = round(out["pymem_rows_per_s"] / out["raw_insert_rows_per_s"], 2)
    return out


def _verify(admin, progress) -> dict[str, Any]:
    progress("verifying the ledger (pymem.verify_chain over every tenant)")
    t0 = time.perf_counter()
    rows = admin.execute("select tenant_id, entries, rows_checked, problem from pymem.verify_chain()").fetchall()
    seconds = time.perf_counter() - t0
    entries = sum(r[1] for r in rows)
    problems = [r[0] for r in rows if r[3] is not None]
    if problems:  # pragma: no cover - would be a bug in pymem
        raise ServerError(f"verify_chain found problems in tenants {problems}")
    return {"entries": entries, "rows_checked": sum(r[2] for r in rows), "seconds": round(seconds, 2),
            "entries_per_s": round(entries / seconds)}


def format_report(report: dict[str, Any]) -> str:
    """The human-readable table of a report."""
    c = report["config"]
    srv = report["server"]
    lines = [f"pymem bench: {report['load']['rows']:,} rows x {c['dims']} dims, {c['clusters']} clusters, "
             f"top {c['top_k']}, {c['queries']} queries per tenant, HNSW m=16 ef_construction=64, "
             f"ef_search {report['ef_search']} (pymem and raw iterative)",
             f"PostgreSQL {srv['postgres']}, pgvector {srv['pgvector']}, shared_buffers {srv['shared_buffers']}", ""]
    header = f"{'tenant':>7} {'rows':>8}  {'variant':<14} {'p50 ms':>8} {'p95 ms':>8} {'full':>6} {'recall':>7}"
    lines += ["search", header, "-" * len(header)]
    for s in report["search"]:
        for i, name in enumerate(VARIANTS):
            v = s["variants"][name]
            lead = f"{s['share']:>7} {s['rows']:>8,}" if i == 0 else " " * 16
            lines.append(f"{lead}  {name:<14} {v['p50_ms']:>8.3f} {v['p95_ms']:>8.3f} "
                         f"{v['full_top_k_share']:>6.0%} {v['recall']:>7.3f}")
        ratio = s["pymem_p50_vs_fastest_good_raw"]
        lines.append(" " * 18 + (f"pymem p50 = {ratio:.2f}x {s['fastest_good_raw']} (fastest raw with recall >= 0.95)"
                                 if ratio is not None else "no raw variant reached recall >= 0.95 with full top_k"))
    load, up, ver = report["load"], report["upsert"], report["verify"]
    lines += ["", "writes (rows/s)",
              f"  initial load, no vector index: pymem upsert_many {load['pymem_rows_per_s']:,}, "
              f"raw COPY {load['raw_copy_rows_per_s']:,}; HNSW build {load['index_build_s']['pymem']} s (pymem), "
              f"{load['index_build_s']['raw']} s (raw)",
              f"  {up['rows']:,} rows into the indexed tables, batches of {BATCH}: pymem {up['pymem_rows_per_s']:,}, "
              f"raw INSERT {up['raw_insert_rows_per_s']:,}, raw COPY {up['raw_copy_rows_per_s']:,} "
              f"(pymem = {up['pymem_vs_raw_insert']:.2f}x raw INSERT)",
              "", f"verify: {ver['entries']:,} ledger entries and {ver['rows_checked']:,} rows in {ver['seconds']} s "
              f"({ver['entries_per_s']:,} entries/s)", f"total {report['seconds']} s"]
    return "\n".join(lines)


__all__ = ["BenchConfig", "run", "format_report", "with_database", "scratch_database", "Scratch", "server_facts"]
