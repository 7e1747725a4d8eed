"""The access log and the request id: one line per request, and an X-Request-Id on every response.

A line holds the method, the path (never the query string), the status, the time taken, the request
id and, once a call was authenticated, its tenant and verb: never a header, a token or a body.
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import cast

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["AccessLog", "request_id"]

log = logging.getLogger("pymem.server.access")


def request_id(scope: Scope) -> str:
    return cast("str", scope.setdefault("state", {}).setdefault("request_id", uuid.uuid4().hex))


class AccessLog:
    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rid = request_id(scope)
        started = time.perf_counter()
        status = 500

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message.setdefault("headers", [])
                message["headers"] = [*message["headers"], (b"x-request-id", rid.encode("ascii"))]
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            state = scope.get("state", {})
            who = "".join(f" {k}={state[k]}" for k in ("tenant", "verb") if state.get(k))
            took = (time.perf_counter() - started) * 1000
            # the same fields apart, for JSON lines (pymem.telemetry.logs)
            fields = {"method": scope.get("method", "-"), "path": scope.get("path", "-"), "status": status,
                      "duration_ms": round(took, 1), "request_id": rid,
                      **{k: state[k] for k in ("tenant", "verb") if state.get(k)}}
            log.info("%s %s %d %.1fms id=%s%s", fields["method"], fields["path"], status, took, rid, who, extra=fields)
