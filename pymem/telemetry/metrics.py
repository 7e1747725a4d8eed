"""A process-wide registry of counters and histograms, rendered in the Prometheus text format.

Small on purpose (no client library): the families are declared here, once, with their labels, so
a label can only ever take the bounded values the code passes (a verb of the table, a decision, an
HTTP status), never a tenant id, an actor or anything a caller wrote. Counting is a dict update
under a lock; the registry counts whether or not anything scrapes it.
"""

from __future__ import annotations

import bisect
import math
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

__all__ = ["Family", "Registry", "REGISTRY", "count", "observe", "exposition", "Sample", "LATENCY_BUCKETS"]

#: Seconds: from a cached read to a long write batch.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

#: A gauge's sample given at scrape time: (name, labels, value).
Sample = tuple[str, Mapping[str, str], float]


@dataclass
class Family:
    """One metric: its name, type (counter or histogram), help text and label names."""

    name: str
    kind: str
    help: str
    labels: tuple[str, ...] = ()
    buckets: tuple[float, ...] = ()
    values: dict[tuple[str, ...], list[float]] = field(default_factory=dict)

    def key(self, labels: Mapping[str, object]) -> tuple[str, ...]:
        if set(labels) != set(self.labels):
            raise ValueError(f"{self.name} takes the labels {', '.join(self.labels) or 'none'}, got {sorted(labels)}")
        return tuple(str(labels[name]) for name in self.labels)


FAMILIES = (
    Family("pymem_requests_total", "counter",
           "HTTP requests answered, by route, verb (for /v1/call; empty otherwise), status and error code "
           "(ok on success).", ("route", "verb", "status", "code")),
    Family("pymem_request_duration_seconds", "histogram",
           "Time from a request's arrival to its last byte, by route and verb.", ("route", "verb"), LATENCY_BUCKETS),
    Family("pymem_admissions_total", "counter",
           "Write-gate decisions: admit, quarantine or refuse.", ("decision",)),
    Family("pymem_deliveries_total", "counter",
           "Turns delivered: recorded (a block and its injection record) or incognito (an empty block, nothing "
           "recorded).", ("outcome",)),
    Family("pymem_verify_runs_total", "counter",
           "Chain verifications run in this process, by mode (full, since_checkpoint), verifier (database, "
           "independent) and result (clean, tampered).", ("mode", "verifier", "result")),
)


def _number(value: float) -> str:
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value)) if value != int(value) else str(int(value))


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(pairs: Iterable[tuple[str, str]]) -> str:
    inner = ",".join(f'{k}="{_escape(v)}"' for k, v in pairs)
    return "{" + inner + "}" if inner else ""


class Registry:
    """The families and their values; thread-safe."""

    def __init__(self, families: Iterable[Family] = FAMILIES):
        self._lock = threading.Lock()
        self.families = {f.name: Family(f.name, f.kind, f.help, f.labels, f.buckets) for f in families}

    def count(self, name: str, value: float = 1.0, **labels: object) -> None:
        family = self.families[name]
        key = family.key(labels)
        with self._lock:
            slot = family.values.setdefault(key, [0.0])
            slot[0] += value

    def observe(self, name: str, value: float, **labels: object) -> None:
        """One observation of a histogram: its bucket counts, sum and count."""
        family = self.families[name]
        key = family.key(labels)
        index = bisect.bisect_left(family.buckets, value)
        with self._lock:
            slot = family.values.setdefault(key, [0.0] * (len(family.buckets) + 2))
            slot[index] += 1  # counts per bucket, cumulated when rendered; the last one is +Inf
            slot[-1] += value

    def value(self, name: str, **labels: object) -> float:
        """A counter's value (a histogram's count) for these labels; 0 when never counted."""
        family = self.families[name]
        with self._lock:
            slot = family.values.get(family.key(labels))
        if slot is None:
            return 0.0
        return slot[0] if family.kind == "counter" else sum(slot[:-1])

    def exposition(self, gauges: Iterable[tuple[str, str, Iterable[Sample]]] = ()) -> str:
        """The Prometheus text format (version 0.0.4) of every family, then of `gauges`: (name,
        help, samples) read by the caller at scrape time."""
        lines: list[str] = []
        with self._lock:
            snapshot = {name: (f, {k: list(v) for k, v in f.values.items()}) for name, f in self.families.items()}
        for family, values in snapshot.values():
            lines += [f"# HELP {family.name} {family.help}", f"# TYPE {family.name} {family.kind}"]
            if family.kind == "counter":
                if not family.labels and not values:
                    lines.append(f"{family.name} 0")
                for key, slot in sorted(values.items()):
                    lines.append(f"{family.name}{_labels(zip(family.labels, key, strict=True))} {_number(slot[0])}")
                continue
            for key, slot in sorted(values.items()):
                pairs = list(zip(family.labels, key, strict=True))
                cumulative = 0.0
                for bound, n in zip([*family.buckets, math.inf], slot[:-1], strict=True):
                    cumulative += n
                    le = "+Inf" if math.isinf(bound) else repr(float(bound))  # as Prometheus's clients print it
                    lines.append(f"{family.name}_bucket{_labels([*pairs, ('le', le)])} "
                                 f"{_number(cumulative)}")
                lines.append(f"{family.name}_sum{_labels(pairs)} {_number(slot[-1])}")
                lines.append(f"{family.name}_count{_labels(pairs)} {_number(cumulative)}")
        for name, help_text, samples in gauges:
            lines += [f"# HELP {name} {help_text}", f"# TYPE {name} gauge"]
            for sample_name, labels, value in samples:
                lines.append(f"{sample_name}{_labels(sorted(labels.items()))} {_number(value)}")
        return "\n".join(lines) + "\n"


#: The process's registry: what the library counts into and `pymem serve` exposes.
REGISTRY = Registry()


def count(name: str, value: float = 1.0, **labels: object) -> None:
    """Add to a counter of the process's registry."""
    REGISTRY.count(name, value, **labels)


def observe(name: str, value: float, **labels: object) -> None:
    """Observe a value of a histogram of the process's registry."""
    REGISTRY.observe(name, value, **labels)


def exposition(gauges: Iterable[tuple[str, str, Iterable[Sample]]] = ()) -> str:
    """The process's registry in the Prometheus text format."""
    return REGISTRY.exposition(gauges)
