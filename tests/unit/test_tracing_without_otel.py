"""Without OpenTelemetry (no `otel` extra) tracing is nothing at all: no span object, no import, a
connection's cursor class untouched. Run in a fresh interpreter where importing opentelemetry fails."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def test_without_the_package_spans_are_null_and_connections_untouched():
    script = textwrap.dedent("""
        import importlib.abc, sys

        class Block(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name == "opentelemetry" or name.startswith("opentelemetry."):
                    raise ModuleNotFoundError(name)
                return None

        sys.meta_path.insert(0, Block())
        import psycopg
        import pymem
        from pymem.telemetry import tracing

        assert not tracing.tracing_available()
        with tracing.span("pymem.get", **{"pymem.verb": "get"}) as current:
            assert current is None
        try:
            with tracing.span("pymem.get"):
                raise KeyError("x")
        except KeyError:
            pass

        class Conn:
            cursor_factory = psycopg.Cursor

        conn = Conn()
        tracing.instrument(conn)
        assert conn.cursor_factory is psycopg.Cursor
        assert not [m for m in sys.modules if m.startswith("opentelemetry")]
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_with_the_package_a_connection_gets_the_traced_cursor():
    import psycopg

    from pymem.telemetry import tracing

    if not tracing.tracing_available():  # pragma: no cover - the test extra brings it
        import pytest

        pytest.skip("opentelemetry-api is not installed (the otel extra)")

    class Conn:
        cursor_factory = psycopg.Cursor

    conn = Conn()
    tracing.instrument(conn)
    assert conn.cursor_factory is not psycopg.Cursor and issubclass(conn.cursor_factory, psycopg.Cursor)
    assert tracing._operation("  select 1") == "select" and tracing._operation("(select 1) union all") == "select"
    assert tracing._operation(b"insert into x") == "insert" and tracing._operation(object()) == "statement"


def test_with_the_package_but_no_provider_set_spans_are_null_until_one_is():
    """OpenTelemetry installed but not configured: no span is made (a non-recording one would cost
    microseconds per statement for nothing); once the application sets a provider, spans record."""
    script = textwrap.dedent("""
        from pymem.telemetry import tracing

        if not tracing.tracing_available():
            print("skip")
            raise SystemExit(0)
        with tracing.span("pymem.get", **{"pymem.verb": "get"}) as current:
            assert current is None
        try:
            from opentelemetry import trace
            from opentelemetry.sdk.trace import TracerProvider
        except ImportError:
            print("ok")
            raise SystemExit(0)
        trace.set_tracer_provider(TracerProvider())
        with tracing.span("pymem.get", **{"pymem.verb": "get"}) as current:
            assert current is not None and current.is_recording()
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() in ("ok", "skip"), done.stderr
