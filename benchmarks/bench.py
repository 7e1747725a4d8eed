"""`pymem bench`: pymem's search and writes against raw pgvector on the same rows, in one run.

It builds a synthetic, clustered data set in a database of its own (default `pymem_bench`,
dropped afterwards unless asked to keep it), across tenants sized so that the query tenants hold
about 0.1 %, 1 %, 10 % and 50 % of the rows (filler tenants hold the rest). The same rows go to

- pymem.memories, through pymem's own write path (upsert_many as pymem_app, batches of 500, as
  `pymem import` writes them: binary COPY into a staging table, then one INSERT under RLS, with
  the triggers and the ledger), and
- a plain table (`bench_raw.items`: tenant_id, id, embedding, record; no RLS) loaded with COPY in
  binary format, and the same rows with COPY in text format into a scratch table: the faster of
  the two is the raw baseline,

each batch written all three ways back to back, in a rotating order. Both tables get the same
HNSW index (m 16, ef_construction 64), built after the load with maintenance_work_mem raised.
It then reports, per tenant size:

- search latency p50 / p95 through pymem (Memories.search) and in raw SQL on the plain table:
  naive (`where tenant_id = ... order by embedding <=> q limit k`, default settings), with
  iterative scans at pymem's ef_search (materialized CTE, re-sorted), and exact;
- for each, the share of queries that returned the full top_k and recall@k against exact search,
  and pymem's p50 against the fastest raw variant reaching recall 0.95 with the full top_k;

then upsert throughput (rows/s, batches of 500, with the indexes in place) through pymem vs raw
multi-row INSERT and COPY into the plain table, and full verification (the chain and every live
row re-hashed) as `pymem verify` runs it, with pymem.verify_chain inside the database beside it.
Raw queries use custom plans (prepare=False), the strongest raw baseline; every variant returns
the same payload (id, record without its vector, distance). Each variant runs its queries once
untimed and then timed, one variant after the other, so each is timed on a cache as warm as it
can be (at 100k x 384 each HNSW index is about 200 MB, more than the embedded server's default
shared_buffers of 128 MB; the report shows that setting), in ROUNDS rounds of rotating order.

`--hybrid` gives every row a text of made-up words (see _Data) and adds the hybrid variants: pymem
(pymem.search with the query's words: BM25 over the GIN index fused with the vector ranking by
reciprocal rank, in SQL), pymem with the exact vector plan, and raw SQL on the plain table doing
the same fusion (a tsvector column kept by the database, a GIN index, ts_rank, the HNSW index
with iterative scans or exact); each hybrid variant's recall is measured against its exact twin
(the hybrid ranking differs from the vector one), and pymem hybrid's p50 is given against the
fastest raw hybrid variant with recall >= 0.95, and against the fastest raw vector search.

`--scaling` runs the whole benchmark at 10k, 30k and 100k rows and tabulates how search p50,
upsert rows/s and verification throughput change with size.
"""

from __future__ import annotations

import dataclasses
import random
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from pgvector import Vector
from pgvector.psycopg import register_vector
from psycopg.types.json import Jsonb

from pymem import migrate
from pymem.context import Context
from pymem.errors import InvalidArguments, ServerError
from pymem.storage.search import search_rows

