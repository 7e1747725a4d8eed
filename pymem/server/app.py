"""The memory service over HTTP: a Starlette app.

Routes:
  POST /v1/handshake   the protocol spoken, the verbs, describe_store(), the caller's identity
  POST /v1/call        one verb: {"verb", "args", "idempotency_key"?} -> {"ok": true, "result"}
  GET  /healthz        liveness (the process answers)
  GET  /readyz         readiness (database reachable, pgvector usable, schema current), from the
                       background probe's last report (pymem.service.readiness): it never waits
  GET  /openapi.json   the OpenAPI document of the routes above
  GET  /metrics        the Prometheus text format of the process's counters, with `metrics=True` only
                       (pymem.server.metrics: no tenant data in any label, no token asked)
       /mcp            the MCP server (streamable HTTP), behind the same tokens
       /inspector      the memory inspector's web pages (pymem.inspector), behind the same tokens

Every /v1 call and every MCP request carries its own signed token (Authorization: Bearer); the
verified claims are the Context of that call's transaction, and nothing in a body can change them.
The app refuses to build without a key (pymem.service.auth.TokenVerifier.from_env).

Each tenant runs at most `per_tenant` calls at a time (pymem.service.limits): the surplus gets 429
`tenant_busy` at once, before its body is read; and at most `heavy_calls` calls with many records
or long texts run at once among all tenants, so they leave CPU for everyone's small calls. Every verb runs on a worker
thread, never on the
event loop, and the content check of a large note in a worker process (pymem.admission.offload).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio.to_thread
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route

from ..admission import offload
from ..config import Settings
from ..context import Context
from ..embedder import Embedder
from ..inspector import build_inspector
from ..mcp.server import build_mcp_server, identity_from_request
from ..service.auth import TokenVerifier
from ..service.limits import default_heavy_calls, default_per_tenant, service_settings
from ..service.readiness import PROBE_INTERVAL, Readiness
from ..service.verbs import Service
from ..service.wire import ProtocolError
from ..storage.store import Store
from .access import AccessLog, request_id
from .metrics import RequestMetrics, metrics_endpoint
from .openapi import openapi_document
from .requests import DEFAULT_MAX_BODY, bearer_token, parse_envelope, parse_json, read_body
from .responses import error_response, json_bytes, json_response, ok_response

__all__ = ["build_app"]

#: Worker processes for the content check of large notes (pymem.admission.offload).
OFFLOAD_WORKERS = 2


class _Runtime:
    """The open store, its Service and its readiness probe, from the app's startup to its shutdown."""

    def __init__(self, store: Store | None, settings: Settings | None, embedder: Embedder | None, pool_size: int,
                 per_tenant: int | None, probe_interval: float, heavy_calls: int | None = None):
        self.given = store
        self.settings = settings
        self.embedder = embedder
        self.pool_size = pool_size
        self.per_tenant = per_tenant
        self.heavy_calls = heavy_calls
        self.probe_interval = probe_interval
        self.service: Service | None = None
        self.readiness: Readiness | None = None

    def open(self) -> None:
        store = self.given or Store.open(service_settings(self.settings or Settings.from_env()),
                                         pool_size=self.pool_size)
        try:
            per_tenant = self.per_tenant if self.per_tenant is not None else default_per_tenant(store.pool.max_size)
            heavy = self.heavy_calls if self.heavy_calls is not None else default_heavy_calls()
            self.service = Service(store, embedder=self.embedder, per_tenant=per_tenant or None,
                                   heavy_calls=heavy or None)
            self.readiness = Readiness(store, interval=self.probe_interval)
            self.readiness.start()
            # large notes are checked in worker processes: a long scan never holds this process
            offload.install(workers=OFFLOAD_WORKERS)
        except Exception:
            if self.given is None:
                store.close()
            raise

    def close(self) -> None:
        offload.shutdown()
        readiness, self.readiness = self.readiness, None
        if readiness is not None:
            readiness.stop()
        service, self.service = self.service, None
        if service is not None and self.given is None:
            service.store.close()

    def get(self) -> Service:
        if self.service is None:
            raise ProtocolError("internal_error", "the service is not started")
        return self.service


