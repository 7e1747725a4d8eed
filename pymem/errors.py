"""Typed exceptions. Every error pymem raises on purpose is a subclass of PymemError.

The CLI maps these to messages and exit codes; none of them ever carries memory content or
an embedding in its message.
"""

from __future__ import annotations

__all__ = [
    "PymemError",
    "InvalidArguments",
    "EmbedderMismatch",
    "ContextError",
    "IdempotencyConflict",
    "RevisionMismatch",
    "NotFound",
    "AccessDenied",
    "Unauthenticated",
    "SchemaError",
    "ServerError",
    "ClusterUnavailable",
    "Busy",
    "LockTimeout",
    "StatementTimeout",
    "TransactionConflict",
    "PoolExhausted",
    "TenantBusy",
    "MemoryAdmissionError",
    "UnknownSession",
    "IncognitoSession",
    "ConventionConflict",
]


class PymemError(Exception):
    """Base class of every error pymem raises on purpose."""

    exit_code = 1


class InvalidArguments(PymemError, ValueError):
    """A call's arguments are malformed: bad vector, scope, id, content, top_k, ..."""

    exit_code = 2


class EmbedderMismatch(InvalidArguments):
    """The embedder a call would use is not the one the store's vectors were written with (or
    not of its dimension): mixing two would compare vectors from different spaces."""


class ContextError(InvalidArguments):
    """The per-transaction context (tenant, actor, adapter, scope) is missing or malformed."""


class IdempotencyConflict(PymemError):
    """An idempotency key was reused with a different payload."""


class RevisionMismatch(PymemError):
    """An optimistic-locking check failed: a stored revision is not the expected one."""


class NotFound(PymemError):
    """A memory that the call needs does not exist (or is not visible in this context)."""


class AccessDenied(PymemError):
    """Postgres refused the write: row-level security (tenant, scope or adapter) or privileges."""


class Unauthenticated(PymemError):
    """A service call's credentials are missing or not acceptable: no token, a malformed one, a bad
    signature, a refused algorithm, expired or not yet valid, another audience or issuer, or claims
    that do not make a context. `code` names which, in a stable word (e.g. "token_expired")."""

    exit_code = 2

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


class SchemaError(PymemError):
    """The database schema is missing, behind the installed pymem, or was created differently."""


class ServerError(PymemError):
    """The database cannot be reached or the embedded server cannot start."""

    exit_code = 2


class ClusterUnavailable(ServerError):
    """The server has no Citus: a store can be distributed (`pymem db distribute`) only on a
    Citus coordinator. Nothing was changed. (An administrator's command: the service never
    raises it, and would answer it as the ServerError it is.)"""


class Busy(PymemError):
    """The call could not run now and nothing was written; the same call may succeed when retried.

    `retry_after` is a hint in seconds (None: no hint). The CLI exits with 75 (EX_TEMPFAIL), the
    service answers a stable code per cause with a Retry-After header where it has a hint."""

    exit_code = 75

    def __init__(self, message: str, *, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


class LockTimeout(Busy):
    """A lock the call needs was not granted within the lock timeout (another transaction holds
    it); the call's transaction was rolled back."""


class StatementTimeout(Busy):
    """A statement of the call ran longer than the statement timeout and was cancelled; the
    call's transaction was rolled back."""


class TransactionConflict(Busy):
    """The call's transaction collided with a concurrent one (a deadlock or a serialization
    failure) and was rolled back; retrying it is safe."""


class PoolExhausted(Busy):
    """No database connection came free within the pool wait."""


class TenantBusy(Busy):
    """The tenant already runs as many concurrent calls as the service allows one tenant."""


class MemoryAdmissionError(PymemError):
    """The write gate refused a record. Raised only after the refusal's audit event committed.

    `signature` names what decided (a signature, `classifier.v1` or a structural signal);
    `score` is the classifier's score when it decided."""

    def __init__(self, reason: str, *, signature: str | None = None, audit_seq: int | None = None,
                 score: float | None = None):
        super().__init__(reason)
        self.reason = reason
        self.signature = signature
        self.audit_seq = audit_seq
        self.score = score


class UnknownSession(MemoryAdmissionError):
    """A write or a delivery named a session that was never started in this tenant (or that this
    context cannot see). Refused, never pooled into a catch-all session; a refused write is
    audited first, like any admission refusal (`audit_seq`)."""


class IncognitoSession(MemoryAdmissionError):
    """The session is incognito: nothing from it is stored (no memory, no summary, no injection
    record), and the database refuses it too. Nothing is audited: an audit record would be
    something stored."""


class ConventionConflict(PymemError):
    """A review correction contradicts a rule in force; nothing was filed. Names both receipts:
    the one the correction would have become and the one in force."""

    def __init__(self, message: str, *, receipt_id: str, conflicting_id: str):
        super().__init__(message)
        self.receipt_id = receipt_id
        self.conflicting_id = conflicting_id