QUERY_SHARES = (("0.1%", 0.001), ("1%", 0.01), ("10%", 0.1), ("50%", 0.5))
BATCH = 500
ROUNDS = 3  # search rounds per tenant size, each variant timed once per round
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
    hybrid: bool = False  # rows get words, and the hybrid (text + vector) variants run too

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
            "p95_ms": round(lat[min(n - 1, max(0, round(0.95 * n) - 1))], 3),
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
    uniformly around them, rounded to 6 decimals (about what float32 embeddings print).

    With `words` (the hybrid mode), each row also gets a text of 12 made-up words, half from its
    cluster's 40 topic words and half from a shared vocabulary of 2,000 (Zipf-like: a few words
    are everywhere), and each query 4 words, 3 from its cluster's topic words: text and vector
    agree about as loosely as a question and a memory do. The words come from a random source of
    their own, so the vectors are those of the vector-only run."""

    def __init__(self, dims: int, clusters: int, seed: int, words: bool = False):
        self.dims = dims
        self.rng = random.Random(seed)
        self.centres = [[self.rng.uniform(-1, 1) for _ in range(dims)] for _ in range(clusters)]
        self.words = words
        if words:
            self.word_rng = random.Random(seed + 1)
            syllables = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]
            vocabulary: list[str] = []
            seen: set[str] = set()
            while len(vocabulary) < 2_000 + 40 * clusters:
                w = "".join(self.word_rng.choice(syllables) for _ in range(self.word_rng.randint(2, 4)))
                if w not in seen:
                    seen.add(w)
                    vocabulary.append(w)
            self.shared = vocabulary[:2_000]
            self.topics = [vocabulary[2_000 + 40 * c: 2_000 + 40 * (c + 1)] for c in range(clusters)]
            self.shared_weights = [1.0 / (r + 1) for r in range(len(self.shared))]

    def _point(self, spread: float = 0.9) -> tuple[int, list[float]]:
        c = self.rng.randrange(len(self.centres))
        centre = self.centres[c]
        r = self.rng.random
        return c, [round(x + spread * (2 * r() - 1), 6) for x in centre]

    def vector(self, spread: float = 0.9) -> list[float]:
        return self._point(spread)[1]

    def _text(self, cluster: int, topical: int, shared: int) -> str:
        w = self.word_rng
        return " ".join(w.sample(self.topics[cluster], topical)
                        + w.choices(self.shared, weights=self.shared_weights, k=shared))

    def query(self) -> tuple[list[float], str | None]:
        """A query vector, and with words its text."""
        c, v = self._point()
        return v, (self._text(c, 3, 1) if self.words else None)

    def record(self, tenant: str, i: int) -> dict[str, Any]:
        c, v = self._point()
        out = {"id": f"{tenant}-{i}", "scope": {"agent": f"a{i % 4}"}, "distillate": f"synthetic memory {i}",
               "embedding": v}
        if self.words:
            out["content"] = self._text(c, 6, 6)
        return out


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
    from pymem.storage.endpoints import Endpoints
    from pymem.storage.store import Store

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
        if config.hybrid:  # the raw table's words, kept by the database as pymem keeps search_text
            admin.execute("alter table bench_raw.items add column search_text tsvector generated always as"
                          " (to_tsvector('english', coalesce(record->>'content', ''))) stored")
            admin.execute("create index items_search_text on bench_raw.items using gin (search_text)"
                          " with (fastupdate = off)")
        data = _Data(config.dims, config.clusters, config.seed, words=config.hybrid)
        queried, fillers = _tenant_sizes(config.rows)
        report["tenants"] = {t: n for t, _, n in queried} | dict(fillers)
        report["load"] = _load(bench_store, admin, admin_dsn, data, queried, fillers, config, progress)
        report["server"] = server_facts(admin)
        ef = admin.execute("select pymem._search_ef(%s)", (config.top_k,)).fetchone()[0]
        report["ef_search"] = ef
        report["search"] = _search(bench_store, admin_dsn, data, queried, config, ef, progress)
        report["upsert"] = _writes(bench_store, admin_dsn, data, config, progress)
        report["verify"] = _verify(bench_store, admin, progress)
    report["seconds"] = round(time.perf_counter() - started, 1)
    return report


def _copy_rows(conn, table: str, tenant: str, records: list[dict[str, Any]], *, binary: bool) -> None:
    """COPY a batch into a raw table, in text or binary format."""
    fmt = " (format binary)" if binary else ""
    with conn.cursor() as cur, cur.copy(f"copy {table} (tenant_id, id, embedding, record) from stdin{fmt}") as cp:
        if binary:
            cp.set_types(["text", "text", "vector", "jsonb"])
        for r in records:
            cp.write_row((tenant, r["id"], Vector(r["embedding"]), Jsonb(r)))
    conn.commit()


def _timed_round(writes: dict[str, Callable[[], Any]], i: int, seconds: dict[str, float]) -> dict[str, float]:
    """Run one batch's writes back to back, starting at a name that rotates with the batch number
    `i` (so drifting load on the machine hits every variant alike); add each one's time to
    `seconds` and return this round's times."""
    names = list(writes)
    took: dict[str, float] = {}
    for name in names[i % len(names):] + names[:i % len(names)]:
        t0 = time.perf_counter()
        writes[name]()
        took[name] = time.perf_counter() - t0
        seconds[name] += took[name]
    return took


