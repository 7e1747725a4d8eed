"""Races: overlapping multi-row batches from 8 processes (no deadlock reaches a caller, no update is
lost), a delivery racing a delete (the delivery goes on without the deleted memory), and the
embedded postmaster killed under load (the service restarts it by itself)."""

from __future__ import annotations

import multiprocessing
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
from helpers.database import DIM
from helpers.service import KEY, request, token

from pymem import Context, admit, deliver, start_session
from pymem.client import Client
from pymem.delivery import injections

IDS = [f"shared-{i:02d}" for i in range(24)]


def _vec(rng: random.Random) -> list[float]:
    return [rng.gauss(0, 1) for _ in range(DIM)]


def _batches(worker: int, app_dsn: str, admin_dsn: str, rounds: int, out) -> None:
    """One process: `rounds` upserts of 4 to 12 shared ids in a random order; reports what was acknowledged."""
    from pymem.config import Settings
    from pymem.storage.endpoints import Endpoints
    from pymem.storage.store import Store

    settings = Settings(dsn=app_dsn, admin_dsn=admin_dsn, embedding_dim=DIM, lock_timeout_ms=60_000)
    rng = random.Random(worker)
    acked: dict[str, int] = {}
    errors: list[str] = []
    with Store(Endpoints(app=app_dsn, admin=admin_dsn), settings, pool_size=2) as store:
        mem = store.bind(Context(tenant="race", actor=f"w{worker}"))
        for i in range(rounds):
            ids = rng.sample(IDS, rng.randint(4, 12))
            batch = [{"id": x, "content": f"w{worker} round {i}", "embedding": _vec(rng)} for x in ids]
            try:
                mem.upsert_many(batch, idempotency_key=f"w{worker}-{i}")
            except Exception as exc:  # noqa: BLE001 - every failure is reported to the parent
                errors.append(f"{type(exc).__name__}: {exc}")
                continue
            for x in ids:
                acked[x] = acked.get(x, 0) + 1
    out.put((worker, acked, errors))


@pytest.mark.slow
def test_overlapping_batches_from_eight_processes_neither_deadlock_nor_lose_an_update(database, store):
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_batches, args=(w, database.app_dsn, database.admin_dsn, 40, out)) for w in range(8)]
    for p in procs:
        p.start()
    results = [out.get(timeout=600) for _ in procs]
    for p in procs:
        p.join(60)
    errors = [e for _, _, errs in results for e in errs]
    assert errors == [], errors[:5]  # no deadlock (nor anything else) reached a caller
    writes: dict[str, int] = {}
    for _, acked, _ in results:
        for x, n in acked.items():
            writes[x] = writes.get(x, 0) + n
    rows = {r["id"]: r for r in store.bind(Context(tenant="race")).get_many(IDS)}
    # every acknowledged write of an id is one revision of it: none was lost or applied twice
    assert {x: rows[x]["revision"] for x in writes} == writes
    with database.admin() as conn:
        assert conn.execute("select min(problem) from pymem.verify_chain('race')").fetchone()[0] is None


def test_a_delivery_racing_a_delete_goes_on_without_the_deleted_memory(store, monkeypatch):
    mem = store.bind(Context(tenant="acme", actor="alice"))
    start_session(mem, "s1", "cli")
    for i in range(3):
        admit(mem, {"id": f"m{i}", "content": f"the invoice currency for project {i} is euro"},
              {"origin": "user_asserted"})
    real = injections.record_injection
    deleted: list[str] = []

    def delete_first(conn, **kwargs):
        if not deleted:  # another call deletes a ranked memory just before this one records the block
            victim = kwargs["memory_ids"][0]
            store.bind(Context(tenant="acme")).delete_many([victim])
            deleted.append(victim)
        return real(conn, **kwargs)

    monkeypatch.setattr(injections, "record_injection", delete_first)
    delivery = deliver(mem, "s1", "which invoice currency is used")
    assert deleted and delivery.injection_seq is not None
    assert deleted[0] not in {item.id for item in delivery.items}
    recorded = injections.session_injections(mem, "s1")[-1]
    assert deleted[0] not in recorded.memory_ids and len(recorded.memory_ids) == len(delivery.items)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_a_killed_embedded_postmaster_is_restarted_by_the_service(tmp_path):
    # Its own embedded server, in a folder whose parents are world-readable (as the server requires)
    home = Path(tempfile.mkdtemp(prefix="pymem-restart-"))
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYMEM_")}
    env.update({"PYMEM_HOME": str(home), "PYMEM_EMBEDDING_DIM": str(DIM), "PYMEM_JWT_KEY": KEY})
    log = (tmp_path / "serve.log").open("w")
    server = subprocess.Popen([sys.executable, "-m", "pymem.cli", "serve", "--port", str(port)], env=env, stdout=log,
                              stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    acked: list[str] = []
    stop = threading.Event()
    try:
        deadline = time.monotonic() + 180  # a first start creates and migrates the embedded server
        while True:
            try:
                if request(url, "GET", "/readyz")[0] == 200:
                    break
            except OSError:
                pass
            assert server.poll() is None and time.monotonic() < deadline, (tmp_path / "serve.log").read_text()
            time.sleep(0.2)

        def writer() -> None:
            rng = random.Random(1)
            with Client(url, token(tenant="kill")) as client:
                i = 0
                while not stop.is_set():
                    i += 1
                    try:
                        client.upsert_many([{"id": f"k{i}", "content": "n", "embedding": _vec(rng)}],
                                           idempotency_key=f"k{i}")
                        acked.append(f"k{i}")
                    except Exception:  # noqa: BLE001 - failures while the server is down are expected
                        time.sleep(0.05)

        t = threading.Thread(target=writer)
        t.start()
        time.sleep(2)
        pid = int((home / "pgdata" / "postmaster.pid").read_text().split("\n", 1)[0])
        os.kill(pid, signal.SIGKILL)
        killed = time.monotonic()
        time.sleep(0.5)
        while request(url, "GET", "/readyz")[0] != 200:
            assert time.monotonic() - killed < 30, "the service did not bring the database back within 30 s"
            time.sleep(0.2)
        back = len(acked)
        deadline = time.monotonic() + 30
        while len(acked) < back + 5:
            assert time.monotonic() < deadline, "calls do not succeed after the restart"
            time.sleep(0.1)
        stop.set()
        t.join(60)
        with Client(url, token(tenant="kill")) as client:
            found = {r["id"] for r in client.get_many(acked)}
        assert set(acked) <= found, "an acknowledged write is missing"
    finally:
        stop.set()
        server.send_signal(signal.SIGINT)
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()
    verify = subprocess.run([sys.executable, "-m", "pymem.cli", "verify"], env=env, capture_output=True, text=True,
                            timeout=300)
    subprocess.run([sys.executable, "-m", "pymem.cli", "db", "stop"], env=env, capture_output=True, timeout=120)
    shutil.rmtree(home, ignore_errors=True)
    assert verify.returncode == 0, verify.stdout + verify.stderr
