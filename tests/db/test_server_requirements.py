"""A real server that pymem cannot use gets a one-line error and exit 2, never a traceback:
PostgreSQL older than 16, pgvector missing or older than 0.8.3, the app login running
`pymem db upgrade`. The old server is Debian's PostgreSQL 15, started in a temporary directory
(skipped, with the reason, where its binaries are absent)."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from pymem.migrate import preflight_problems

PG15 = Path("/usr/lib/postgresql/15/bin")
REPO = Path(__file__).resolve().parents[2]


def _cli(*args: str, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PYMEM_")}
    return subprocess.run([sys.executable, "-m", "pymem.cli", *args], cwd=REPO, env={**clean, **env},
                          capture_output=True, text=True, timeout=300)


def _one_line_exit_2(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    return lines[0]


def test_the_app_login_running_db_upgrade_gets_one_line_and_exit_2(database):
    line = _one_line_exit_2(_cli("db", "upgrade", PYMEM_DSN=database.app_dsn, PYMEM_ADMIN_DSN=database.app_dsn))
    assert "does not own the pymem schema" in line and "PYMEM_ADMIN_DSN" in line


@pytest.fixture(scope="module")
def postgres15():
    """A throw-away PostgreSQL 15 (no pgvector) on a Unix socket; yields its superuser DSN."""
    if not (PG15 / "initdb").exists():
        pytest.skip(f"PostgreSQL 15 server binaries are not installed ({PG15}); Debian: postgresql-15")
    home = Path(tempfile.mkdtemp(prefix="pymem-pg15-"))
    run_as: list[str] = []
    if os.geteuid() == 0:  # initdb refuses root: run the server as the postgres system user
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("running as root and there is no postgres user to run PostgreSQL 15 as")
        shutil.chown(home, user="postgres")
        run_as = ["runuser", "-u", "postgres", "--"]
    data = home / "data"
    subprocess.run([*run_as, str(PG15 / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust"],
                   check=True, capture_output=True, timeout=300)
    subprocess.run([*run_as, str(PG15 / "pg_ctl"), "-D", str(data), "-w", "-t", "120", "-l", str(home / "log"),
                    "-o", f"-k {home} -c listen_addresses=''", "start"], check=True, capture_output=True, timeout=300)
    try:
        yield f"postgresql://postgres@/postgres?host={home}"
    finally:
        subprocess.run([*run_as, str(PG15 / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
                       capture_output=True, timeout=120)
        time.sleep(0.1)
        shutil.rmtree(home, ignore_errors=True)


def test_postgres_15_without_pgvector_gets_one_line_and_exit_2(postgres15):
    line = _one_line_exit_2(_cli("db", "upgrade", PYMEM_DSN=postgres15, PYMEM_ADMIN_DSN=postgres15))
    assert "PostgreSQL 15" in line and "needs PostgreSQL 16 or later" in line
    assert "pgvector is not installed" in line


def test_opening_a_store_on_postgres_15_is_one_line_too(postgres15):
    line = _one_line_exit_2(_cli("get", "m-1", "--tenant", "acme", PYMEM_DSN=postgres15))
    assert "pymem db upgrade" in line or "pymem_app" in line


FACTS = dict(server_version="17.2", server_version_num=170002, vector_installed=None, vector_available="0.8.5",
             login="owner", superuser=False, schema_owner=None, owns_schema=False, can_create=True)


@pytest.mark.parametrize("change,expected", [
    ({}, []),
    ({"vector_available": None}, ["pgvector is not installed"]),
    ({"vector_available": "0.7.4"}, ["pgvector 0.7.4 is too old"]),
    ({"vector_installed": "0.8.0", "vector_available": "0.8.5"}, ["pgvector 0.8.0 is too old"]),
    ({"server_version": "15.8", "server_version_num": 150008}, ["PostgreSQL 15.8 is too old"]),
    ({"schema_owner": "pymem_owner"}, ["does not own the pymem schema"]),
    ({"can_create": False}, ["may not create the pymem schema"]),
    ({"schema_owner": "pymem_owner", "superuser": True}, []),
])
def test_what_stops_a_migration(change, expected):
    problems = preflight_problems({**FACTS, **change})
    assert len(problems) == len(expected) and all(e in p for e, p in zip(expected, problems, strict=False)), problems