def _load(store, admin, admin_dsn: str, data: _Data, queried, fillers, config: BenchConfig,
          progress) -> dict[str, Any]:
    """All rows into pymem (upsert_many batches, as import writes them) and into the raw table
    (COPY, binary), then the indexes. Raw COPY in text format loads the same rows into a scratch
    table alongside, and the faster raw format is the baseline. The three writes of each batch
    run back to back, in an order that rotates, so drifting load on the machine hits all alike."""
    batches = []
    for tenant, n in [(t, n) for t, _, n in queried] + fillers:
        batches += [(tenant, start, min(start + BATCH, n)) for start in range(0, n, BATCH)]
    random.Random(config.seed).shuffle(batches)  # tenants interleaved in time, as in real life
    mems = {}
    seconds = {"pymem": 0.0, "raw_copy_text": 0.0, "raw_copy_binary": 0.0}
    per_batch: list[dict[str, float]] = []
    done = 0
    admin.execute("create table bench_raw.items_text (like bench_raw.items including all)")  # generated too
    with psycopg.connect(admin_dsn, autocommit=False) as raw:
        register_vector(raw)
        for i, (tenant, start, end) in enumerate(batches):
            records = [data.record(tenant, j) for j in range(start, end)]
            mem = mems.setdefault(tenant, store.bind(Context(tenant=tenant, actor="bench")))
            writes = {
                "pymem": lambda mem=mem, records=records, start=start: mem.upsert_many(
                    records, idempotency_key=f"load-{start}"),
                "raw_copy_text": lambda tenant=tenant, records=records: _copy_rows(
                    raw, "bench_raw.items_text", tenant, records, binary=False),
                "raw_copy_binary": lambda tenant=tenant, records=records: _copy_rows(
                    raw, "bench_raw.items", tenant, records, binary=True),
            }
            per_batch.append(_timed_round(writes, i, seconds))
            done += len(records)
            if i % 20 == 0 or i == len(batches) - 1:
                progress(f"loaded {done:,} / {config.rows:,} rows")
    admin.execute("drop table bench_raw.items_text")
    progress("building the HNSW indexes (maintenance_work_mem 1GB)")
    admin.execute("set maintenance_work_mem = '1GB'")
    t0 = time.perf_counter()
    admin.execute("create index memories_embedding_hnsw on pymem.memories using hnsw (embedding vector_cosine_ops)")
    t1 = time.perf_counter()
    admin.execute("create index items_embedding_hnsw on bench_raw.items using hnsw (embedding vector_cosine_ops)")
    t2 = time.perf_counter()
    admin.execute("reset maintenance_work_mem")
    admin.execute("vacuum analyze pymem.memories")
    admin.execute("vacuum analyze bench_raw.items")
    rate = {name: round(done / s) for name, s in seconds.items()}
    best = max(("raw_copy_text", "raw_copy_binary"), key=lambda name: rate[name])
    return {"rows": done, "pymem_rows_per_s": rate["pymem"], "raw_copy_text_rows_per_s": rate["raw_copy_text"],
            "raw_copy_binary_rows_per_s": rate["raw_copy_binary"], "raw_copy_rows_per_s": rate[best],
            "pymem_vs_raw_copy": round(rate["pymem"] / rate[best], 2),
            # the same comparison batch by batch (each batch's three writes ran back to back)
            "pymem_vs_raw_copy_median_batch": round(statistics.median(b[best] / b["pymem"] for b in per_batch), 2),
            "index_build_s": {"pymem": round(t1 - t0, 1), "raw": round(t2 - t1, 1)}}


