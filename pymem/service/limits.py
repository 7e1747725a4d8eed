"""What the service allows one call and one tenant: concurrent calls per tenant, and the timeouts
its transactions run under.

A service shares one connection pool among every tenant. Without a bound per tenant, one tenant
sending many slow calls at once (large batches, calls blocked behind a lock it holds) takes every
connection and every other tenant waits. `TenantLimits` lets each tenant run at most `per_tenant`
calls at a time; a call beyond that is refused at once with TenantBusy (429 `tenant_busy`, with a
Retry-After), before its body is read or a connection is taken, so the surplus costs the others
nothing. The limit is per service process.

A per-tenant bound counts calls, not the work in them: a tenant at its limit with calls that each
write 2,000 rows (an index insert and a chained ledger entry per row) or hold a 64 KiB note (the
content check, the embedding) keeps as many database backends or workers busy at full CPU, and on
a small machine that is every core, so another tenant's one-row read waits on the scheduler.
`HeavyLane` bounds the CPU that such calls take together: a call is heavy when its arguments hold
at least HEAVY_CHARS characters of text or HEAVY_RECORDS records (`is_heavy`), and at most
`slots` heavy calls run at once in the process (default half the cores, at least one), the
next slot going to a waiter of the tenant that runs the fewest and was served longest ago. Light calls, the common
case, never wait for it. A heavy call that finds no slot within the pool wait is refused with
PoolExhausted (503 `pool_saturated`, Retry-After), nothing done.

`SERVICE_TIMEOUTS` are the lock and statement timeouts a service applies to the transactions of
its calls unless PYMEM_LOCK_TIMEOUT_MS / PYMEM_STATEMENT_TIMEOUT_MS (or `pymem serve` options) say
otherwise: a call that waits on a row lock (a tenant's chain head held by an open transaction) or
runs a runaway statement fails with LockTimeout or StatementTimeout instead of holding a pooled
connection for as long as the other transaction lasts.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..config import Settings
from ..errors import InvalidArguments, PoolExhausted, TenantBusy

__all__ = ["TenantLimits", "HeavyLane", "is_heavy", "default_per_tenant", "default_heavy_calls", "service_settings",
           "SERVICE_LOCK_TIMEOUT_MS", "SERVICE_STATEMENT_TIMEOUT_MS", "TENANT_RETRY_AFTER", "HEAVY_CHARS",
           "HEAVY_RECORDS"]

#: Defaults a service applies when the settings leave a timeout unset.
SERVICE_LOCK_TIMEOUT_MS = 5_000
SERVICE_STATEMENT_TIMEOUT_MS = 30_000
#: Seconds a refused tenant is told to wait (Retry-After): about one call's time.
TENANT_RETRY_AFTER = 1.0


#: A call whose arguments hold this many characters of text, or a list of this many records, is heavy.
HEAVY_CHARS = 8192
HEAVY_RECORDS = 100


def default_heavy_calls(cpus: int | None = None) -> int:
    """Half the cores (of this machine: where the embedded server runs too), at least one."""
    return max(1, (cpus if cpus is not None else os.cpu_count() or 2) // 2)


def is_heavy(args: Any) -> bool:
    """Whether a call's arguments hold HEAVY_CHARS of text or a list of HEAVY_RECORDS records.

    Walks the arguments once and stops as soon as it knows; a list of numbers (a vector) counts
    neither as text nor as records."""
    chars = 0
    stack = [args]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            chars += len(item)
            if chars >= HEAVY_CHARS:
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            if len(item) >= HEAVY_RECORDS and isinstance(item[0], dict):
                return True
            if item and not isinstance(item[0], (int, float)):
                stack.extend(item)
    return False


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


class HeavyLane:
    """At most `slots` heavy calls at a time in the process, handed out fairly among tenants;
    None: no bound. A waiter gives up after `wait` seconds with PoolExhausted. Thread-safe."""

    def __init__(self, slots: int | None, wait: float):
        if slots is not None and (isinstance(slots, bool) or not isinstance(slots, int) or slots < 1):
            raise InvalidArguments("the heavy calls allowed at once must be a positive integer (or None: no limit)")
        self.slots = slots
        self.wait = wait
        self._running: dict[str, int] = {}
        self._waiting: list[tuple[int, str]] = []  # (ticket, tenant), in arrival order
        self._tickets = itertools.count()
        self._served: dict[str, int] = {}  # tenant -> when it was last given a slot
        self._grants = itertools.count()
        self._cond = threading.Condition()

    def running(self) -> int:
        with self._cond:
            return sum(self._running.values())

    def _next(self) -> int | None:
        """The ticket that the next free slot goes to: a waiter of the tenant running the fewest
        heavy calls, of those the tenant served longest ago (never: first), then the earliest."""
        if not self._waiting:
            return None
        return min(self._waiting, key=lambda w: (self._running.get(w[1], 0), self._served.get(w[1], -1), w[0]))[0]

    def _serve(self, tenant: str) -> None:
        self._running[tenant] = self._running.get(tenant, 0) + 1
        self._served[tenant] = next(self._grants)
        if len(self._served) > 4096:  # forget tenants that neither run nor wait
            active = set(self._running) | {t for _, t in self._waiting}
            self._served = {t: g for t, g in self._served.items() if t in active}

    @contextmanager
    def slot(self, tenant: str, heavy: bool) -> Iterator[None]:
        """Run one call: at once when light (or no bound), else once a slot is free."""
        if self.slots is None or not heavy:
            yield
            return
        with self._cond:
            ticket = next(self._tickets)
            self._waiting.append((ticket, tenant))
            deadline = time.monotonic() + self.wait
            try:
                while sum(self._running.values()) >= self.slots or self._next() != ticket:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise PoolExhausted(
                            f"the service already runs {self.slots} large call(s) (many records or long texts), "
                            f"the most it runs at once, and none finished within {self.wait:g} s; nothing was done",
                            retry_after=max(1.0, self.wait))
                    self._cond.wait(left)
            finally:
                self._waiting = [w for w in self._waiting if w[0] != ticket]
                self._cond.notify_all()
            self._serve(tenant)
        try:
            yield
        finally:
            with self._cond:
                left_running = self._running[tenant] - 1
                if left_running:
                    self._running[tenant] = left_running
                else:
                    del self._running[tenant]
                self._cond.notify_all()
