"""A bounded load test on loopback: `pymem serve` as its own process, 16 concurrent clients for 20
seconds of mixed upsert_many and search. It must end with zero errors and zero lost writes (every
acknowledged upsert readable afterwards) and a chain that verifies. Throughput and p95 are printed,
not asserted: performance targets live in `pymem bench`.
"""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import defaultdict

import pytest
from helpers.database import DIM
from helpers.service import KEY, request, token

from pymem import Context
from pymem.client import Client

CLIENTS = 16
SECONDS = 20.0
TENANTS = 4  # four clients per tenant: writers of one tenant contend for its chain head


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@pytest.mark.slow
def test_sixteen_clients_for_twenty_seconds_lose_nothing(database, store, tmp_path):
    port = _free_port()
    env = {**os.environ, "PYMEM_DSN": database.app_dsn, "PYMEM_ADMIN_DSN": database.admin_dsn,
           "PYMEM_EMBEDDING_DIM": str(DIM), "PYMEM_JWT_KEY": KEY, "PYMEM_HOME": str(tmp_path)}
    log = (tmp_path / "serve.log").open("w")
    server = subprocess.Popen([sys.executable, "-m", "pymem.cli", "serve", "--port", str(port), "--pool-size", "16"],
                              env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if request(url, "GET", "/readyz")[0] == 200:
                    break
            except OSError:
                pass
            assert server.poll() is None and time.monotonic() < deadline, (tmp_path / "serve.log").read_text()
            time.sleep(0.1)

        acked: dict[str, set[str]] = defaultdict(set)
        latencies: dict[str, list[float]] = defaultdict(list)
        errors: list[str] = []
        lock = threading.Lock()
        stop_at = time.monotonic() + SECONDS

        def worker(n: int) -> None:
            rng = random.Random(n)
            tenant = f"load-{n % TENANTS}"
            mine: set[str] = set()
            times: dict[str, list[float]] = defaultdict(list)
            with Client(url, token(tenant=tenant, actor=f"client-{n}")) as client:
                i = 0
                while time.monotonic() < stop_at:
                    i += 1
                    started = time.perf_counter()
                    try:
                        if rng.random() < 0.5:
                            batch = [{"id": f"c{n}-{i}-{j}", "content": f"note {i} {j}",
                                      "embedding": [rng.gauss(0, 1) for _ in range(DIM)]}
                                     for j in range(rng.randint(1, 4))]
                            result = client.upsert_many(batch, idempotency_key=f"k{n}-{i}")
                            assert result == {"upserted": len(batch), "replayed": False}, result
                            mine.update(r["id"] for r in batch)
                            kind = "upsert_many"
                        else:
                            hits = client.search([rng.gauss(0, 1) for _ in range(DIM)], top_k=5,
                                                 include={"embedding": False})
                            assert len(hits) <= 5
                            kind = "search"
                    except Exception as exc:  # noqa: BLE001 - every failure is counted and reported
                        with lock:
                            errors.append(f"client {n}: {type(exc).__name__}: {exc}")
                        continue
                    times[kind].append(time.perf_counter() - started)
            with lock:
                acked[tenant].update(mine)
                for kind, values in times.items():
                    latencies[kind].extend(values)

        threads = [threading.Thread(target=worker, args=(n,)) for n in range(CLIENTS)]
        began = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join(SECONDS + 120)
        elapsed = time.monotonic() - began
        assert not any(t.is_alive() for t in threads)
    finally:
        server.send_signal(signal.SIGINT)
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(10)
        log.close()

    everything = [v for values in latencies.values() for v in values]
    report = {"requests": len(everything), "seconds": round(elapsed, 1),
              "requests_per_s": round(len(everything) / elapsed, 1),
              "p50_ms": round(_percentile(everything, 0.50) * 1000, 1),
              "p95_ms": round(_percentile(everything, 0.95) * 1000, 1),
              **{f"{k}_p95_ms": round(_percentile(v, 0.95) * 1000, 1) for k, v in latencies.items()},
              **{f"{k}_calls": len(v) for k, v in latencies.items()},
              "acknowledged_records": sum(len(v) for v in acked.values()), "errors": len(errors)}
    print(f"\nload test: {report}")
    assert not errors, errors[:5]
    assert latencies["upsert_many"] and latencies["search"]

    # zero lost writes: every acknowledged record is there, in its own tenant, read back by the library
    lost = 0
    for tenant, ids in acked.items():
        found = {r["id"] for r in store.bind(Context(tenant=tenant)).get_many(sorted(ids))}
        lost += len(ids - found)
    assert lost == 0, f"{lost} acknowledged records are missing"

    # and the chain verifies, as `pymem verify` reports it
    verify = subprocess.run([sys.executable, "-m", "pymem.cli", "verify"], env=env, capture_output=True, text=True,
                            timeout=300)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert server.returncode is not None
