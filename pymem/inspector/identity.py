"""Who is looking: the token of a request, the role it gives, and the form token of its session.

The token comes from `Authorization: Bearer` or from the login cookie; the same TokenVerifier as
the service's verifies it, and its claims make the Context every page runs in. An operator is a
token that names no adapter; an auditor is one with the claim `role: auditor` (it reads the
audit views: ids, hashes, events, never content); a token naming an adapter is an agent's, and
is refused: an agent does not review its own memories or release what it wrote.

A form posted with the cookie must carry the form token, an HMAC of the cookie's token: a page
of another site can make the browser post (the SameSite=Strict cookie is its first barrier), but
cannot read the token to derive it. A request authenticated by its Authorization header carries
no ambient credential and needs no form token.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request

from ..context import Context
from ..errors import AccessDenied, Unauthenticated
from ..service.auth import ROLES, TokenVerifier, context_from_claims

__all__ = ["Viewer", "COOKIE", "ROLES", "viewer_of", "form_token", "check_form"]

#: The login cookie (HttpOnly, SameSite=Strict, path /inspector).
COOKIE = "pymem_inspector"
#: The hidden field every form carries.
FORM_FIELD = "form_token"


@dataclass(frozen=True)
class Viewer:
    """The verified caller of one request."""

    ctx: Context
    role: str
    token: str
    from_cookie: bool

    @property
    def operator(self) -> bool:
        return self.role == "operator"

    @property
    def form_token(self) -> str:
        return form_token(self.token)


def role_of(claims: Mapping[str, Any], ctx: Context) -> str:
    """operator or auditor; AccessDenied for an agent's token or a role the inspector does not know."""
    if ctx.adapter is not None:
        raise AccessDenied("an agent's token (one naming an adapter) cannot open the inspector: "
                           "use an operator's or an auditor's token")
    role = claims.get("role", "operator")
    if role not in ROLES:
        shown = role[:20] if isinstance(role, str) else type(role).__name__
        raise AccessDenied(f"the token's role {shown!r} is not one the inspector knows ({', '.join(ROLES)})")
    return str(role)


def _bearer(request: Request) -> str | None:
    header = request.headers.get("authorization")
    if header is None:
        return None
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        raise Unauthenticated("token_malformed", "the Authorization header is not 'Bearer <token>'")
    return value.strip()


def viewer_of(request: Request, tokens: TokenVerifier) -> Viewer:
    """The request's verified caller; Unauthenticated (no or bad token), AccessDenied (an agent)."""
    header = _bearer(request)
    token = header if header is not None else request.cookies.get(COOKIE)
    claims = tokens.claims(token)
    assert token is not None  # claims() refuses a missing token
    ctx = context_from_claims(claims)
    return Viewer(ctx=ctx, role=role_of(claims, ctx), token=token, from_cookie=header is None)


def form_token(token: str) -> str:
    return hmac.new(token.encode("utf-8"), b"pymem-inspector-form", hashlib.sha256).hexdigest()


def check_form(request: Request, viewer: Viewer, form: Mapping[str, Any]) -> None:
    """Refuse a posted form that another site could have made the browser send."""
    origin = request.headers.get("origin")
    if origin is not None and origin != "null":
        host = request.headers.get("host", "")
        if origin.split("://", 1)[-1] != host:
            raise AccessDenied("the form was posted from another origin")
    if viewer.from_cookie:
        sent = form.get(FORM_FIELD)
        if not isinstance(sent, str) or not hmac.compare_digest(sent, viewer.form_token):
            raise AccessDenied("the form token is missing or does not match this login: reload the page and retry")