def _raw_hybrid(exact: bool) -> str:
    """Raw hybrid search on the plain table, fused as pymem fuses (reciprocal rank, k = 10, the
    text weighing as much as the vector, each ranking cut at the same pool): the vector ranking
    by the HNSW index with an iterative scan (or exactly), the text ranking by ts_rank over the
    GIN index, the words ORed."""
    order = "(embedding <=> %(q)s) + 0" if exact else "embedding <=> %(q)s"
    return (
        "with v as materialized (select id, embedding <=> %(q)s as distance from bench_raw.items"
        f" where tenant_id = %(t)s order by {order} limit %(p)s),"
        " vr as (select id, row_number() over (order by distance, id) as r from v),"
        " t as (select id, row_number() over (order by rank desc, id) as r from"
        " (select i.id, ts_rank(i.search_text, w) as rank from bench_raw.items i, to_tsquery('english', %(w)s) w"
        "  where i.tenant_id = %(t)s and i.search_text @@ w order by 2 desc, 1 limit %(p)s) x),"
        " f as (select coalesce(vr.id, t.id) as id, coalesce(1.0 / (10 + vr.r), 0) + coalesce(1.0 / (10 + t.r), 0) as s"
        " from vr full join t on t.id = vr.id)"
        " select i.id, i.record - 'embedding' as record, 1 - (i.embedding <=> %(q)s) as score from f"
        " join bench_raw.items i on i.tenant_id = %(t)s and i.id = f.id order by f.s desc, i.id limit %(k)s")


#: The hybrid mode's variants, and the exact variant each one's recall is measured against.
HYBRID_VARIANTS = {"pymem hybrid": "pymem hybrid exact", "pymem hybrid exact": "pymem hybrid exact",
                   "raw hybrid": "raw hybrid exact", "raw hybrid exact": "raw hybrid exact"}


def _variants(config: BenchConfig) -> tuple[str, ...]:
    return VARIANTS + (tuple(HYBRID_VARIANTS) if config.hybrid else ())


def _search(store, admin_dsn: str, data: _Data, queried, config: BenchConfig, ef: int, progress) -> list[dict]:
    conns = {}
    for name in list(_RAW) + (["raw hybrid", "raw hybrid exact"] if config.hybrid else []):
        conn = psycopg.connect(admin_dsn, autocommit=True)
        register_vector(conn)
        if name in ("raw iterative", "raw hybrid"):
            conn.execute("set hnsw.iterative_scan = relaxed_order")
            conn.execute(f"set hnsw.ef_search = {int(ef)}")
        conns[name] = conn
    k = config.top_k
    pool = min(1000, max(4 * k, 50))  # what pymem._search_hybrid cuts each ranking at
    names = _variants(config)
    results = []
    try:
        for tenant, label, n in queried:
            progress(f"searching tenant {label} ({n:,} rows): {config.queries} queries x {len(names)} variants")
            ctx = Context(tenant=tenant, actor="bench")
            mem = store.bind(ctx)

            def pymem_ids(q, mem=mem):
                return [h["chunk_id"] for h in mem.search(q[0], top_k=k, include={"embedding": False})]

            def pymem_hybrid(plan, ctx=ctx):
                def call(query):
                    with store.transaction(ctx, None, snapshot=True) as c:
                        hits = search_rows(c, ctx, query[0], k, dim=config.dims, with_vectors=False, plan=plan,
                                           text=query[1])
                    return [h.id for h in hits]
                return call

            def raw_ids(name, tenant=tenant):
                def call(query):
                    rows = conns[name].execute(_RAW[name], {"q": Vector(query[0]), "t": tenant, "k": k},
                                               prepare=False).fetchall()
                    return [r[0] for r in rows]
                return call

            def raw_hybrid(name, tenant=tenant):
                sql = _raw_hybrid(exact=name.endswith("exact"))

                def call(query):
                    words = " | ".join(query[1].split())
                    rows = conns[name].execute(sql, {"q": Vector(query[0]), "t": tenant, "k": k, "p": pool, "w": words},
                                               prepare=False).fetchall()
                    return [r[0] for r in rows]
                return call

            calls = {"pymem": pymem_ids} | {name: raw_ids(name) for name in _RAW}
            if config.hybrid:
                calls |= {"pymem hybrid": pymem_hybrid("auto"), "pymem hybrid exact": pymem_hybrid("exact"),
                          "raw hybrid": raw_hybrid("raw hybrid"), "raw hybrid exact": raw_hybrid("raw hybrid exact")}
            queries = [data.query() for _ in range(config.queries)]
            stats = {name: VariantResult() for name in names}
            got: dict[str, list[list[str]]] = {name: [] for name in names}
            # One variant at a time, each after an untimed pass over the same queries: every
            # variant is timed with its own index and rows as warm as the cache allows (the
            # two HNSW indexes together rarely fit in shared_buffers, and interleaving would
            # time mostly evictions). ROUNDS rounds, each in another order, so that load on the
            # machine drifting during the run falls on every variant alike.
            for r in range(ROUNDS):
                for name in names[r % len(names):] + names[:r % len(names)]:
                    for q in queries:
                        calls[name](q)
                    for q in queries:
                        t0 = time.perf_counter()
                        got[name].append(calls[name](q))
                        stats[name].latencies_ms.append((time.perf_counter() - t0) * 1000)
            for i in range(config.queries * ROUNDS):
                for name in names:
                    truth = set(got[HYBRID_VARIANTS.get(name, "raw exact")][i])
                    stats[name].full += len(got[name][i]) == min(k, n)
                    stats[name].recall_sum += len(truth & set(got[name][i])) / max(1, len(truth))
            variants = {name: stats[name].summary() for name in names}
            good_raw = {name: variants[name] for name in _RAW
                        if variants[name]["recall"] >= 0.95 and variants[name]["full_top_k_share"] == 1.0}
            best = min(good_raw, key=lambda name: good_raw[name]["p50_ms"]) if good_raw else None
            result = {
                "tenant": tenant, "share": label, "rows": n, "variants": variants, "fastest_good_raw": best,
                "pymem_p50_vs_fastest_good_raw": round(variants["pymem"]["p50_ms"] / good_raw[best]["p50_ms"], 2)
                if best else None,
            }
            if config.hybrid:
                good = {name: variants[name] for name in ("raw hybrid", "raw hybrid exact")
                        if variants[name]["recall"] >= 0.95 and variants[name]["full_top_k_share"] == 1.0}
                best_hybrid = min(good, key=lambda name: good[name]["p50_ms"]) if good else None
                hybrid_p50 = variants["pymem hybrid"]["p50_ms"]
                result |= {
                    "fastest_good_raw_hybrid": best_hybrid,
                    "hybrid_p50_vs_fastest_good_raw_hybrid": round(hybrid_p50 / good[best_hybrid]["p50_ms"], 2)
                    if best_hybrid else None,
                    "hybrid_p50_vs_fastest_good_raw": round(hybrid_p50 / good_raw[best]["p50_ms"], 2) if best else None,
                }
            results.append(result)
    finally:
        for conn in conns.values():
            conn.close()
    return results


