"""Typed exceptions. Every error pymem raises on purpose is a subclass of PymemError.

The CLI maps these to messages and exit codes; none of them ever carries memory content or
an embedding in its message.
"""

from __future__ import annotations


class PymemError(Exception):
    """Base class of every error pymem raises on purpose."""

    exit_code = 1


class InvalidArguments(PymemError, ValueError):
    """A call's arguments are malformed: bad vector, scope, id, content, top_k, ..."""

    exit_code = 2


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
