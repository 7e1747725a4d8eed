"""Reading a request: the bearer token, the body (size-limited, JSON only) and the call envelope.

Nothing here logs or echoes what a body holds: errors name the rule broken, never the value.
"""

from __future__ import annotations

import json
import re
from typing import Any, overload

from starlette.requests import Request

from ..service.verbs import REFUSED_ARGS, names_shown
from ..service.wire import ProtocolError

__all__ = ["bearer_token", "read_body", "parse_json", "parse_envelope", "ENVELOPE_KEYS", "DEFAULT_MAX_BODY"]

#: Largest request body accepted (PYMEM_MAX_REQUEST_BYTES): a full batch of 10,000 small records fits.
DEFAULT_MAX_BODY = 16 * 1024 * 1024
ENVELOPE_KEYS = ("verb", "args", "idempotency_key")
# A \\uD800-\\uDFFF escape: only such a body can decode to a lone surrogate, which no database accepts.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def bearer_token(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer":
        return None
    return token.strip() or None


@overload
async def read_body(request: Request, limit: int) -> bytes: ...
@overload
async def read_body(request: Request, limit: int, *, required: bool) -> bytes | None: ...
async def read_body(request: Request, limit: int, *, required: bool = True) -> bytes | None:
    """The body's bytes, at most `limit`, sent as application/json; None for an empty body when not
    `required`. Parsing is left to the caller (off the event loop for a large body)."""
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > limit:
        raise ProtocolError("request_too_large", f"the body is {length} bytes; the limit is {limit}")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise ProtocolError("request_too_large", f"the body is over the limit of {limit} bytes")
        chunks.append(chunk)
    body = b"".join(chunks)
    if not body.strip():
        if required:
            raise ProtocolError("malformed_request", "the body is empty; send a JSON object")
        return None
    media = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media != "application/json":
        raise ProtocolError("unsupported_media_type", "send the body as Content-Type: application/json")
    return body


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _check_surrogates(value: Any) -> None:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                raise ProtocolError("malformed_request", "the body holds a lone UTF-16 surrogate escape") from None
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def parse_json(body: bytes) -> Any:
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise ProtocolError("malformed_request", "the body is not UTF-8") from None
    try:
        value = json.loads(text, parse_constant=_no_constants)
    except (ValueError, RecursionError):
        raise ProtocolError("malformed_request", "the body is not valid JSON") from None
    if _SURROGATE_ESCAPE.search(text):
        _check_surrogates(value)
    return value


def parse_envelope(body: Any) -> tuple[Any, Any, Any]:
    """(verb, args, idempotency_key) of a call envelope; the verb table checks the rest."""
    if not isinstance(body, dict):
        raise ProtocolError("malformed_request", "the body must be an object {verb, args, idempotency_key}")
    claimed = sorted(REFUSED_ARGS.intersection(body))
    if claimed:
        raise ProtocolError("identity_in_body", f"{', '.join(claimed)} may not be given in a call: "
                            "identity comes from the verified token only")
    unknown = [k for k in body if k not in ENVELOPE_KEYS]
    if unknown:
        raise ProtocolError("malformed_request", f"unknown envelope field(s): {names_shown(unknown)} "
                            f"(known: {', '.join(ENVELOPE_KEYS)})")
    verb = body.get("verb")
    if not isinstance(verb, str):
        raise ProtocolError("malformed_request", "verb must be a string")
    key = body.get("idempotency_key")
    if key is not None and not isinstance(key, str):
        raise ProtocolError("malformed_request", "idempotency_key must be a string")
    return verb, body.get("args"), key