def _writes(store, admin_dsn: str, data: _Data, config: BenchConfig, progress) -> dict[str, Any]:
    """Upsert throughput with the indexes in place: the same rows through pymem, raw INSERT and
    raw COPY (binary), batch by batch in a rotating order (as in _load)."""
    m = config.writes
    rows = [data.record("w", i) for i in range(m)]
    batches = [rows[i:i + BATCH] for i in range(0, m, BATCH)]
    progress(f"writing {m:,} rows three ways (batches of {BATCH})")
    mem = store.bind(Context(tenant="bench-write", actor="bench"))
    seconds = {"pymem": 0.0, "raw_insert": 0.0, "raw_copy": 0.0}
    per_batch: list[dict[str, float]] = []
    with psycopg.connect(admin_dsn) as raw:
        register_vector(raw)

        def insert(batch):
            values = ", ".join(["(%s, %s, %s, %s)"] * len(batch))
            params = [x for r in batch for x in ("bench-write-insert", r["id"], Vector(r["embedding"]), Jsonb(r))]
            raw.execute(f"insert into bench_raw.items (tenant_id, id, embedding, record) values {values}", params)
            raw.commit()

        for i, batch in enumerate(batches):
            writes = {
                "pymem": lambda batch=batch, i=i: mem.upsert_many(batch, idempotency_key=f"write-{i}"),
                "raw_insert": lambda batch=batch: insert(batch),
                "raw_copy": lambda batch=batch: _copy_rows(raw, "bench_raw.items", "bench-write-copy", batch,
                                                           binary=True),
            }
            per_batch.append(_timed_round(writes, i, seconds))
    out = {"rows": m, "pymem_rows_per_s": round(m / seconds["pymem"]),
           "raw_insert_rows_per_s": round(m / seconds["raw_insert"]),
           "raw_copy_rows_per_s": round(m / seconds["raw_copy"])}
    out["pymem_vs_raw_insert"] = round(out["pymem_rows_per_s"] / out["raw_insert_rows_per_s"], 2)
    out["pymem_vs_raw_insert_median_batch"] = round(
        statistics.median(b["raw_insert"] / b["pymem"] for b in per_batch), 2)
    return out


