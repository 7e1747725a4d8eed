"""What /readyz answers: the database's health, probed in the background, reported at once.

A readiness probe must answer within a second whatever the database is doing (down, restarting,
every pooled connection busy): it reports, it does not wait. `Readiness` probes the database on a
connection of its own (never the pool's), once per `interval`, each probe bounded by
`probe_timeout`, and keeps the last report; `report()` returns it without touching the database.
A report older than a few intervals (the probe itself is stuck) is not ready.

When pymem owns the server (the embedded Postgres, no PYMEM_DSN), a failed probe also looks at
the server process: when it died (killed, crashed), the probe starts it again (pymem.embedded
.restart) and drops the pool's dead connections, so the service comes back with no operator.
With PYMEM_DSN the server is the platform's to restart; once it answers again, the probe drops
the dead connections the pool still holds and the service reconnects by itself.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from typing import Any

import psycopg

from .. import db, embedded, queries
from ..errors import ServerError
from ..storage import status
from ..storage.store import Store

__all__ = ["Readiness", "PROBE_INTERVAL", "PROBE_TIMEOUT"]

log = logging.getLogger(__name__)

#: Seconds between probes, and the longest one probe may take (connecting, then each statement).
PROBE_INTERVAL = 1.0
PROBE_TIMEOUT = 2.0


class Readiness:
    """The last probe of `store`'s database, kept current by a daemon thread (start/stop)."""

    def __init__(self, store: Store, *, interval: float = PROBE_INTERVAL, probe_timeout: float = PROBE_TIMEOUT):
        self.store = store
        self.interval = interval
        self.probe_timeout = probe_timeout
        self._home = store.endpoints.embedded.home if store.endpoints.embedded is not None else None
        self._conn: psycopg.Connection | None = None
        self._report: dict[str, Any] = {"ok": False, "reason": "starting"}
        self._at = 0.0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._down_since: float | None = None
        self.restarts = 0

    # -- what /readyz reads ---------------------------------------------------------------------

    def report(self) -> tuple[bool, dict[str, Any]]:
        """(ready, the last report with its age), at once."""
        with self._lock:
            report, at = dict(self._report), self._at
        age = time.monotonic() - at if at else None
        stale = age is None or age > 3 * self.interval + self.probe_timeout
        if stale and at:
            report = {**report, "ok": False, "reason": "the readiness probe has not answered lately"}
        report["checked_seconds_ago"] = None if age is None else round(age, 2)
        return bool(report.get("ok")) and not stale, report

    # -- the probe ------------------------------------------------------------------------------

    def start(self) -> None:
        self.probe()
        self._thread = threading.Thread(target=self._run, name="pymem-readiness", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.interval + 2 * self.probe_timeout + 5)
        self._close()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.probe()
            except Exception:
                log.exception("the readiness probe failed unexpectedly")

    def probe(self) -> dict[str, Any]:
        """Probe once: the report is stored (and returned); a dead embedded server is restarted."""
        report = self._ask()
        reachable = report["database"].get("reachable", False)
        if not reachable:
            if self._down_since is None:
                self._down_since = time.monotonic()
                log.warning("the database is unreachable (%s)", report["database"].get("error"))
            if self._home is not None and not self._stop.is_set() and not embedded.running(self._home):
                report = self._restart() or report
        elif self._down_since is not None:
            log.warning("the database answers again after %.1f s", time.monotonic() - self._down_since)
            self._down_since = None
            self._drop_dead_connections()
        with self._lock:
            self._report, self._at = report, time.monotonic()
        return report

    def _ask(self) -> dict[str, Any]:
        try:
            if self._conn is None or self._conn.closed:
                self._conn = db.connect(self.store.endpoints.app, autocommit=False, connect_timeout=self.probe_timeout)
                timeout = f"{int(self.probe_timeout * 1000)}ms"
                self._conn.execute(queries.query("set_session_timeouts"), (timeout, timeout))
                self._conn.commit()
            return status.health_on(self._conn, self.store.embedding_dim)
        except Exception as exc:  # noqa: BLE001 - a probe reports, it does not raise
            self._close()
            return status.unreachable(self.store.embedding_dim, exc)

    def _restart(self) -> dict[str, Any] | None:
        if self._home is None:  # not an embedded store: nothing to start
            return None
        log.warning("the embedded Postgres in %s is not running: starting it again", self._home)
        try:
            embedded.restart(self._home)
        except ServerError as exc:
            log.error("%s", exc)
            return None
        self.restarts += 1
        self._drop_dead_connections()
        report = self._ask()
        if report["database"].get("reachable"):
            self._down_since = None
        return report

    def _drop_dead_connections(self) -> None:
        """The pool's idle connections predate the outage: check them (dead ones are replaced)."""
        try:
            self.store.pool.check()
        except Exception:
            log.warning("checking the pool's connections failed", exc_info=True)
        self.store.statements.discard_idle()

    def _close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):  # closing a broken connection may raise anything
                conn.close()
