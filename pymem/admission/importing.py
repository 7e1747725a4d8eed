"""An import judged by the write gate's content check: `import_gated`.

`pymem import` is the storage contract's restore: it stores the chunks it is given verbatim, for
a backend that vouches for them. A file of notes from elsewhere should pass the gate like any
other write, and this is that import: each chunk's text is judged as `admit` judges a note
(signatures, the classifier, the quarantine band and the detector's doubts), under the policy in
force. What is instruction-shaped is refused (audited, as the gate audits, and not imported);
what the detector is unsure of is held in the quarantine (pymem.admission.quarantine) under its
id, in the batch's transaction, instead of being imported; the rest is imported as given.

The origin rules are not applied here: a chunk's provenance is the exporting store's record, and
recall re-judges it under the policy in force anyway (no provenance: withheld as unproven).
Re-running an interrupted import replays the batches that committed; a note already held under
its id is not held twice.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg

from ..errors import InvalidArguments
from ..storage.chunks import parse_chunk
from ..storage.transfer import DEFAULT_BATCH, ImportReport, import_file
from ..vocabulary import VECTOR_KEYS
from .judge import Decision, Finding, check_content, digest_of_arguments
from .policy import AdmissionPolicy, admission_policy_in_force
from .provenance import Origin, Provenance
from .quarantine import get_quarantined, hold_row
from .refusals import record_refusal

if TYPE_CHECKING:  # pragma: no cover
    from ..storage.memories import Memories

__all__ = ["import_gated"]


def _provenance(chunk: dict[str, Any]) -> Provenance:
    """The chunk's provenance when it states a valid one, else an unproven one (judged the same)."""
    try:
        return Provenance.from_json(chunk["provenance"]) if isinstance(chunk.get("provenance"), dict) \
            else Provenance(Origin.UNPROVEN)
    except (InvalidArguments, TypeError, ValueError):
        return Provenance(Origin.UNPROVEN)


def _screen(memories: Memories, policy: AdmissionPolicy
            ) -> Callable[[list[dict[str, Any]], psycopg.Connection], tuple[list[dict[str, Any]], int, int]]:
    store = memories.store

    def screen(chunks: list[dict[str, Any]], conn: psycopg.Connection) -> tuple[list[dict[str, Any]], int, int]:
        kept: list[dict[str, Any]] = []
        doubtful: list[tuple[dict[str, Any], Provenance, Finding]] = []
        refusals: list[tuple[dict[str, Any], Provenance, Finding]] = []
        for chunk in chunks:
            provenance = _provenance(chunk)
            found = check_content({k: v for k, v in chunk.items() if k not in VECTOR_KEYS}, provenance, policy)
            if found is None:
                kept.append(chunk)
            else:
                (doubtful if found.hold else refusals).append((chunk, provenance, found))
        # Refusals are chained first, each committed on its own connection: once this batch's
        # transaction holds a note, it holds the tenant's chain head until it commits.
        for chunk, provenance, found in refusals:
            judged = {k: v for k, v in chunk.items() if k not in VECTOR_KEYS}
            record_refusal(store, memories.ctx, origin=provenance.origin.value, source=provenance.source,
                           reason=found.reason, signature=found.name, digest=digest_of_arguments(judged, provenance),
                           policy_fingerprint=policy.fingerprint, score=found.score, piece_digest=found.piece_digest)
        for chunk, provenance, found in doubtful:
            row = parse_chunk(chunk, dim=store.embedding_dim, default_scope=memories.ctx.scope,
                              max_content_bytes=store.settings.max_content_bytes)
            if row.origin is None or row.provenance is None:  # a held note states what it is
                row = dataclasses.replace(row, origin=row.origin or provenance.origin.value,
                                          provenance=row.provenance or provenance.to_json())
            earlier = get_quarantined(memories, row.id, conn=conn)
            if earlier is None or earlier.status != "held":
                decision = Decision(False, found.reason, found.name, row.confidence, provenance.origin,
                                    policy.fingerprint, found.score, found.piece_digest, held=True)
                hold_row(conn, memories.ctx, row, decision)
        return kept, len(doubtful), len(refusals)

    return screen


def import_gated(memories: Memories, path: str | Path, *, policy: AdmissionPolicy | None = None,
                 batch_size: int = DEFAULT_BATCH, on_batch: Callable[[int, int, bool], None] | None = None,
                 checked: tuple[str, int] | None = None) -> ImportReport:
    """Import a JSONL file of chunks (pymem.storage.transfer.import_file), each judged first by the
    write gate's content check: refused ones are audited and skipped, doubtful ones held in the
    quarantine; the report counts both. `policy`: default the store's policy in force."""
    policy = policy if policy is not None else admission_policy_in_force(memories.store.settings)
    return import_file(memories, path, batch_size=batch_size, on_batch=on_batch, checked=checked,
                       screen=_screen(memories, policy))
