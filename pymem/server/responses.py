"""Responses: the success and error envelopes, and how an exception becomes an error response.

Success: {"ok": true, "result": ...}. Error: {"ok": false, "error": {"code", "message", "request_id",
"details"?}} with the status pymem.service.wire gives the code; a message is at most
wire.MAX_ERROR_MESSAGE characters, and a retryable refusal (pymem.errors.Busy: tenant busy, pool
saturated, a lock or statement timeout, a transaction conflict) carries its hint as a Retry-After
header (whole seconds, at least 1) and as details.retry_after. An unexpected exception becomes
500 "internal_error" whose message says nothing of what failed; the log records its type and
stack frames (code lines), never its message or arguments, which could hold a caller's content.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import json
import logging
import uuid
from typing import Any

from starlette.responses import Response

from ..admission.quarantine import Admission
from ..errors import ConventionConflict, MemoryAdmissionError, Unauthenticated
from ..service.failures import log_unexpected
from ..service.wire import bounded_message, code_for, retry_after, status_for

__all__ = ["json_bytes", "ok_response", "error_response", "json_response"]

log = logging.getLogger("pymem.server")


def _default(value: Any) -> Any:
    if isinstance(value, (_dt.datetime, _dt.date)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    if hasattr(value, "tolist"):  # a pgvector or numpy vector
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def json_bytes(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"),
                      default=_default).encode("utf-8")


def json_response(value: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(json_bytes(value), status_code=status, headers=headers, media_type="application/json")


def ok_response(result_json: bytes) -> Response:
    """The success envelope around an already-serialised result (serialised off the event loop)."""
    return Response(b'{"ok":true,"result":' + result_json + b"}", media_type="application/json")


def error_response(exc: BaseException, request_id: str, where: str = "a call") -> Response:
    code = code_for(exc)
    status = status_for(code)
    error: dict[str, Any] = {"code": code, "message": str(exc), "request_id": request_id}
    headers: dict[str, str] = {}
    after = retry_after(exc)
    if after is not None:
        headers["Retry-After"] = after
        error["details"] = {"retry_after": float(exc.retry_after)}  # type: ignore[attr-defined]
    if code == "internal_error":
        log_unexpected(log, exc, request_id, where)
        error["message"] = f"internal error; the service log has the details under request id {request_id}"
    elif isinstance(exc, MemoryAdmissionError):
        if type(exc) is MemoryAdmissionError:
            error["message"] = f"refused by the write gate: {exc.reason}"
        error["details"] = Admission.refused(exc).to_json()
    elif isinstance(exc, ConventionConflict):
        error["details"] = {"receipt_id": exc.receipt_id, "conflicting_id": exc.conflicting_id}
    if isinstance(exc, Unauthenticated):
        headers["WWW-Authenticate"] = ('Bearer realm="pymem"' if exc.code == "token_missing"
                                       else 'Bearer realm="pymem", error="invalid_token"')
    error["message"] = bounded_message(error["message"])
    return json_response({"ok": False, "error": error}, status, headers)
