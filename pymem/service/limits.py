"""What the service allows one call and one tenant: concurrent calls per tenant, and the timeouts
its transactions run under.

A service shares one connection pool among every tenant. Without a bound per tenant, one tenant
sending many slow calls at once (large batches, calls blocked behind a lock it holds) takes every
connection and every other tenant waits. `TenantLimits` lets each tenant run at most `per_tenant`
calls at a time; a call beyond that is refused at once with TenantBusy (429 `tenant_busy`, with a
Retry-After), before its body is read or a connection is taken, so the surplus costs the others
nothing. The limit is per service process.

`SERVICE_TIMEOUTS` are the lock and statement timeouts a service applies to the transactions of
its calls unless PYMEM_LOCK_TIMEOUT_MS / PYMEM_STATEMENT_TIMEOUT_MS (or `pymem serve` options) say
otherwise: a call that waits on a row lock (a tenant's chain head held by an open transaction) or
runs a runaway statement fails with LockTimeout or StatementTimeout instead of holding a pooled
connection for as long as the other transaction lasts.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from ..config import Settings
from ..errors import InvalidArguments, TenantBusy

__all__ = ["TenantLimits", "default_per_tenant", "service_settings", "SERVICE_LOCK_TIMEOUT_MS",
           "SERVICE_STATEMENT_TIMEOUT_MS", "TENANT_RETRY_AFTER"]

#: Defaults a service applies when the settings leave a timeout unset.
SERVICE_LOCK_TIMEOUT_MS = 5_000
SERVICE_STATEMENT_TIMEOUT_MS = 30_000
#: Seconds a refused tenant is told to wait (Retry-After): about one call's time.
TENANT_RETRY_AFTER = 1.0


def default_per_tenant(pool_size: int) -> int:
    """A quarter of the pool, at least one: one tenant alone never holds more than that."""
    return max(1, pool_size // 4)


def service_settings(settings: Settings) -> Settings:
    """`settings` with the service's timeouts where they are unset."""
    return dataclasses.replace(
        settings,
        lock_timeout_ms=settings.lock_timeout_ms if settings.lock_timeout_ms is not None else SERVICE_LOCK_TIMEOUT_MS,
        statement_timeout_ms=(settings.statement_timeout_ms if settings.statement_timeout_ms is not None
                              else SERVICE_STATEMENT_TIMEOUT_MS))


class TenantLimits:
    """At most `per_tenant` calls of one tenant at a time; None: no limit. Thread-safe."""

    def __init__(self, per_tenant: int | None):
        if per_tenant is not None and (isinstance(per_tenant, bool) or not isinstance(per_tenant, int)
                                       or per_tenant < 1):
            raise InvalidArguments("the calls allowed per tenant must be a positive integer (or None: no limit)")
        self.per_tenant = per_tenant
        self._running: dict[str, int] = {}
        self._lock = threading.Lock()

    def running(self, tenant: str) -> int:
        with self._lock:
            return self._running.get(tenant, 0)

    def check(self, tenant: str) -> None:
        """Refuse now if `tenant` is at its limit (a cheap early look; `slot` decides)."""
        if self.per_tenant is not None and self.running(tenant) >= self.per_tenant:
            raise self._busy(tenant)

    @contextmanager
    def slot(self, tenant: str) -> Iterator[None]:
        """Run one call of `tenant`, or raise TenantBusy at once when it already runs its limit."""
        if self.per_tenant is None:
            yield
            return
        with self._lock:
            running = self._running.get(tenant, 0)
            if running >= self.per_tenant:
                raise self._busy(tenant)
            self._running[tenant] = running + 1
        try:
            yield
        finally:
            with self._lock:
                left = self._running[tenant] - 1
                if left:
                    self._running[tenant] = left
                else:
                    del self._running[tenant]

    def _busy(self, tenant: str) -> TenantBusy:
        return TenantBusy(f"tenant {tenant[:100]!r} already runs {self.per_tenant} concurrent call(s), the most this "
                          "service allows one tenant; nothing was done", retry_after=TENANT_RETRY_AFTER)
