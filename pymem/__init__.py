"""pymem: long-term memory for AI agents that lives in Postgres."""

from .context import Context
from .errors import (
    AccessDenied,
    ContextError,
    IdempotencyConflict,
    InvalidArguments,
    MemoryAdmissionError,
    NotFound,
    PymemError,
    RevisionMismatch,
    SchemaError,
    ServerError,
)
from .storage.store import Memories, Store

__all__ = [
    "Context", "Store", "Memories",
    "PymemError", "InvalidArguments", "ContextError", "AccessDenied", "IdempotencyConflict",
    "RevisionMismatch", "NotFound", "SchemaError", "ServerError", "MemoryAdmissionError",
]