def _verify(store, admin, progress) -> dict[str, Any]:
    """Full verification of every tenant (chain and every live row re-hashed): as `pymem verify`
    runs it (pymem.verify_store), and inside the database (pymem.verify_chain) for comparison."""
    from pymem.integrity.verify import JOBS, verify_store

    progress(f"verifying every tenant as pymem verify does ({JOBS} connections, hashing in Python)")
    report = verify_store(store)
    if not report.clean:  # pragma: no cover - would be a bug in pymem
        raise ServerError(f"verification found a problem in tenant {report.first_problem.tenant}")
    rows = sum(t.rows_checked for t in report.tenants)
    progress("verifying every tenant inside the database (pymem.verify_chain)")
    t0 = time.perf_counter()
    in_db = admin.execute("select tenant_id, entries, problem from pymem.verify_chain()").fetchall()
    in_db_s = time.perf_counter() - t0
    if any(r[2] is not None for r in in_db):  # pragma: no cover - would be a bug in pymem
        raise ServerError("pymem.verify_chain found a problem")
    return {"entries": report.entries, "rows_checked": rows, "seconds": round(report.seconds, 2), "jobs": JOBS,
            "entries_per_s": round(report.entries / report.seconds), "rows_per_s": round(rows / report.seconds),
            "in_database_seconds": round(in_db_s, 2),
            "in_database_entries_per_s": round(sum(r[1] for r in in_db) / in_db_s)}


def format_report(report: dict[str, Any]) -> str:
    """The human-readable table of a report."""
    c = report["config"]
    srv = report["server"]
    lines = [f"pymem bench: {report['load']['rows']:,} rows x {c['dims']} dims, {c['clusters']} clusters, "
             f"top {c['top_k']}, {c['queries']} queries per tenant, HNSW m=16 ef_construction=64, "
             f"ef_search {report['ef_search']} (pymem and raw iterative)"
             + ("; hybrid: 12 words a row, 4 a query, recall of each hybrid variant against its exact twin"
                if c.get("hybrid") else ""),
             f"PostgreSQL {srv['postgres']}, pgvector {srv['pgvector']}, shared_buffers {srv['shared_buffers']}", ""]
    header = f"{'tenant':>7} {'rows':>8}  {'variant':<14} {'p50 ms':>8} {'p95 ms':>8} {'full':>6} {'recall':>7}"
    lines += ["search", header, "-" * len(header)]
    for s in report["search"]:
        for i, name in enumerate(s["variants"]):
            v = s["variants"][name]
            lead = f"{s['share']:>7} {s['rows']:>8,}" if i == 0 else " " * 16
            lines.append(f"{lead}  {name:<14} {v['p50_ms']:>8.3f} {v['p95_ms']:>8.3f} "
                         f"{v['full_top_k_share']:>6.0%} {v['recall']:>7.3f}")
        ratio = s["pymem_p50_vs_fastest_good_raw"]
        lines.append(" " * 18 + (f"pymem p50 = {ratio:.2f}x {s['fastest_good_raw']} (fastest raw with recall >= 0.95)"
                                 if ratio is not None else "no raw variant reached recall >= 0.95 with full top_k"))
        if "fastest_good_raw_hybrid" in s:
            hybrid = s["hybrid_p50_vs_fastest_good_raw_hybrid"]
            lines.append(" " * 18 + (f"pymem hybrid p50 = {hybrid:.2f}x {s['fastest_good_raw_hybrid']} (fastest raw "
                                     "hybrid with recall >= 0.95)" if hybrid is not None
                                     else "no raw hybrid variant reached recall >= 0.95 with full top_k")
                         + (f", {s['hybrid_p50_vs_fastest_good_raw']:.2f}x raw vector search"
                            if s["hybrid_p50_vs_fastest_good_raw"] is not None else ""))
    load, up, ver = report["load"], report["upsert"], report["verify"]
    lines += ["", "writes (rows/s)",
              f"  initial load, no vector index: pymem upsert_many {load['pymem_rows_per_s']:,}, "
              f"raw COPY binary {load['raw_copy_binary_rows_per_s']:,}, text {load['raw_copy_text_rows_per_s']:,} "
              f"(pymem = {load['pymem_vs_raw_copy']:.2f}x the faster COPY; median of the batches "
              f"{load['pymem_vs_raw_copy_median_batch']:.2f}x)",
              f"  HNSW build {load['index_build_s']['pymem']} s (pymem), {load['index_build_s']['raw']} s (raw)",
              f"  {up['rows']:,} rows into the indexed tables, batches of {BATCH}: pymem {up['pymem_rows_per_s']:,}, "
              f"raw INSERT {up['raw_insert_rows_per_s']:,}, raw COPY {up['raw_copy_rows_per_s']:,} "
              f"(pymem = {up['pymem_vs_raw_insert']:.2f}x raw INSERT; median of the batches "
              f"{up['pymem_vs_raw_insert_median_batch']:.2f}x)",
              "", f"verify (pymem verify: {ver['jobs']} connections, hashes in Python): {ver['entries']:,} ledger "
              f"entries and {ver['rows_checked']:,} rows in {ver['seconds']} s ({ver['entries_per_s']:,} entries/s, "
              f"{ver['rows_per_s']:,} rows/s)",
              f"  inside the database (pymem.verify_chain, one connection): {ver['in_database_seconds']} s "
              f"({ver['in_database_entries_per_s']:,} entries/s)", f"total {report['seconds']} s"]
    return "\n".join(lines)


