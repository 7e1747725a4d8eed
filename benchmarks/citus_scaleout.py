"""Scale-out: many tenants on one Postgres against a Citus coordinator with workers.

    python -m benchmarks.citus_scaleout --dsn SINGLE_ADMIN_DSN --dsn COORDINATOR_ADMIN_DSN

Each DSN is an administrative login to a database where `pymem db upgrade` (and, on a cluster,
`pymem db distribute`) ran with the --dims embedding dimension, and where a login `--app` (a
member of pymem_app) exists. For each target it loads --tenants tenants of --rows-per-tenant rows
(8 clients, one multi-row INSERT per tenant), then with --clients clients for --seconds each:
single-row writes (a transaction each: context, INSERT, commit) and searches (a transaction each:
context, pymem.search top 10) on random tenants. It prints writes/s, search p50/p95 and, on Citus,
the share of calls whose every statement was routed to one shard (a call is counted as not routed
when Citus announces a multi-task query in it: citus.multi_task_query_log_level = notice).

Writes are raw SQL through the app login, as pymem's triggers and policies see any writer; the
library's own write path does not run on Citus yet (docs/howto/citus.md).
"""

from __future__ import annotations

import argparse
import random
import statistics
import threading
import time
from urllib.parse import urlsplit, urlunsplit

import psycopg

PASSWORD = "bench"


def _as(dsn: str, user: str, password: str) -> str:
    parts = urlsplit(dsn)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, f"{user}:{password}@{host}", parts.path, parts.query, ""))


def _vec(rng: random.Random, dims: int) -> str:
    return "[" + ",".join(f"{rng.gauss(0, 1):.4f}" for _ in range(dims)) + "]"


def _load(app: str, tenants: list[str], per_tenant: int, dims: int, clients: int) -> float:
    todo = list(tenants)
    lock = threading.Lock()

    def work(seed: int) -> None:
        rng = random.Random(seed)
        with psycopg.connect(app) as conn:
            while True:
                with lock:
                    if not todo:
                        return
                    t = todo.pop()
                conn.execute("select pymem.set_context(%s, 'loader')", (t,))
                values = ",".join(["(%s, %s, %s, %s::vector)"] * per_tenant)
                params: list = []
                for i in range(per_tenant):
                    params += [t, f"r{i}", f"row {i} of {t}", _vec(rng, dims)]
                conn.execute(f"insert into pymem.memories (tenant_id, id, content, embedding) values {values}", params)
                conn.commit()

    started = time.perf_counter()
    threads = [threading.Thread(target=work, args=(n,)) for n in range(clients)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return time.perf_counter() - started


def _run(app: str, tenants: list[str], dims: int, clients: int, seconds: float, kind: str,
         citus: bool) -> tuple[list[float], int, int]:
    latencies: list[float] = []
    calls = [0]
    spread = [0]
    lock = threading.Lock()
    stop = time.perf_counter() + seconds

    def work(seed: int) -> None:
        rng = random.Random(seed)
        notices: list[str] = []
        mine: list[float] = []
        n = multi = 0
        with psycopg.connect(app) as conn:
            conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
            if citus:
                conn.execute("set citus.multi_task_query_log_level = notice")
                conn.commit()
            while time.perf_counter() < stop:
                t = rng.choice(tenants)
                q = _vec(rng, dims)
                notices.clear()
                began = time.perf_counter()
                conn.execute("select pymem.set_context(%s, 'bench')", (t,))
                if kind == "write":
                    conn.execute("insert into pymem.memories (tenant_id, id, content, embedding)"
                                 " values (%s, %s, 'a write', %s::vector)", (t, f"w{seed}-{n}", q))
                else:
                    conn.execute("select count(*) from pymem.search(%s::vector, 10)", (q,)).fetchall()
                conn.commit()
                mine.append(time.perf_counter() - began)
                n += 1
                multi += any("multi-task" in m or "multi-shard" in m for m in notices)
        with lock:
            latencies.extend(mine)
            calls[0] += n
            spread[0] += multi

    threads = [threading.Thread(target=work, args=(1000 + n,)) for n in range(clients)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return latencies, calls[0], spread[0]


def bench(admin: str, app_login: str, *, tenants: int, per_tenant: int, dims: int, clients: int,
          seconds: float) -> dict:
    with psycopg.connect(admin, autocommit=True) as conn:
        citus = conn.execute("select exists (select from pg_extension where extname = 'citus')").fetchone()[0]
        workers = conn.execute("select count(*) from pg_dist_node where groupid <> 0").fetchone()[0] if citus else 0
        conn.execute(f"alter role {app_login} password '{PASSWORD}'")
    app = _as(admin, app_login, PASSWORD)
    names = [f"tenant-{i:04d}" for i in range(tenants)]
    load_s = _load(app, names, per_tenant, dims, clients)
    w_lat, w_calls, w_multi = _run(app, names, dims, clients, seconds, "write", citus)
    s_lat, s_calls, s_multi = _run(app, names, dims, clients, seconds, "search", citus)
    q = statistics.quantiles
    return {
        "target": f"Citus, coordinator + {workers} workers" if citus else "one Postgres",
        "rows": tenants * per_tenant, "load_rows_per_s": tenants * per_tenant / load_s,
        "writes_per_s": w_calls / seconds, "write_p50_ms": statistics.median(w_lat) * 1e3,
        "search_per_s": s_calls / seconds, "search_p50_ms": statistics.median(s_lat) * 1e3,
        "search_p95_ms": q(s_lat, n=20)[18] * 1e3,
        "routed_share": None if not citus else 1 - (w_multi + s_multi) / max(1, w_calls + s_calls),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dsn", action="append", required=True, help="administrative DSN of a target (repeatable)")
    p.add_argument("--app", default="pymem_bench_app", help="a login in pymem_app on every target")
    p.add_argument("--tenants", type=int, default=1000)
    p.add_argument("--rows-per-tenant", type=int, default=200)
    p.add_argument("--dims", type=int, default=32)
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--seconds", type=float, default=20.0)
    args = p.parse_args()
    print("| target | rows | load rows/s | writes/s (8 clients) | write p50 | searches/s | search p50 | search p95 |"
          " calls routed to one shard |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for dsn in args.dsn:
        r = bench(dsn, args.app, tenants=args.tenants, per_tenant=args.rows_per_tenant, dims=args.dims,
                  clients=args.clients, seconds=args.seconds)
        routed = "n/a" if r["routed_share"] is None else f"{r['routed_share']:.1%}"
        print(f"| {r['target']} | {r['rows']:,} | {r['load_rows_per_s']:,.0f} | {r['writes_per_s']:,.0f} |"
              f" {r['write_p50_ms']:.2f} ms | {r['search_per_s']:,.0f} | {r['search_p50_ms']:.2f} ms |"
              f" {r['search_p95_ms']:.2f} ms | {routed} |", flush=True)


if __name__ == "__main__":
    main()