def build_app(store: Store | None = None, *, tokens: TokenVerifier | None = None, settings: Settings | None = None,
              embedder: Embedder | None = None, max_body: int = DEFAULT_MAX_BODY, host: str = "127.0.0.1",
              pool_size: int = 10, per_tenant: int | None = None, probe_interval: float = PROBE_INTERVAL,
              heavy_calls: int | None = None, metrics: bool = False, checkpoints: str | None = None) -> Starlette:
    """The service's ASGI app.

    `store`: an open store to serve (kept open at shutdown); else one is opened from `settings`
    (default: the environment, with the service's lock and statement timeouts where unset:
    pymem.service.limits) when the app starts, and closed when it stops. `tokens`: default
    TokenVerifier.from_env() of the settings' PYMEM_* values (or the environment's), which refuses
    to build without PYMEM_JWT_KEY (or a public key).
    `host`: where it will listen; on a loopback host the MCP endpoint also checks the Host header
    against DNS rebinding. `per_tenant`: the most calls one tenant runs at a time (default: a
    quarter of the pool; 0: no limit). `heavy_calls`: the most heavy calls (many records, long
    texts) run at once among all tenants (default half the cores; 0: no bound).
    `probe_interval`: seconds between readiness probes. `metrics`: serve GET /metrics (off by
    default: it takes no token, so expose it only where the scraper reaches it). `checkpoints`:
    the signed checkpoints file (`pymem anchor`) the inspector's integrity page shows.
    """
    if tokens is None:
        source = settings if settings is not None else store.settings if store is not None else Settings.from_env()
        tokens = TokenVerifier.from_env(source.environ)
    runtime = _Runtime(store, settings, embedder, pool_size, per_tenant, probe_interval, heavy_calls)
    mcp = build_mcp_server(runtime.get, identity_from_request, tokens=tokens)
    mcp_app = mcp.streamable_http_app(streamable_http_path="/mcp", json_response=True, stateless_http=True,
                                      max_request_body_size=max_body, host=host)
    document = json_bytes(openapi_document())

    async def authenticated(request: Request, work: Callable[[Context], Awaitable[Response]]) -> Response:
        rid = request_id(request.scope)
        try:
            ctx = tokens.verify(bearer_token(request))
            request.state.tenant = ctx.tenant
            return await work(ctx)
        except Exception as exc:  # noqa: BLE001 - every failure becomes an error envelope, internals never leave
            return error_response(exc, rid, f"{request.method} {request.url.path}")

    async def call(request: Request) -> Response:
        async def work(ctx: Context) -> Response:
            service = runtime.get()
            service.limits.check(ctx.tenant)  # a tenant at its limit is refused before its body is read
            body = await read_body(request, max_body)
            run = functools.partial(_call_json, service, ctx, body, request.state)
            return ok_response(await anyio.to_thread.run_sync(run))
        return await authenticated(request, work)

    async def handshake(request: Request) -> Response:
        async def work(ctx: Context) -> Response:
            raw = await read_body(request, max_body, required=False)
            body = parse_json(raw) if raw is not None else None
            if body is not None and (not isinstance(body, dict) or set(body) - {"protocols"}):
                raise ProtocolError("malformed_request", 'the handshake body is {"protocols": [...]} or empty')
            if body and "protocols" in body and not isinstance(body["protocols"], list):
                # An explicit null (or any non-list) is a malformed body, not "no preference".
                raise ProtocolError("malformed_request", "protocols must be a list of protocol names")
            protocols = body.get("protocols") if body else None
            run = functools.partial(runtime.get().handshake, ctx, protocols)
            return ok_response(json_bytes(await anyio.to_thread.run_sync(run)))
        return await authenticated(request, work)

    async def healthz(request: Request) -> Response:
        return json_response({"status": "ok"})

    async def readyz(request: Request) -> Response:
        readiness = runtime.readiness
        if readiness is None:
            return json_response({"status": "not_ready", "reason": "starting"}, 503)
        ready, report = readiness.report()  # the background probe's last word: never waits
        return json_response({"status": "ready" if ready else "not_ready", "health": report}, 200 if ready else 503)

    async def openapi(request: Request) -> Response:
        return Response(document, media_type="application/json")

    async def http_error(request: Request, exc: Exception) -> Response:
        rid = request_id(request.scope)
        if isinstance(exc, HTTPException) and exc.status_code == 405:
            response = error_response(ProtocolError("method_not_allowed", "this route does not take that method"), rid)
            response.headers.update(exc.headers or {})
            return response
        return error_response(ProtocolError("route_not_found", "no such route"), rid)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await anyio.to_thread.run_sync(runtime.open)
        try:
            async with mcp.session_manager.run():
                yield
        finally:
            await anyio.to_thread.run_sync(runtime.close)

    routes = [
        Route("/v1/handshake", handshake, methods=["POST"]),
        Route("/v1/call", call, methods=["POST"]),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route("/openapi.json", openapi, methods=["GET"]),
        Route("/mcp", mcp_app),  # the SDK's app routes /mcp itself and checks the token on every request
        Mount("/inspector", app=build_inspector(lambda: runtime.get().store, tokens, checkpoints=checkpoints,
                                                embedder_of=lambda: runtime.get().embedder)),
    ]
    middleware = [Middleware(AccessLog)]
    if metrics:
        routes.append(Route("/metrics", metrics_endpoint(runtime), methods=["GET"]))
        middleware.append(Middleware(RequestMetrics))
    app = Starlette(routes=routes, middleware=middleware, lifespan=lifespan,
                    exception_handlers={404: http_error, 405: http_error})
    app.state.runtime = runtime
    return app


def _call_json(service: Service, ctx: Any, body: bytes, state: Any) -> bytes:
    """Parse the envelope, run the verb and serialise its result: all on a worker thread, so a large
    body or result never holds up the event loop."""
    verb, args, key = parse_envelope(parse_json(body))
    if verb in service.verbs:
        state.verb = verb  # for the access log; an unknown verb's name is the caller's text
    return json_bytes(service.call(ctx, verb, args, key))
