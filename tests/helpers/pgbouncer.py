"""A real PgBouncer in transaction mode in front of the test server, for the tests named *pgbouncer*.

Debian's `pgbouncer` package (`apt-get install -y pgbouncer`); where it is absent the tests skip and
say so. It listens on a loopback TCP port and reaches the test server over the embedded server's
Unix socket, which trusts local logins, so PgBouncer itself authenticates nobody (auth_type trust,
the test logins listed in its auth file). PgBouncer refuses to run as root: run as root, it runs
as the user that owns the server's socket directory.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from psycopg.conninfo import conninfo_to_dict

from helpers.database import AGENT_LOGIN, APP_LOGIN, AUDITOR_LOGIN, PASSWORD

SKIP_REASON = ("pgbouncer is not installed (Debian: apt-get install -y pgbouncer); the transaction-pooler tests "
               "need a real one")


def binary() -> str | None:
    return shutil.which("pgbouncer") or next((p for p in ("/usr/sbin/pgbouncer", "/usr/bin/pgbouncer")
                                              if os.path.exists(p)), None)


def _version(exe: str) -> tuple[int, ...]:
    out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30).stdout.split()
    return tuple(int(p) for p in out[1].split(".")[:2]) if len(out) > 1 else (0,)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def pgbouncer(server_dsn: str, *, pool_size: int = 4) -> Iterator[tuple[str, int]]:
    """Start PgBouncer (pool_mode transaction) in front of the server of `server_dsn`, whose host
    must be a Unix socket directory; yields (host, port) to connect to; stops it."""
    exe = binary()
    params = conninfo_to_dict(server_dsn)
    socket_dir = params.get("host") or ""
    if not socket_dir.startswith("/"):
        raise RuntimeError("the PgBouncer fixture needs a server on a Unix socket (the embedded test server)")
    home = Path(tempfile.mkdtemp(prefix="pymem-pgbouncer-"))
    port = _free_port()
    users = ["postgres", APP_LOGIN, AGENT_LOGIN, AUDITOR_LOGIN, params.get("user") or "postgres"]
    (home / "users.txt").write_text("".join(f'"{u}" "{PASSWORD}"\n' for u in dict.fromkeys(users)))
    # 1.21+ can track protocol-level prepared statements itself; switched off, as in most
    # deployments and in every version before it (1.18 does not know the setting)
    prepared = "max_prepared_statements = 0\n" if _version(exe) >= (1, 21) else ""
    (home / "pgbouncer.ini").write_text(f"""[databases]
* = host={socket_dir} port={params.get('port') or 5432}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir =
auth_type = trust
auth_file = {home / 'users.txt'}
pool_mode = transaction
default_pool_size = {pool_size}
max_client_conn = 1000
max_db_connections = {pool_size * 2}
server_reset_query =
ignore_startup_parameters = extra_float_digits
{prepared}log_connections = 0
log_disconnections = 0
logfile = {home / 'pgbouncer.log'}
pidfile = {home / 'pgbouncer.pid'}
""")
    command = [exe, str(home / "pgbouncer.ini")]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        owner = pwd.getpwuid(os.stat(socket_dir).st_uid).pw_name
        for path in [home, *home.iterdir()]:
            shutil.chown(path, user=owner)
        command[1:1] = ["-u", owner]
    # its output goes to a file: a pipe nobody reads fills up and PgBouncer blocks writing its log
    output = open(home / "pgbouncer.out", "wb")  # noqa: SIM115 - PgBouncer writes to it until it stops
    process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    log = (home / "pgbouncer.log").read_text() if (home / "pgbouncer.log").exists() else ""
                    out = (home / "pgbouncer.out").read_text(errors="replace")
                    raise RuntimeError(f"pgbouncer did not start: {out}{log}") from None
                time.sleep(0.05)
        yield "127.0.0.1", port
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
        output.close()
        if os.environ.get("PYMEM_TEST_KEEP_PGBOUNCER_LOG"):
            shutil.copy(home / "pgbouncer.log", os.environ["PYMEM_TEST_KEEP_PGBOUNCER_LOG"])
        shutil.rmtree(home, ignore_errors=True)


def through(dsn: str, host: str, port: int) -> str:
    """`dsn` (a URL) pointed at PgBouncer: same login, password and database."""
    parts = urlsplit(dsn)
    auth = parts.netloc.rsplit("@", 1)[0]
    query = "&".join(q for q in parts.query.split("&") if q and not q.startswith("host="))
    return urlunsplit((parts.scheme, f"{auth}@{host}:{port}", parts.path, query, ""))
