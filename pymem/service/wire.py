"""The service's wire vocabulary: the protocol version and every error as (code, HTTP status).

Every error a call can end in has a stable code, and each code one HTTP status: pymem's typed
errors (pymem.errors), the token codes (Unauthenticated) and the protocol's own (a malformed
envelope, an unknown verb, identity in the body, a request too large). The server maps
exceptions to codes here; the client maps codes back to the same exception classes; the OpenAPI
document and the README list the same table. Messages never carry memory content.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import (
    AccessDenied,
    Busy,
    ContextError,
    ConventionConflict,
    IdempotencyConflict,
    IncognitoSession,
    InvalidArguments,
    LockTimeout,
    MemoryAdmissionError,
    NotFound,
    PoolExhausted,
    PymemError,
    RevisionMismatch,
    SchemaError,
    ServerError,
    StatementTimeout,
    TenantBusy,
    TransactionConflict,
    Unauthenticated,
    UnknownSession,
)

__all__ = ["PROTOCOL", "WireError", "ERRORS", "BY_CODE", "ProtocolError", "TOKEN_CODES", "code_for", "status_for",
           "MAX_ERROR_MESSAGE", "bounded_message", "retry_after"]

#: The protocol a handshake negotiates; a client names the versions it speaks.
PROTOCOL = "pymem/1"
#: Longest error message sent (HTTP or MCP): a reply stays small whatever the request held.
MAX_ERROR_MESSAGE = 1000


@dataclass(frozen=True)
class WireError:
    code: str
    status: int
    raises: type[PymemError]  # what pymem.client raises for it
    meaning: str
    typed: bool = False  # the code of `raises` itself: the server answers it for that typed error


class ProtocolError(PymemError):
    """A request the protocol itself refuses (before any verb runs)."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


TOKEN_CODES = {
    "token_missing": "no Authorization: Bearer token",
    "token_malformed": "not a well-formed JWT",
    "token_algorithm": "alg none, or an algorithm this service does not accept",
    "token_bad_signature": "the signature does not verify with the service's key",
    "token_expired": "exp has passed",
    "token_not_yet_valid": "nbf or iat is in the future",
    "token_audience": "aud is missing, or not this service's (or present when none is configured)",
    "token_issuer": "iss is missing or not the configured issuer",
    "token_claims": "tenant or actor missing, or the claims do not make a context",
}

ERRORS: tuple[WireError, ...] = (
    WireError("malformed_request", 400, InvalidArguments,
              "the body is not a JSON envelope {verb, args, idempotency_key}"),
    WireError("unknown_verb", 400, InvalidArguments, "the verb is not one this service offers"),
    WireError("identity_in_body", 400, InvalidArguments,
              "the body names tenant, actor, adapter, scope or read_adapters: identity comes from the token only"),
    WireError("protocol_unsupported", 400, InvalidArguments, "none of the client's protocol versions is spoken here"),
    WireError("invalid_arguments", 400, InvalidArguments, "the verb's arguments are malformed (InvalidArguments)",
              typed=True),
    *(WireError(code, 401, Unauthenticated, meaning) for code, meaning in TOKEN_CODES.items()),
    WireError("access_denied", 403, AccessDenied,
              "row-level security or privileges refused the call (AccessDenied)", typed=True),
    WireError("context_refused", 403, ContextError, "the database refused the token's context (ContextError)",
              typed=True),
    WireError("not_found", 404, NotFound, "a memory the call needs does not exist or is not visible (NotFound)",
              typed=True),
    WireError("route_not_found", 404, InvalidArguments, "no such route"),
    WireError("method_not_allowed", 405, InvalidArguments, "the route does not take this HTTP method"),
    WireError("idempotency_conflict", 409, IdempotencyConflict,
              "the idempotency key was used with different arguments (IdempotencyConflict)", typed=True),
    WireError("revision_mismatch", 409, RevisionMismatch,
              "a stored revision is not the expected one (RevisionMismatch)", typed=True),
    WireError("convention_conflict", 409, ConventionConflict,
              "the review correction contradicts a rule in force and nothing was filed; details carry receipt_id "
              "and conflicting_id (ConventionConflict)", typed=True),
    WireError("transaction_conflict", 409, TransactionConflict,
              "the call collided with a concurrent transaction (deadlock or serialization failure), was rolled back "
              "and may be retried (TransactionConflict)", typed=True),
    WireError("request_too_large", 413, InvalidArguments, "the body is over the service's size limit"),
    WireError("unsupported_media_type", 415, InvalidArguments, "the body is not application/json"),
    WireError("admission_refused", 422, MemoryAdmissionError,
              "the write gate refused the record; details carry reason, signature, audit_seq and score "
              "(MemoryAdmissionError)", typed=True),
    WireError("unknown_session", 422, UnknownSession,
              "the session was never started in this tenant, or is not visible here (UnknownSession)", typed=True),
    WireError("incognito_session", 422, IncognitoSession,
              "the session is incognito: nothing from it is stored (IncognitoSession)", typed=True),
    WireError("tenant_busy", 429, TenantBusy,
              "the tenant already runs as many concurrent calls as the service allows one tenant; retry after "
              "Retry-After seconds (TenantBusy)", typed=True),
    WireError("internal_error", 500, PymemError,
              "an unexpected failure; the response carries no internals, only a request id"),
    WireError("schema_not_current", 503, SchemaError, "the database schema is missing or behind (SchemaError)",
              typed=True),
    WireError("database_unavailable", 503, ServerError, "the database cannot be reached (ServerError)", typed=True),
    WireError("busy", 503, Busy, "the call could not run now and nothing was written; retry (Busy)", typed=True),
    WireError("pool_saturated", 503, PoolExhausted,
              "no database connection came free within the pool wait; retry after Retry-After seconds "
              "(PoolExhausted)", typed=True),
    WireError("lock_timeout", 503, LockTimeout,
              "a lock the call needs was not granted within the lock timeout; nothing was written (LockTimeout)",
              typed=True),
    WireError("statement_timeout", 503, StatementTimeout,
              "a statement ran past the statement timeout and was cancelled; nothing was written "
              "(StatementTimeout)", typed=True),
)
BY_CODE: dict[str, WireError] = {e.code: e for e in ERRORS}

# The code for each typed error, found along the exception's MRO (ContextError before InvalidArguments).
_TYPED: dict[type[PymemError], str] = {e.raises: e.code for e in ERRORS if e.typed}

def code_for(exc: BaseException) -> str:
    """The wire code of an exception; "internal_error" for anything unexpected."""
    if isinstance(exc, (Unauthenticated, ProtocolError)):
        return exc.code if exc.code in BY_CODE else "internal_error"
    for cls in type(exc).__mro__:
        code = _TYPED.get(cls)
        if code is not None:
            return code
    return "internal_error"


def status_for(code: str) -> int:
    return BY_CODE[code].status


def bounded_message(message: str) -> str:
    """`message`, cut to MAX_ERROR_MESSAGE characters."""
    return message if len(message) <= MAX_ERROR_MESSAGE else message[:MAX_ERROR_MESSAGE - 1] + "…"


def retry_after(exc: BaseException) -> str | None:
    """The Retry-After of a retryable refusal (Busy) that has a hint: whole seconds, at least 1."""
    hint = exc.retry_after if isinstance(exc, Busy) else None
    if hint is None:
        return None
    return str(max(1, math.ceil(hint)))
