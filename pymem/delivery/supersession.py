"""Changing what is believed without overwriting it: `supersede` and `erase`.

`supersede(old_id, new_record)` never overwrites: the new memory goes through the write gate
like any other (it may be refused, and then nothing changes), and in the same transaction the
old row gets `invalidated_at` (the database's now) and `superseded_by` (the new id); the new
record names the old one (`"supersedes"`) and keeps its kind, tags and scope unless it gives its
own. Both are ledger events (memory.insert and memory.supersede). Search leaves superseded rows
out, so a superseded fact never comes back as current; `recall(..., as_of=...)` before the
change still finds it. Row-level security tags every changed row with its writer, so an operator
who supersedes an agent's memory takes over the old row's tag; a later as-of recall then
withholds it as unproven (its provenance still names the agent).

`erase(id, reason)` removes the content, record and embedding, keeps the content hash (the chain
still verifies) and chains the reason after the memory.erase event (pymem.erase_memory). An
erased memory never returns in a recall, a delivery, an export or the inspector.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import psycopg

from .. import queries
from ..admission.gate import admit
from ..admission.policy import AdmissionPolicy
from ..admission.provenance import Provenance
from ..embedder import Embedder
from ..errors import AccessDenied, InvalidArguments, NotFound
from ..storage.validate import check_id, check_text

if TYPE_CHECKING:  # pragma: no cover
    from ..storage.memories import Memories

__all__ = ["supersede", "erase", "MAX_REASON"]

#: The longest erasure reason (characters), as pymem.erase_memory checks it.
MAX_REASON = 300


def supersede(memories: Memories, old_id: str, new_record: Mapping[str, Any] | str,
              provenance: Provenance | Mapping[str, Any], *, policy: AdmissionPolicy | None = None,
              embedder: Embedder | None = None, conn: psycopg.Connection | None = None) -> dict[str, Any]:
    """Admit `new_record` as the successor of memory `old_id`; returns the admitted record."""
    old_id = check_id(old_id, "old id")
    record = {"content": new_record} if isinstance(new_record, str) else new_record
    if not isinstance(record, Mapping):
        raise InvalidArguments(f"a memory record must be an object or a string, not {type(new_record).__name__}")
    if record.get("supersedes") not in (None, old_id):
        raise InvalidArguments("the new record says it supersedes another memory")
    with memories.store.transaction(memories.ctx, conn) as c:
        old = memories.get_row(old_id, conn=c)
        if old is None or old["erased_at"] is not None:
            raise NotFound(f"no live memory {old_id[:100]!r} in this context")
        if old["invalidated_at"] is not None:
            raise InvalidArguments(f"memory {old_id[:100]!r} was already superseded by {old['superseded_by']!r}")
        successor = {"kind": old["kind"], "tags": list(old["tags"] or []), "scope": old["scope"],
                     **dict(record), "supersedes": old_id}
        # A successor is believed now or not at all: held, it would leave the old memory superseded
        # by nothing anyone can read. One the detector is unsure of is judged as before the
        # quarantine existed (admitted unless refused).
        out = admit(memories, successor, provenance, policy=policy, embedder=embedder, conn=c, hold=False)
        changed = c.execute(queries.query("supersede_memory"), (out["id"], memories.ctx.tenant, old_id)).fetchone()
        if changed is None:
            raise AccessDenied(f"this context may not supersede memory {old_id[:100]!r}")
    return out


def erase(memories: Memories, memory_id: str, reason: str, *, conn: psycopg.Connection | None = None) -> int:
    """Erase a memory's content, record and embedding, keeping its hash; returns the ledger seq
    of the reason's event. NotFound when there is no live memory with that id this context may change."""
    memory_id = check_id(memory_id, "memory id")
    reason = check_text(reason, "reason", max_bytes=4 * MAX_REASON, required=True)
    if not reason.strip() or len(reason) > MAX_REASON:
        raise InvalidArguments(f"an erasure reason must be 1-{MAX_REASON} characters")
    with memories.store.transaction(memories.ctx, conn) as c:
        return int(c.execute(queries.query("erase_memory"), (memory_id, reason)).fetchone()[0])
