"""Telemetry: counters and histograms for Prometheus, OpenTelemetry spans, JSON log lines.

Nothing here ever receives memory content, arguments or embeddings: the library records events by
kind and outcome (`count`, `observe`), spans carry a verb's name and its outcome, and log lines are
what the library's own messages say (they name ids, digests and counts, never content).

- `metrics`: a process-wide registry the library counts into (admissions by decision, deliveries,
  verification runs) and `pymem serve` adds its requests to; `exposition()` renders it in the
  Prometheus text format for `/metrics`, or for an application's own endpoint.
- `tracing`: `span(name, **attributes)`, an OpenTelemetry span when the `otel` extra is installed
  (opentelemetry-api), else nothing at all; connections' statements get one span each.
- `logs`: `JsonFormatter`, one JSON object per line (`pymem serve --log-format json`).
"""

from .logs import JsonFormatter
from .metrics import REGISTRY, Registry, count, exposition, observe
from .tracing import span, tracing_available

__all__ = ["REGISTRY", "Registry", "count", "observe", "exposition", "span", "tracing_available", "JsonFormatter"]
