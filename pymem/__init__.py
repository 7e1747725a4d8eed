"""pymem: long-term memory for AI agents that lives in Postgres.

The core is what this module exports (`__all__`): opening a store, writing through the admission
gate, recalling under the policy in force now, delivering a session's block, and the errors a
caller catches. Everything else public lives in a documented subpackage, each with its own
`__all__`:

- pymem.errors: every error pymem raises on purpose;
- pymem.admission: origin rules, adapter trust, the write gate, the admission evaluation;
- pymem.delivery: sessions, trust tiers, token counters, injection records, the inspector;
- pymem.lessons, pymem.conventions, pymem.facts: lessons, convention receipts, shared facts;
- pymem.integrity: the ledger's audit, verification, signed checkpoints;
- pymem.embedder: the embedders; pymem.vocabulary: the constants (origins, surfaces, limits);
- pymem.admin: login bindings, schema upgrades, the embedded server, database status, the
  signing key's registration, import and export.

The memory service's names (SERVICE_NAMES: `serve`, `serve_inspector`, `build_app`, `serve_mcp_stdio`,
`mint_token`, `TokenVerifier`) need the `server` extra and load on first use, so `import pymem` never needs it.
`import pymem` loads no migration machinery (Alembic, SQLAlchemy) either: pymem.admin does, when
a schema is upgraded.
"""

import importlib
from typing import Any

from .admission.gate import admit
from .admission.policy import AdmissionPolicy
from .admission.provenance import Provenance
from .config import Settings
from .context import Context
from .delivery.deliver import Delivery, deliver
from .delivery.envelope import DeliveredItem
from .delivery.sessions import Session, end_session, start_session
from .delivery.supersession import erase, supersede
from .embedder import Embedder, get_embedder
from .errors import (
    AccessDenied,
    Busy,
    ContextError,
    EmbedderMismatch,
    InvalidArguments,
    MemoryAdmissionError,
    NotFound,
    PymemError,
)
from .integrity.verify import VerifyReport, verify_store
from .recall import RecalledMemory, RecallResult, WithheldMemory, recall
from .storage.memories import Memories
from .storage.reembed import reembed
from .storage.store import Store
from .vocabulary import Origin

#: The installed version (the same as the distribution's; a test keeps them equal).
__version__ = "0.1.0"

__all__ = [
    "__version__",
    # opening the store
    "Store", "Memories", "Context", "Settings",
    # writing through the gate, and recalling under the policy in force now
    "Provenance", "Origin", "AdmissionPolicy", "admit", "recall", "RecallResult", "RecalledMemory",
    "WithheldMemory",
    # the block a session's prompt receives
    "deliver", "Delivery", "DeliveredItem", "start_session", "end_session", "Session", "supersede", "erase",
    # embeddings
    "reembed", "Embedder", "get_embedder",
    # the chain
    "verify_store", "VerifyReport",
    # the errors a caller catches (every error: pymem.errors)
    "PymemError", "InvalidArguments", "ContextError", "AccessDenied", "NotFound", "MemoryAdmissionError", "Busy",
    "EmbedderMismatch",
]

# name -> the module that holds it; loaded on first use (they need the `server` extra).
SERVICE_NAMES = {
    "serve": "pymem.server.run",
    "serve_inspector": "pymem.server.run",
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
        raise ImportError(f"pymem.{name} needs the server extra: pip install 'pymem-pg[server]' "
                          f"({exc.name} is not installed)") from exc
    globals()[name] = value
    return value
