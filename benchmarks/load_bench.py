"""`pymem bench --hostile` and `pymem bench --fairness`: the service under load, through `pymem serve`.

Both start `pymem serve` as a process of its own on a loopback port (the store of the environment:
PYMEM_DSN, else the embedded server; a random token key), measure a quiet tenant's calls with the
service idle, then again while other clients load it from processes of their own, and report the
loaded figures beside the idle ones (ratios measured in the same run).

--hostile: 4 clients each send 64 KiB notes (`remember`, whitespace-free text: the shape that was
quadratic) in a loop for `seconds`; meanwhile /healthz is probed (p50/p99) and a quiet tenant
recalls a short query (p50). Also the gate's decision time for one 64 KiB note, whitespace-free
and prose, in this process (best of 3).

--fairness: one tenant runs 4 concurrent upsert_many of 2,000 records in a loop (more than its
call limit: the surplus gets 429 tenant_busy at once), meanwhile a quiet tenant lists a page of
its memories (p50), against the same idle figure.
"""

from __future__ import annotations

import multiprocessing
import os
import random
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

__all__ = ["run_hostile", "run_fairness", "format_load_report", "decision_times"]

NOTE_BYTES = 65536


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _pct(xs: list[float], q: float) -> float | None:
    if not xs:
        return None
    xs = sorted(xs)
    return round(1e3 * xs[min(len(xs) - 1, int(q * len(xs)))], 2)


def _token(key: str, tenant: str) -> str:
    import jwt  # the server extra's PyJWT: what the service verifies with

    now = int(time.time())
    return jwt.encode({"tenant": tenant, "actor": "bench", "iat": now, "exp": now + 3600}, key, algorithm="HS256")


class _Caller:
    """One keep-alive connection calling verbs: (status, JSON body) per call (standard library only)."""

    def __init__(self, url: str, token: str, timeout: float = 600):
        import http.client

        host, port = url.removeprefix("http://").split(":")
        self.conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
        self.headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

    def reconnect(self) -> None:
        self.conn.close()

    def call(self, verb: str, args: dict[str, Any], key: str | None = None) -> tuple[int, Any]:
        import json

        body = {"verb": verb, "args": args, **({"idempotency_key": key} if key else {})}
        self.conn.request("POST", "/v1/call", body=json.dumps(body).encode(), headers=self.headers)
        response = self.conn.getresponse()
        data = response.read()
        if response.getheader("connection", "").lower() == "close":
            self.conn.close()
        return response.status, json.loads(data)

    def __enter__(self) -> _Caller:
        return self

    def __exit__(self, *exc: object) -> None:
        self.conn.close()