SCALING_ROWS = (10_000, 30_000, 100_000)


def run_scaling(store, config: BenchConfig, progress: Callable[[str], None] = lambda _m: None,
                sizes: tuple[int, ...] = SCALING_ROWS) -> dict[str, Any]:
    """The whole benchmark at each size (one database at a time), and a table of how it scales."""
    reports = []
    for rows in sizes:
        progress(f"scaling: {rows:,} rows")
        reports.append(run(store, dataclasses.replace(config, rows=rows, write_rows=None),
                           progress=lambda m, rows=rows: progress(f"[{rows:,}] {m}")))
    table = []
    for r in reports:
        ver = r["verify"]
        table.append({
            "rows": r["load"]["rows"],
            "search_p50_ms": {s["share"]: s["variants"]["pymem"]["p50_ms"] for s in r["search"]},
            "search_p50_vs_fastest_good_raw": {s["share"]: s["pymem_p50_vs_fastest_good_raw"] for s in r["search"]},
            "upsert_rows_per_s": r["upsert"]["pymem_rows_per_s"],
            "upsert_pymem_vs_raw_insert": r["upsert"]["pymem_vs_raw_insert"],
            "load_pymem_vs_raw_copy": r["load"]["pymem_vs_raw_copy"],
            "verify_entries_per_s": ver["entries_per_s"],
            "verify_seconds": ver["seconds"],
            "verify_us_per_entry": round(1e6 * ver["seconds"] / ver["entries"], 1),
        })
    return {"scaling": table, "reports": reports}


def format_scaling(result: dict[str, Any]) -> str:
    """The scaling table: per size, pymem's search p50 (and its ratio to the fastest good raw
    variant), upsert rows/s and verification throughput (linear growth = flat us per entry)."""
    shares = [label for label, _ in QUERY_SHARES]
    head = (f"{'rows':>8}  " + " ".join(f"{'p50 ' + s:>14}" for s in shares)
            + f"  {'upsert/s':>9} {'verify/s':>9} {'us/entry':>9}")
    lines = ["pymem bench --scaling (search p50 ms, and x the fastest raw variant with recall >= 0.95)", head,
             "-" * len(head)]
    for t in result["scaling"]:
        cells = []
        for s in shares:
            ratio = t["search_p50_vs_fastest_good_raw"][s]
            cells.append(f"{t['search_p50_ms'][s]:>7.2f} ({ratio:.2f}x)" if ratio is not None
                         else f"{t['search_p50_ms'][s]:>7.2f} (  -  )")
        lines.append(f"{t['rows']:>8,}  " + " ".join(f"{c:>14}" for c in cells)
                     + f"  {t['upsert_rows_per_s']:>9,} {t['verify_entries_per_s']:>9,} {t['verify_us_per_entry']:>9}")
    return "\n".join(lines)


__all__ = ["HYBRID_VARIANTS", "BenchConfig", "run", "run_scaling", "format_report", "format_scaling", "with_database",
           "scratch_database", "Scratch", "server_facts", "SCALING_ROWS"]
