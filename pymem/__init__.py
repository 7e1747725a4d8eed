"""pymem: long-term memory for AI agents that lives in Postgres.

The public surface is what this module exports (`__all__`); everything else is implementation,
importable but free to move. The command line uses only this surface (and pymem.tools for
the benchmark and the demo); an import-linter contract in the test suite keeps it so.

The memory service's names (SERVICE_NAMES: `serve`, `build_app`, `serve_mcp_stdio`, `mint_token`,
`TokenVerifier`) need the `server` extra and load on first use, so `import pymem` never needs it.
"""

import importlib
from typing import Any

from .admission.evaluation import AdmissionEvaluation, HeldOutSource, evaluate_admission
from .admission.gate import admit
from .admission.policy import AdmissionPolicy, OriginRule
from .admission.provenance import Provenance
from .admission.trust import AdapterTrustPolicy
from .config import Settings
from .context import Context, parse_scope_pairs
from .conventions import (
    ActiveConventions,
    Convention,
    ConventionCheck,
    FiledCorrection,
    active_conventions,
    check_conventions,
    file_review_correction,
    retire_convention,
)
from .conventions.signing_key import register_signing_key, registered_signing_key
from .delivery.deliver import Delivery, deliver
from .delivery.envelope import DeliveredItem, DeliveredLesson, DigestEntry
from .delivery.injections import Injection, MemoryInjection, memory_injections, session_injections
from .delivery.inspector import InspectedMemory, inspect_memories, inspect_memory
from .delivery.memories import erase, supersede
from .delivery.ranking import DEFAULT_FLOOR
from .delivery.sessions import (
    Session,
    SessionSummary,
    end_session,
    erase_session,
    list_sessions,
    recall_session,
    replace_summary,
    start_session,
)
from .delivery.tiers import Tier, TierRule, TrustTiers, tier_of
from .delivery.tokens import UNDERCOUNT_MARGIN, ApproxTokenCounter, EncodingCounter, TokenCounter
from .embedder import E5SmallEmbedder, Embedder, LexicalEmbedder, MiniLMEmbedder, check_dimension, get_embedder
from .errors import (
    AccessDenied,
    Busy,
    ContextError,
    ConventionConflict,
    EmbedderMismatch,
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
    UnknownSession,
)
from .facts import Fact, FactStream, follow, publish, subscribe
from .integrity.audit import HistoryEvent, Refusal, history, refusals
from .integrity.checkpoints import Checkpoint, CheckpointReport, CheckpointSink, FileSink, open_sink
from .integrity.evidence import AnchorResult, ChainAudit, anchor_store, audit_chain
from .integrity.independent import verify_independently
from .integrity.receipts import ReceiptAudit, ReceiptFinding
from .integrity.signing import load_or_create_key
from .integrity.verify import TenantVerification, VerifyReport, verify_chain, verify_store
from .lessons import (
    FiledLesson,
    Lesson,
    LessonCache,
    LessonsForTask,
    deliver_with_lessons,
    excluded_roles,
    file_lesson,
    lessons_for_task,
    list_lessons,
)
from .migrate import upgrade_sql
from .recall import RecalledMemory, RecallResult, WithheldMemory, WriteGate, recall
from .storage.bindings import LoginBinding, bind_login, list_bindings, unbind_login
from .storage.endpoints import admin_connection, stop_embedded, upgrade_schema
from .storage.memories import Memories
from .storage.reembed import ReembedReport, reembed
from .storage.status import DatabaseStatus, database_status
from .storage.store import Store
from .storage.transfer import ImportReport, check_file, export_records, import_file
from .vocabulary import LESSON_HALF_LIVES, LESSON_TYPES, ORIGINS, SURFACES, Origin

