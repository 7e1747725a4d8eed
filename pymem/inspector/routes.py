"""The inspector's routes: a Starlette Router to mount (at /inspector by pymem.server.app), or an
app of its own (`pymem inspect --web`).

  GET  /                         the memories page (or the sign-in form)
  GET  /login  POST /login       sign in with a token (kept in an HttpOnly, SameSite=Strict cookie)
  POST /logout                   sign out
  GET  /memories                 search and filter; /memories/{id}: one memory in full
  GET  /sessions                 sessions; /sessions/{id}: its turns; /turn?session=&turn=: one turn's block
  GET  /quarantine  /refusals  /integrity
  POST /actions/{supersede,erase,release,reject,verify}

Every response is no-store, framed by nobody, with a policy that runs no script. Pages and actions
run on a worker thread; an error is a page with the service's status for it and a message that
names no content.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, quote, unquote

import anyio.to_thread
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route, Router
from starlette.types import Receive, Scope, Send

from ..embedder import Embedder
from ..errors import InvalidArguments, NotFound, Unauthenticated
from ..service.auth import TokenVerifier, context_from_claims
from ..service.failures import log_unexpected
from ..service.wire import bounded_message, code_for, status_for
from .actions import ACTIONS
from .html import esc, field, form, page
from .identity import COOKIE, Viewer, check_form, role_of, viewer_of
from .pages import PAGES, Site

if TYPE_CHECKING:  # pragma: no cover
    from ..storage.store import Store

__all__ = ["build_inspector", "inspector_app", "MAX_FORM_BYTES"]

log = logging.getLogger("pymem.inspector")

#: The largest form accepted (a superseding text fits well within it).
MAX_FORM_BYTES = 256 * 1024
NOTICE = "pymem_inspector_notice"
HEADERS = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
           "X-Frame-Options": "DENY",
           "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; "
                                      "frame-ancestors 'none'; base-uri 'none'"}


def _base(request: Request) -> str:
    return str(request.scope.get("root_path", "")).rstrip("/")


def _html(text: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(text, status_code=status, headers=HEADERS)


def _login_page(base: str, message: str | None = None, status: int = 200) -> HTMLResponse:
    note = f'<p class=error role="alert">{esc(message)}</p>' if message else ""
    body = note + form(f"{base}/login", [field("token", "Token", kind="password", required=True)], "Sign in", None,
                       name="sign in")
    body += ("<p>Paste a signed token: an operator's (no adapter) sees and acts on the tenant's memories, an "
             "auditor's (<code>role: auditor</code>) reads the audit views. An agent's token is refused.</p>")
    return _html(page("Sign in", body, base, None), status)


async def _form(request: Request) -> dict[str, str]:
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > MAX_FORM_BYTES:
        raise InvalidArguments(f"the form is larger than {MAX_FORM_BYTES} bytes")
    raw = b""
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > MAX_FORM_BYTES:
            raise InvalidArguments(f"the form is larger than {MAX_FORM_BYTES} bytes")
    media = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if raw and media != "application/x-www-form-urlencoded":
        raise InvalidArguments("send the form as application/x-www-form-urlencoded")
    try:
        pairs = parse_qsl(raw.decode("utf-8"), keep_blank_values=True, strict_parsing=False)
    except UnicodeDecodeError:
        raise InvalidArguments("the form is not UTF-8") from None
    out: dict[str, str] = {}
    for key, value in pairs:
        if key in out:
            raise InvalidArguments(f"the field {key[:40]!r} is given twice")
        if "\x00" in value:
            raise InvalidArguments(f"the field {key[:40]!r} holds a NUL byte")
        out[key] = value
    return out


def build_inspector(store_of: Callable[[], Store], tokens: TokenVerifier, *, checkpoints: str | None = None,
                    embedder_of: Callable[[], Embedder | None] = lambda: None) -> Router:
    """The inspector's routes over the store `store_of()` returns (called per request: the
    service opens its store when it starts). `embedder_of()`: the embedder a superseding text is
    embedded with (None: the store's). `checkpoints`: the file `pymem anchor` signs heads into,
    shown on the integrity page."""
    sites: dict[str, Site] = {}

    def site_for(request: Request) -> Site:
        base = _base(request)
        site = sites.get(base)
        if site is None or site.store is not store_of():
            site = sites[base] = Site(store_of(), base, checkpoints, site.last_verify if site else {},
                                      embedder_of())
        return site

    def failure(request: Request, exc: Exception) -> Response:
        base = _base(request)
        code = code_for(exc)
        if isinstance(exc, Unauthenticated):
            return _login_page(base, None if exc.code == "token_missing" else str(exc), 401)
        status = status_for(code)
        if code == "internal_error":
            rid = str(request.scope.get("state", {}).get("request_id", "-"))
            log_unexpected(log, exc, rid, f"{request.method} {request.url.path}")
            message = f"internal error; the log has the details under request id {rid}"
        else:
            message = bounded_message(str(exc))
        body = f'<p class=error role="alert"><strong>{esc(code)}</strong>: {esc(message)}</p>'
        return _html(page(f"Error {status}", body, base, None), status)

    async def show(request: Request, name: str) -> Response:
        try:
            viewer = viewer_of(request, tokens)
            request.state.tenant = viewer.ctx.tenant
            site = site_for(request)
            render = PAGES[name]
            title, body = await anyio.to_thread.run_sync(render, site, viewer, dict(request.path_params),
                                                         dict(request.query_params))
        except Exception as exc:  # noqa: BLE001 - every failure becomes an error page, internals never leave
            return failure(request, exc)
        notice = request.cookies.get(NOTICE)
        response = _html(page(title, body, site.base, viewer, status_line=unquote(notice) if notice else None))
        if notice:
            response.delete_cookie(NOTICE, path=site.base or "/")
        return response

    def page_route(path: str, name: str) -> Route:
        async def endpoint(request: Request) -> Response:
            return await show(request, name)
        return Route(path, endpoint, methods=["GET"], name=f"inspector-{name}")

    async def act(request: Request) -> Response:
        try:
            viewer = viewer_of(request, tokens)
            request.state.tenant = viewer.ctx.tenant
            form_data = await _form(request)
            check_form(request, viewer, form_data)
            action = ACTIONS.get(request.path_params["action"])
            if action is None:
                raise InvalidArguments(f"no action {request.path_params['action'][:40]!r}")
            target, notice = await anyio.to_thread.run_sync(action, site_for(request), viewer, form_data)
        except Exception as exc:  # noqa: BLE001 - every failure becomes an error page, internals never leave
            return failure(request, exc)
        response = RedirectResponse(target, status_code=303, headers=HEADERS)
        response.set_cookie(NOTICE, quote(notice[:300]), path=_base(request) or "/", httponly=True, samesite="strict",
                            secure=request.url.scheme == "https")
        return response

    async def home(request: Request) -> Response:
        return RedirectResponse(f"{_base(request)}/memories", status_code=303, headers=HEADERS)

    async def login_form(request: Request) -> Response:
        return _login_page(_base(request))

    async def login(request: Request) -> Response:
        base = _base(request)
        try:
            token = (await _form(request)).get("token", "").strip()
            claims = tokens.claims(token)
            request.state.tenant = claims.get("tenant")
            viewer = viewer_of_token(token)
        except Exception as exc:  # noqa: BLE001 - every failure becomes an error page
            return failure(request, exc)
        response = RedirectResponse(f"{base}/memories" if viewer.operator else f"{base}/sessions", status_code=303,
                                    headers=HEADERS)
        response.set_cookie(COOKIE, token, path=base or "/", httponly=True, samesite="strict",
                            secure=request.url.scheme == "https", max_age=max(1, int(claims["exp"] - time.time())))
        return response

    def viewer_of_token(token: str) -> Viewer:
        claims = tokens.claims(token)
        ctx = context_from_claims(claims)
        return Viewer(ctx=ctx, role=role_of(claims, ctx), token=token, from_cookie=True)

    async def logout(request: Request) -> Response:
        base = _base(request)
        try:
            viewer = viewer_of(request, tokens)
            check_form(request, viewer, await _form(request))
        except Exception as exc:  # noqa: BLE001 - every failure becomes an error page
            return failure(request, exc)
        response = RedirectResponse(f"{base}/login", status_code=303, headers=HEADERS)
        response.delete_cookie(COOKIE, path=base or "/")
        return response

    routes = [
        Route("/", home, methods=["GET"]),
        Route("/login", login_form, methods=["GET"]),
        Route("/login", login, methods=["POST"]),
        Route("/logout", logout, methods=["POST"]),
        page_route("/memories", "memories"),
        page_route("/memories/{memory_id:path}", "memory"),
        page_route("/sessions", "sessions"),
        page_route("/sessions/{session_id:path}", "session"),
        page_route("/turn", "turn"),
        page_route("/quarantine", "quarantine"),
        page_route("/refusals", "refusals"),
        page_route("/integrity", "integrity"),
        Route("/actions/{action}", act, methods=["POST"]),
    ]
    async def not_found(scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        await failure(request, NotFound(f"no inspector page at {request.url.path[:200]!r}"))(scope, receive, send)

    return Router(routes=routes, default=not_found)


def inspector_app(store: Store, tokens: TokenVerifier, *, checkpoints: str | None = None,
                  embedder: Embedder | None = None, prefix: str = "/inspector") -> Starlette:
    """The inspector alone, mounted at `prefix`, over an open store (kept open)."""
    async def root(request: Request) -> Response:
        return RedirectResponse(f"{prefix}/memories", status_code=303)

    inner = build_inspector(lambda: store, tokens, checkpoints=checkpoints, embedder_of=lambda: embedder)
    return Starlette(routes=[Route("/", root, methods=["GET"]), Mount(prefix, app=inner)])
