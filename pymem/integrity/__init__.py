"""Integrity: the ledger's audit trail, and what vouches for the chain.

`refusals` and `history` read the audit trail; `verify_store` (and `verify_chain`, one tenant)
runs the database's own chain verification; `verify_independently` recomputes every hash in
Python from the raw rows, never calling the database's functions; `load_or_create_key` keeps the
installation's Ed25519 key outside the database; checkpoints (`open_sink`, `FileSink`) record
signed chain heads in an external sink and `audit_chain` checks the chain still extends them;
`anchor_store` records a new one; `audit_chain(..., since_checkpoint=True)` verifies only what was
written after each tenant's newest checkpoint (an `IncrementalReport`); receipts' signatures are
checked as `ReceiptAudit` findings; `erase_actor` erases a person (the ledger names actors by
pseudonyms whose link it destroys) and leaves the chain verifiable.
"""

from .audit import HistoryEvent, Refusal, history, refusals
from .checkpoints import Checkpoint, CheckpointReport, CheckpointSink, FileSink, open_sink
from .erasure import ActorErasure, erase_actor
from .evidence import AnchorResult, ChainAudit, anchor_store, audit_chain
from .incremental import IncrementalReport
from .independent import verify_independently
from .receipt_audit import ReceiptAudit, ReceiptFinding
from .signing import load_or_create_key
from .verify import TenantVerification, VerifyReport, verify_chain, verify_store

__all__ = ["refusals", "history", "Refusal", "HistoryEvent", "verify_store", "verify_chain", "VerifyReport",
           "TenantVerification", "IncrementalReport", "verify_independently", "audit_chain", "ChainAudit",
           "anchor_store", "AnchorResult", "Checkpoint", "CheckpointReport", "CheckpointSink", "FileSink", "open_sink",
           "ReceiptAudit", "ReceiptFinding", "load_or_create_key", "erase_actor", "ActorErasure"]