__all__ = [
    # opening the store, and the memory verbs
    "Settings", "Store", "Memories", "Context", "parse_scope_pairs", "reembed", "ReembedReport",
    # errors
    "PymemError", "InvalidArguments", "ContextError", "AccessDenied", "IdempotencyConflict",
    "RevisionMismatch", "NotFound", "SchemaError", "ServerError", "MemoryAdmissionError", "UnknownSession",
    "IncognitoSession", "EmbedderMismatch", "ConventionConflict", "Busy", "LockTimeout", "StatementTimeout",
    "TransactionConflict",
    "PoolExhausted", "TenantBusy",
    # admission and recall
    "Origin", "ORIGINS", "Provenance", "AdmissionPolicy", "OriginRule", "AdapterTrustPolicy", "admit", "WriteGate",
    "recall", "RecallResult", "RecalledMemory", "WithheldMemory",
    "evaluate_admission", "AdmissionEvaluation", "HeldOutSource",
    "Embedder", "E5SmallEmbedder", "LexicalEmbedder", "MiniLMEmbedder", "get_embedder", "check_dimension",
    # audit and integrity
    "refusals", "history", "Refusal", "HistoryEvent", "verify_store", "verify_chain", "VerifyReport",
    "TenantVerification", "verify_independently", "audit_chain", "ChainAudit", "anchor_store", "AnchorResult",
    "Checkpoint", "CheckpointReport", "CheckpointSink", "FileSink", "open_sink", "ReceiptAudit", "ReceiptFinding",
    # import and export
    "import_file", "export_records", "check_file", "ImportReport",
    # the database itself
    "upgrade_schema", "upgrade_sql", "database_status", "DatabaseStatus", "stop_embedded", "admin_connection",
    # delivery: sessions, the block an agent receives, its injection record, supersession, erasure
    "SURFACES", "Session", "SessionSummary", "start_session", "end_session", "replace_summary", "list_sessions",
    "recall_session", "erase_session", "deliver", "Delivery", "DeliveredItem", "DigestEntry", "Tier", "TierRule",
    "TrustTiers", "tier_of", "TokenCounter", "ApproxTokenCounter", "EncodingCounter", "UNDERCOUNT_MARGIN",
    "DEFAULT_FLOOR", "session_injections", "memory_injections", "Injection", "MemoryInjection", "supersede", "erase",
    "inspect_memories", "inspect_memory", "InspectedMemory", "DeliveredLesson",
    # lessons: filed through the gate, decayed at read time, ranked into a task's block
    "LESSON_TYPES", "LESSON_HALF_LIVES", "file_lesson", "list_lessons", "lessons_for_task", "Lesson", "FiledLesson",
    "LessonsForTask", "LessonCache", "excluded_roles", "deliver_with_lessons",
    # convention receipts: signed, commit-pinned review rules
    "file_review_correction", "active_conventions", "retire_convention", "check_conventions", "Convention",
    "FiledCorrection", "ActiveConventions", "ConventionCheck", "register_signing_key", "registered_signing_key",
    "load_or_create_key",
    # facts shared between the tasks of a run
    "publish", "subscribe", "follow", "Fact", "FactStream",
    # who may act where
    "bind_login", "unbind_login", "list_bindings", "LoginBinding",
]

# name -> the module that holds it; loaded on first use (they need the `server` extra).
SERVICE_NAMES = {
    "serve": "pymem.server.run",
    "build_app": "pymem.server.app",
    "serve_mcp_stdio": "pymem.mcp.stdio",
    "mint_token": "pymem.service.auth",
    "TokenVerifier": "pymem.service.auth",
}


def __getattr__(name: str) -> Any:
    module = SERVICE_NAMES.get(name)
    if module is None:
        raise AttributeError(f"module 'pymem' has no attribute {name!r}")
    try:
        value = getattr(importlib.import_module(module), name)
    except ModuleNotFoundError as exc:
        if (exc.name or "").startswith("pymem"):
            raise
        raise ImportError(f"pymem.{name} needs the server extra: pip install 'pymem[server]' "
                          f"({exc.name} is not installed)") from exc
    globals()[name] = value
    return value
