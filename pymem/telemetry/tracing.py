"""OpenTelemetry spans, when the `otel` extra (opentelemetry-api) is installed; nothing otherwise.

`span("pymem.verb.recall", **attributes)` opens a span on the tracer named `pymem` of whatever
tracer provider the application configured. Without the package, or before the application sets
a provider, it is a null context and costs next to nothing. Attributes are names, kinds and outcomes:
a verb, a decision, an error code, a SQL operation; never content, arguments, ids or tenants.

`instrument(conn)` gives a psycopg connection a cursor class whose `execute` and `executemany`
each run in a `pymem.sql` span (the operation's first keyword as `db.operation.name`, never the
statement's values); pymem.db calls it for every connection it configures.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Iterator
from typing import Any

__all__ = ["span", "tracing_available", "instrument", "set_outcome"]

_tracer: Any = None
_trace: Any = None  # the opentelemetry.trace module, once _get_tracer found it


def tracing_available() -> bool:
    """Whether opentelemetry-api can be imported (the `otel` extra)."""
    try:
        importlib.import_module("opentelemetry.trace")
    except ImportError:
        return False
    return True


def _get_tracer() -> Any:
    global _tracer, _trace
    if _tracer is None:
        if not tracing_available():
            _tracer = False
        else:
            from opentelemetry import trace

            # a proxy tracer: it follows whichever provider the application sets, even later
            _tracer = trace.get_tracer("pymem")
            _trace = trace
    return _tracer


def _provider_set() -> bool:
    """Whether the application has set a tracer provider: until it does, OpenTelemetry's own
    would make a non-recording span, which costs several microseconds a statement for nothing
    (a check of the global provider costs under one). Called after _get_tracer found the package."""
    return not isinstance(_trace.get_tracer_provider(), _trace.ProxyTracerProvider)


@contextlib.contextmanager
def span(name: str, **attributes: str | int | float | bool) -> Iterator[Any]:
    """A span named `name` around the block (None without the extra). An exception leaving the
    block marks the span as an error, by the exception's type only (its message may hold content)."""
    tracer = _get_tracer()
    if not tracer or not _provider_set():
        yield None
        return
    from opentelemetry.trace import Status, StatusCode

    with tracer.start_as_current_span(name, attributes=attributes, record_exception=False,
                                      set_status_on_exception=False) as current:
        try:
            yield current
        except BaseException as exc:
            current.set_status(Status(StatusCode.ERROR, type(exc).__name__))
            current.set_attribute("error.type", type(exc).__name__)
            raise


def set_outcome(current: Any, **attributes: str | int | float | bool) -> None:
    """Add attributes to a span `span` gave (a no-op for None)."""
    if current is not None:
        current.set_attributes(attributes)


def _operation(query: Any) -> str:
    text = query if isinstance(query, str) else query.decode("utf-8", "replace") if isinstance(query, bytes) else ""
    words = text.lstrip("( \n\t").split(None, 1)
    return words[0].lower()[:16] if words and words[0].isalpha() else "statement"


_cursor_class: Any = None


def _traced_cursor() -> Any:
    global _cursor_class
    if _cursor_class is None:
        import psycopg

        class TracedCursor(psycopg.Cursor[Any]):
            """A cursor whose statements each run in a `pymem.sql` span."""

            def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
                with span("pymem.sql", **{"db.system.name": "postgresql", "db.operation.name": _operation(query)}):
                    return super().execute(query, params, **kwargs)

            def executemany(self, query: Any, params_seq: Any, **kwargs: Any) -> None:
                with span("pymem.sql", **{"db.system.name": "postgresql", "db.operation.name": _operation(query)},
                          **{"db.operation.batch": True}):
                    super().executemany(query, params_seq, **kwargs)

        _cursor_class = TracedCursor
    return _cursor_class


def instrument(conn: Any) -> None:
    """Trace `conn`'s statements when the extra is installed (a no-op otherwise, and for a
    connection whose cursor class is already someone else's)."""
    if not _get_tracer():
        return
    import psycopg

    if conn.cursor_factory is psycopg.Cursor:
        conn.cursor_factory = _traced_cursor()
