"""The memory inspector: what a tenant remembers, where each memory came from, and where it went.

`inspect_memories` lists the live memories of the context (newest first; superseded ones on
request), each with its tier, session, hot flag and supersession; `inspect_memory` shows one in
full: its text, provenance, ledger history (pymem.memory_history) and every turn it was injected
into (pymem.memory_injections). Erased memories never appear: their content is gone, and their
history stays readable through `pymem audit history`. Sessions are inspected with
pymem.delivery.sessions (list, recall, erase) and what a turn saw with
pymem.delivery.injections.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg.rows import dict_row

from .. import queries
from ..errors import InvalidArguments, NotFound
from ..integrity.audit import HistoryEvent, history
from ..storage.validate import check_id
from ..vocabulary import HOT_TAG
from .injections import MemoryInjection, memory_injections
from .tiers import tier_of

if TYPE_CHECKING:  # pragma: no cover
    from ..storage.memories import Memories

__all__ = ["InspectedMemory", "inspect_memories", "inspect_memory"]


@dataclass(frozen=True)
class InspectedMemory:
    """One memory as the inspector shows it: its text, origin, tier and provenance, and the turns it was injected
    into."""

    id: str
    kind: str
    text: str | None
    origin: str | None
    tier: str
    session_id: str | None
    hot: bool
    source_adapter: str | None
    confidence: float | None
    created_at: _dt.datetime
    valid_from: _dt.datetime
    invalidated_at: _dt.datetime | None
    superseded_by: str | None
    revision: int
    provenance: dict[str, Any] | None = None
    history: list[HistoryEvent] = field(default_factory=list)
    injections: list[MemoryInjection] = field(default_factory=list)

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> InspectedMemory:
        provenance = row["provenance"] if isinstance(row["provenance"], dict) else None
        session = provenance.get("session_id") if provenance else None
        return cls(id=row["id"], kind=row["kind"], text=row["content"], origin=row["origin"],
                   tier=tier_of(row["origin"], provenance, source_adapter=row["source_adapter"]).value,
                   session_id=session if isinstance(session, str) else None, hot=HOT_TAG in (row["tags"] or []),
                   source_adapter=row["source_adapter"], confidence=row["confidence"], created_at=row["created_at"],
                   valid_from=row["valid_from"], invalidated_at=row["invalidated_at"],
                   superseded_by=row["superseded_by"], revision=row["revision"], provenance=provenance)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        for key in ("created_at", "valid_from", "invalidated_at"):
            out[key] = out[key].isoformat() if out[key] else None
        out["history"] = [h.to_json() for h in self.history]
        out["injections"] = [i.to_json() for i in self.injections]
        return out


def inspect_memories(memories: Memories, *, session_id: str | None = None, hot_only: bool = False,
                     include_superseded: bool = False, limit: int = 100,
                     conn: psycopg.Connection | None = None) -> list[InspectedMemory]:
    """The context's live memories, newest first: of one session, only hot ones, superseded ones too."""
    if session_id is not None:
        check_id(session_id, "session id")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 10_000:
        raise InvalidArguments("limit must be an integer between 1 and 10000")
    with memories.store.transaction(memories.ctx, conn) as c, c.cursor(row_factory=dict_row) as cur:
        cur.execute(queries.query("inspect_memories"),
                    (memories.ctx.tenant, bool(include_superseded), session_id, session_id, bool(hot_only), limit))
        return [InspectedMemory.from_row(r) for r in cur.fetchall()]


def inspect_memory(memories: Memories, memory_id: str, *, conn: psycopg.Connection | None = None) -> InspectedMemory:
    """One live memory in full, with its ledger history and the turns it entered."""
    memory_id = check_id(memory_id, "memory id")
    row = memories.get_row(memory_id, conn=conn)
    if row is None or row["erased_at"] is not None:
        raise NotFound(f"no live memory {memory_id[:100]!r} in this context")
    inspected = InspectedMemory.from_row(row)
    return InspectedMemory(**{**{f: getattr(inspected, f) for f in inspected.__dataclass_fields__},
                              "history": history(memories, memory_id, conn=conn),
                              "injections": memory_injections(memories, memory_id, conn=conn)})
