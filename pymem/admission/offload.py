"""Running the content check of large notes in worker processes, so it never holds the service's
interpreter.

The content check (pymem.admission.judge.check_content: the signatures and the classifier) is
pure Python and regular expressions; one regular-expression search holds the interpreter lock for
as long as it runs, which on a 64 KiB note is long enough to delay every other thread of the
process: the event loop answering /healthz, another tenant's call. A long-running service
installs a small pool of worker processes (`install`, at a lower scheduling priority than the
service itself); from then on the check of a note holding at least OFFLOAD_CHARS characters of
text runs in a worker while the calling thread waits without the lock. Smaller notes, the common
case, are checked where they are (a worker's round trip would cost more than the check). The
result is the same Finding the check returns in-process: the workers run the same function.
Without `install` (the library, the CLI) everything runs in-process.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import multiprocessing
import os
import threading
from collections.abc import Mapping
from typing import Any

from . import judge
from .judge import Finding
from .pieces import MAX_DEPTH
from .policy import AdmissionPolicy, OriginRule
from .provenance import Origin, Provenance

__all__ = ["install", "shutdown", "installed", "OFFLOAD_CHARS"]

#: Notes with at least this much text are checked in a worker process once a pool is installed.
OFFLOAD_CHARS = 8192
#: How much lower than the service the workers are scheduled (os.nice).
WORKER_NICENESS = 5

_lock = threading.Lock()
_pool: concurrent.futures.ProcessPoolExecutor | None = None


def _start_worker() -> None:
    with contextlib.suppress(AttributeError, OSError):
        os.nice(WORKER_NICENESS)
    from .model import default_model

    default_model()  # loaded once per worker, before the first note


def _text_size(value: Any, depth: int = 0) -> int:
    if depth > MAX_DEPTH:
        return OFFLOAD_CHARS  # the check refuses it; let a worker find out
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict):
        return sum(_text_size(k, depth + 1) + _text_size(v, depth + 1) for k, v in value.items())
    if isinstance(value, (list, tuple, set, frozenset)):
        return sum(_text_size(v, depth + 1) for v in value)
    return 0


def _check(record: Mapping[str, Any], provenance: Provenance, rules: dict[Origin, OriginRule],
           threshold: float | None, band: float | None = None, hold: bool = True) -> Finding | None:
    """In a worker: the content check itself, under the caller's policy rebuilt from its parts."""
    return judge.check_content(record, provenance, AdmissionPolicy(rules=rules, classifier_threshold=threshold,
                                                                   quarantine_threshold=band, quarantine=hold))


def _offloaded(record: Mapping[str, Any], provenance: Provenance, policy: AdmissionPolicy) -> Finding | None:
    """judge.content_check while a pool is installed: large notes go to a worker."""
    pool = _pool
    if pool is not None and _text_size(record) >= OFFLOAD_CHARS:
        try:
            future = pool.submit(_check, record, provenance, dict(policy.rules), policy.classifier_threshold,
                                 policy.quarantine_threshold, policy.quarantine)
        except RuntimeError:  # shut down meanwhile: check here
            pass
        else:
            found: Finding | None = future.result()
            return found
    return judge.check_content(record, provenance, policy)


def install(workers: int = 2) -> None:
    """Start the worker processes (idempotent) and route large notes' checks to them."""
    global _pool
    with _lock:
        if _pool is None:
            ctx = multiprocessing.get_context("spawn")
            _pool = concurrent.futures.ProcessPoolExecutor(max_workers=workers, mp_context=ctx,
                                                           initializer=_start_worker)
            judge.content_check = _offloaded


def installed() -> bool:
    return _pool is not None


def shutdown() -> None:
    """Stop the workers; checks run in-process again."""
    global _pool
    with _lock:
        pool, _pool = _pool, None
        judge.content_check = judge.check_content
    if pool is not None:
        pool.shutdown(wait=True, cancel_futures=True)
