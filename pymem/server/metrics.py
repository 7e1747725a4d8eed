"""`/metrics`: the process's counters (pymem.telemetry.metrics) in the Prometheus text format, and
the middleware that counts and times every request.

Labels stay bounded and hold no tenant data: the route is one of the app's (else `other`), the verb
one of the service's (read from the request's state, where the call set it once it knew it was a
known verb), the status an HTTP status, the code an error code of the wire vocabulary (`ok` on
success). No tenant, actor, id or argument is ever a label: one tenant's traffic is not for another
tenant, nor for whoever can read the scrape. The endpoint takes no token: serve it only where the
scraper reaches it and the callers do not (off by default; `pymem serve --metrics`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..service.wire import BY_CODE
from ..telemetry import metrics

__all__ = ["RequestMetrics", "metrics_endpoint", "ROUTES", "CONTENT_TYPE"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
#: The routes counted by name; any other path is `other`.
ROUTES = frozenset({"/v1/call", "/v1/handshake", "/healthz", "/readyz", "/openapi.json", "/mcp", "/metrics"})
#: An error body is small; more than this is not read for its code.
MAX_ERROR_BODY = 16_384


def _route(scope: Scope) -> str:
    path = scope.get("path", "")
    return path if path in ROUTES else "/mcp" if path.startswith("/mcp/") else "other"


def _code(status: int, body: bytes) -> str:
    if status < 400:
        return "ok"
    try:
        code = json.loads(body)["error"]["code"]
    except (ValueError, KeyError, TypeError):
        return "other"
    return code if isinstance(code, str) and code in BY_CODE else "other"


class RequestMetrics:
    """Counts each HTTP request by route, verb, status and error code, and times it."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500
        body = bytearray()

        async def watch(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body" and status >= 400 and len(body) < MAX_ERROR_BODY:
                body.extend(message.get("body", b"")[:MAX_ERROR_BODY - len(body)])
            await send(message)

        try:
            await self.app(scope, receive, watch)
        finally:
            route = _route(scope)
            verb = scope.get("state", {}).get("verb") or ""
            code = _code(status, bytes(body))
            metrics.count("pymem_requests_total", route=route, verb=verb, status=status, code=code)
            metrics.observe("pymem_request_duration_seconds", time.perf_counter() - started, route=route, verb=verb)


def _pool_gauges(runtime: Any) -> Iterable[tuple[str, str, list[metrics.Sample]]]:
    service = getattr(runtime, "service", None)
    if service is None:
        return []
    pool = service.store.pool
    stats = pool.get_stats()
    size, idle = stats.get("pool_size", 0), stats.get("pool_available", 0)
    return [
        ("pymem_pool_connections", "The service's database connections, in use or idle.",
         [("pymem_pool_connections", {"state": "in_use"}, max(0, size - idle)),
          ("pymem_pool_connections", {"state": "idle"}, idle)]),
        ("pymem_pool_max_connections", "The most connections the pool opens.",
         [("pymem_pool_max_connections", {}, pool.max_size)]),
        ("pymem_pool_waiting", "Calls waiting for a connection right now.",
         [("pymem_pool_waiting", {}, stats.get("requests_waiting", 0))]),
        ("pymem_heavy_calls_running", "Heavy calls (many records, long texts) running now, all tenants together.",
         [("pymem_heavy_calls_running", {}, service.heavy.running())]),
    ]


def metrics_endpoint(runtime: Any) -> Any:
    """The `/metrics` route's handler for the app's runtime (its pool is read at each scrape)."""

    async def handler(request: Request) -> Response:
        return Response(metrics.exposition(_pool_gauges(runtime)), media_type=None,
                        headers={"content-type": CONTENT_TYPE, "cache-control": "no-store"})

    return handler
