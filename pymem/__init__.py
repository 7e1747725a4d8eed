"""pymem: long-term memory for AI agents that lives in Postgres.

The public surface is what this module exports (`__all__`); everything else is implementation,
importable but free to move. The command line uses only this surface (and pymem.tools for
the benchmark and the demo); an import-linter contract in the test suite keeps it so.
"""

from .admission.evaluation import AdmissionEvaluation, HeldOutSource, evaluate_admission
from .admission.gate import admit
from .admission.policy import AdmissionPolicy, OriginRule
from .admission.provenance import Provenance
from .admission.trust import AdapterTrustPolicy
from .config import Settings
from .context import Context, parse_scope_pairs
from .delivery.deliver import Delivery, deliver
from .delivery.envelope import DeliveredItem, DigestEntry
from .delivery.injections import Injection, MemoryInjection, memory_injections, session_injections
from .delivery.inspector import InspectedMemory, inspect_memories, inspect_memory
from .delivery.memories import erase, supersede
from .delivery.ranking import DEFAULT_FLOOR
from .delivery.sessions import (Session, SessionSummary, end_session, erase_session, list_sessions, recall_session,
                                replace_summary, start_session)
from .delivery.tiers import Tier, TierRule, TrustTiers, tier_of
from .delivery.tokens import UNDERCOUNT_MARGIN, ApproxTokenCounter, EncodingCounter, TokenCounter
from .embedder import Embedder, LexicalEmbedder, MiniLMEmbedder, check_dimension, get_embedder
from .errors import (
    AccessDenied,
    ContextError,
    IdempotencyConflict,
    IncognitoSession,
    InvalidArguments,
    MemoryAdmissionError,
    NotFound,
    PymemError,
    RevisionMismatch,
    SchemaError,
    ServerError,
    UnknownSession,
)
from .integrity.audit import HistoryEvent, Refusal, history, refusals
from .integrity.checkpoints import Checkpoint, CheckpointReport, CheckpointSink, FileSink, open_sink
from .integrity.evidence import AnchorResult, ChainAudit, anchor_store, audit_chain
from .integrity.independent import verify_independently
from .integrity.verify import TenantVerification, VerifyReport, verify_chain, verify_store
from .migrate import upgrade_sql
from .recall import RecallResult, RecalledMemory, WithheldMemory, WriteGate, recall
from .storage.bindings import LoginBinding, bind_login, list_bindings, unbind_login
from .storage.endpoints import admin_connection, stop_embedded, upgrade_schema
from .storage.memories import Memories
from .storage.status import DatabaseStatus, database_status
from .storage.store import Store
from .storage.transfer import ImportReport, check_file, export_records, import_file
from .vocabulary import ORIGINS, SURFACES, Origin

__all__ = [
    # opening the store, and the memory verbs
    "Settings", "Store", "Memories", "Context", "parse_scope_pairs",
    # errors
    "PymemError", "InvalidArguments", "ContextError", "AccessDenied", "IdempotencyConflict",
    "RevisionMismatch", "NotFound", "SchemaError", "ServerError", "MemoryAdmissionError", "UnknownSession",
    "IncognitoSession",
    # admission and recall
    "Origin", "ORIGINS", "Provenance", "AdmissionPolicy", "OriginRule", "AdapterTrustPolicy", "admit", "WriteGate",
    "recall", "RecallResult", "RecalledMemory", "WithheldMemory",
    "evaluate_admission", "AdmissionEvaluation", "HeldOutSource",
    "Embedder", "LexicalEmbedder", "MiniLMEmbedder", "get_embedder", "check_dimension",
    # audit and integrity
    "refusals", "history", "Refusal", "HistoryEvent", "verify_store", "verify_chain", "VerifyReport",
    "TenantVerification", "verify_independently", "audit_chain", "ChainAudit", "anchor_store", "AnchorResult",
    "Checkpoint", "CheckpointReport", "CheckpointSink", "FileSink", "open_sink",
    # import and export
    "import_file", "export_records", "check_file", "ImportReport",
    # the database itself
    "upgrade_schema", "upgrade_sql", "database_status", "DatabaseStatus", "stop_embedded", "admin_connection",
    # delivery: sessions, the block an agent receives, its injection record, supersession, erasure
    "SURFACES", "Session", "SessionSummary", "start_session", "end_session", "replace_summary", "list_sessions",
    "recall_session", "erase_session", "deliver", "Delivery", "DeliveredItem", "DigestEntry", "Tier", "TierRule",
    "TrustTiers", "tier_of", "TokenCounter", "ApproxTokenCounter", "EncodingCounter", "UNDERCOUNT_MARGIN",
    "DEFAULT_FLOOR", "session_injections", "memory_injections", "Injection", "MemoryInjection", "supersede", "erase",
    "inspect_memories", "inspect_memory", "InspectedMemory",
    # who may act where
    "bind_login", "unbind_login", "list_bindings", "LoginBinding",
]