class _Server:
    def __init__(self, extra: list[str], progress: Callable[[str], None]):
        self.key = secrets.token_hex(32)
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "PYMEM_JWT_KEY": self.key}
        progress(f"starting pymem serve on port {self.port} {' '.join(extra)}")
        self.proc = subprocess.Popen([sys.executable, "-m", "pymem.cli", "serve", "--port", str(self.port), *extra],
                                     env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 180
        while True:
            try:
                with _Caller(self.url, _token(self.key, "probe")) as c:
                    if c.call("health", {})[0] != 200:
                        raise RuntimeError("not ready")
                break
            except Exception:  # noqa: BLE001 - not up yet
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("pymem serve did not start") from None
                time.sleep(0.3)

    def close(self) -> None:
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def _healthz(url: str) -> float:
    import http.client

    host, port = url.removeprefix("http://").split(":")
    t0 = time.perf_counter()
    conn = http.client.HTTPConnection(host, int(port), timeout=60)
    conn.request("GET", "/healthz")
    conn.getresponse().read()
    conn.close()
    return time.perf_counter() - t0


def _measure(url: str, key: str, tenant: str, what: str, seconds: float) -> dict[str, list[float]]:
    """Time the quiet tenant's call (`recall` or `list`) and /healthz, alternately, for `seconds`."""
    out: dict[str, list[float]] = {"call": [], "healthz": []}
    stop = time.monotonic() + seconds
    with _Caller(url, _token(key, tenant)) as client:
        while time.monotonic() < stop:
            t0 = time.perf_counter()
            if what == "recall":
                client.call("recall", {"query": "quarterly budget review", "top_k": 3})
            else:
                client.call("list", {"limit": 20})
            out["call"].append(time.perf_counter() - t0)
            out["healthz"].append(_healthz(url))
            time.sleep(0.02)
    return out


def _hostile_client(url: str, key: str, n: int, seconds: float, counts) -> None:
    note = ("abcdefghij" * (NOTE_BYTES // 10 + 1))[:NOTE_BYTES - 16] + f"{n:08d}"
    stop = time.monotonic() + seconds
    done = busy = saturated = errors = 0
    with _Caller(url, _token(key, f"hostile-{n}")) as client:
        i = 0
        while time.monotonic() < stop:
            i += 1
            status, _ = client.call("remember", {"record": {"content": note[:-8] + f"{i:08d}"},
                                                 "provenance": {"origin": "user_asserted"}})
            if status == 200:
                done += 1
            elif status == 429:
                busy += 1
            elif status == 503:  # no heavy-call slot within the pool wait: sent again at once (hostile)
                saturated += 1
            else:
                errors += 1
    counts.put((done, busy, saturated, errors))


def _fair_body(n: int) -> tuple[bytes, bytes]:
    """One upsert_many call of 2,000 records (about 15 MB), encoded once: (body, the id marker to vary).

    The load is built once per client and only its marker is replaced per call, so the loading
    processes spend their time sending, not generating random vectors: on a small machine the
    load generator would otherwise take the CPU it is meant to measure the service's share of."""
    import json

    rng = random.Random(n)
    marker = f"@@{n:04d}@@"
    batch = [{"id": f"n{n}-{marker}-{j}", "content": f"note {j}", "embedding": [round(rng.gauss(0, 1), 6)
                                                                                for _ in range(384)]}
             for j in range(2000)]
    body = {"verb": "upsert_many", "args": {"records": batch}, "idempotency_key": f"n{n}-{marker}"}
    return json.dumps(body).encode(), marker.encode()


def _fair_client(url: str, key: str, n: int, seconds: float, counts) -> None:
    import json

    body, marker = _fair_body(n)
    stop = time.monotonic() + seconds
    done = busy = saturated = errors = 0
    with _Caller(url, _token(key, "noisy")) as client:
        i = 0
        while time.monotonic() < stop:
            i += 1
            try:
                client.conn.request("POST", "/v1/call", body=body.replace(marker, f"{i:08d}".encode()),
                                    headers=client.headers)
                response = client.conn.getresponse()
                json.loads(response.read())
                if response.getheader("connection", "").lower() == "close":
                    client.reconnect()
                status = response.status
            except OSError:  # refused before its 15 MB body was read (429): the service closed the connection
                client.reconnect()
                status = 429
            if status == 200:
                done += 1
            elif status == 429:
                busy += 1
                time.sleep(1.0)
            elif status == 503:  # waited past the pool wait for a heavy-call slot: retried after Retry-After
                saturated += 1
                time.sleep(1.0)
            else:
                errors += 1
    counts.put((done, busy, saturated, errors))


def _load(target, url: str, key: str, clients: int, seconds: float) -> tuple[list[Any], list[Any]]:
    ctx = multiprocessing.get_context("spawn")
    counts = ctx.Queue()
    procs = [ctx.Process(target=target, args=(url, key, n, seconds, counts)) for n in range(clients)]
    for p in procs:
        p.start()
    return procs, [counts]


def _summary(idle: dict[str, list[float]], loaded: dict[str, list[float]]) -> dict[str, Any]:
    idle_p50, loaded_p50 = _pct(idle["call"], 0.5), _pct(loaded["call"], 0.5)
    return {"idle_call_p50_ms": idle_p50, "loaded_call_p50_ms": loaded_p50,
            "call_ratio_p50": round(loaded_p50 / idle_p50, 2) if idle_p50 and loaded_p50 else None,
            "idle_healthz_p99_ms": _pct(idle["healthz"], 0.99), "loaded_healthz_p50_ms": _pct(loaded["healthz"], 0.5),
            "loaded_healthz_p99_ms": _pct(loaded["healthz"], 0.99), "samples": len(loaded["call"])}


def decision_times() -> dict[str, float]:
    """The gate's content check on one 64 KiB note, whitespace-free and prose (ms, best of 3)."""
    from pymem.admission.judge import check_content
    from pymem.admission.policy import AdmissionPolicy
    from pymem.admission.provenance import Provenance

    from .admission_bench import _note

    policy, prov = AdmissionPolicy(), Provenance.from_json({"origin": "user_asserted"})
    notes = {"whitespace_free": "a" * NOTE_BYTES, "prose": _note(random.Random(3), NOTE_BYTES)[:NOTE_BYTES]}
    out = {}
    for name, text in notes.items():
        best = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            check_content({"content": text}, prov, policy)
            best = min(best, time.perf_counter() - t0)
        out[f"{name}_ms"] = round(1e3 * best, 1)
    return out


def _seed_quiet(url: str, key: str, tenant: str) -> None:
    with _Caller(url, _token(key, tenant)) as client:
        for i in range(20):
            client.call("remember", {"record": {"content": f"the quarterly budget review {i} is on a Tuesday"},
                                     "provenance": {"origin": "user_asserted"}})


def _run(target, clients: int, what: str, seconds: float, extra: list[str],
         progress: Callable[[str], None]) -> dict[str, Any]:
    server = _Server(extra, progress)
    try:
        _seed_quiet(server.url, server.key, "quiet")
        progress(f"idle: the quiet tenant's {what} and /healthz for {min(seconds, 10):g} s")
        idle = _measure(server.url, server.key, "quiet", what, min(seconds, 10))
        progress(f"loaded: {clients} clients for {seconds:g} s")
        procs, (counts,) = _load(target, server.url, server.key, clients, seconds)
        time.sleep(1.0)
        loaded = _measure(server.url, server.key, "quiet", what, seconds - 1.0)
        tallies = []
        for p in procs:
            p.join(seconds + 600)
            tallies.append(counts.get(timeout=5) if p.exitcode == 0 else (0, 0, 0, 1))
        for p in procs:
            p.join(60)
    finally:
        server.close()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    return {**_summary(idle, loaded), "clients": clients, "seconds": seconds, "tallies": tallies,
            "load_average": None if load is None else round(load, 2)}


def run_hostile(seconds: float = 30.0, progress: Callable[[str], None] = lambda m: None) -> dict[str, Any]:
    report = _run(_hostile_client, 4, "recall", seconds, [], progress)
    report["notes_remembered"] = sum(t[0] for t in report["tallies"])
    report["tenant_busy"] = sum(t[1] for t in report["tallies"])
    report["saturated"] = sum(t[2] for t in report["tallies"])
    report["errors"] = sum(t[3] for t in report["tallies"])
    report["decision"] = decision_times()
    return {"kind": "hostile", **report}


def run_fairness(seconds: float = 30.0, progress: Callable[[str], None] = lambda m: None) -> dict[str, Any]:
    report = _run(_fair_client, 4, "list", seconds, [], progress)
    report["batches"] = sum(t[0] for t in report["tallies"])
    report["tenant_busy"] = sum(t[1] for t in report["tallies"])
    report["saturated"] = sum(t[2] for t in report["tallies"])
    report["errors"] = sum(t[3] for t in report["tallies"])
    return {"kind": "fairness", **report}


def format_load_report(r: dict[str, Any]) -> str:
    what = "small recall" if r["kind"] == "hostile" else "list of 20"
    lines = [f"{r['kind']}: {r['clients']} loading clients for {r['seconds']:g} s through pymem serve "
             f"(load average {r['load_average']})",
             f"  quiet tenant's {what}: p50 {r['idle_call_p50_ms']} ms idle, {r['loaded_call_p50_ms']} ms loaded "
             f"({r['call_ratio_p50']}x; goal at most 2x)",
             f"  /healthz: p99 {r['idle_healthz_p99_ms']} ms idle, p50 {r['loaded_healthz_p50_ms']} ms / "
             f"p99 {r['loaded_healthz_p99_ms']} ms loaded (goal p99 at most 100 ms)"]
    if r["kind"] == "hostile":
        d = r["decision"]
        lines.append(f"  64 KiB notes remembered: {r['notes_remembered']} ({r['tenant_busy']} refused 429 tenant_busy, "
                     f"{r['saturated']} 503 pool_saturated, {r['errors']} other errors); one 64 KiB note "
                     f"decided in {d['whitespace_free_ms']} ms whitespace-free, {d['prose_ms']} ms prose (goal 500 ms)")
    else:
        lines.append(f"  the loaded tenant: {r['batches']} batches of 2,000 written, {r['tenant_busy']} calls refused "
                     f"429 tenant_busy, {r['saturated']} refused 503 pool_saturated (no heavy-call slot within the "
                     f"pool wait), {r['errors']} other errors")
    return "\n".join(lines)
