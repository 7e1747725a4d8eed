"""`pymem inspect --web`: the inspector alone on the store the environment names, in a process of
its own, with the tokens it prints to sign in with (a key made for the run when none is set)."""

from __future__ import annotations

import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading

import pytest
from helpers.cli import CLEARED, cli_runner
from helpers.inspector import CURRENCY, seed
from helpers.service import request

pytestmark = pytest.mark.slow  # it starts a process


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_inspect_web_serves_the_pages_with_the_tokens_it_prints(database, tmp_path):
    seeded = seed(database)
    env = {k: v for k, v in os.environ.items() if k not in CLEARED and not k.startswith("PYMEM_")}
    env.update(PYMEM_DSN=database.app_dsn, PYMEM_ADMIN_DSN=database.admin_dsn, PYMEM_HOME=str(tmp_path / "home"),
               PYMEM_EMBEDDER="lexical-hash-v1")
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "pymem.cli", "inspect", "--web", "--tenant", "acme", "--actor",
                             "alice", "--port", str(port)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout], daemon=True).start()
    try:
        said: dict[str, str] = {}
        while "auditor" not in said:
            line = lines.get(timeout=120)
            m = re.match(r"(operator|auditor) token for acme: (\S+)", line)
            if m:
                said[m.group(1)] = m.group(2)
        url = f"http://127.0.0.1:{port}"
        for _ in range(600):  # the tokens are printed just before the server listens
            try:
                status, _, body = request(url, "GET", "/inspector/memories", token=said["operator"])
                break
            except OSError:
                threading.Event().wait(0.05)
        assert status == 200 and seeded.currency in body.decode() and CURRENCY[:30] in body.decode()
        status, _, body = request(url, "GET", f"/inspector/memories/{seeded.currency}", token=said["auditor"])
        assert status == 200 and "memory.insert" in body.decode() and CURRENCY[:30] not in body.decode()
        assert request(url, "GET", "/inspector/memories", token=said["auditor"])[0] == 403
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def test_inspect_web_needs_a_tenant_and_an_actor_and_takes_no_subcommand(database, monkeypatch):
    run = cli_runner(database, monkeypatch)
    assert run("inspect", "--web", PYMEM_TENANT="").exit_code == 2
    assert run("inspect", "--web", "memories").exit_code == 2
    shown = run("inspect")
    assert shown.exit_code == 0 and "--web" in shown.output
