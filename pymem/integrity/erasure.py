"""Erasure of a person: a data-subject request ("forget everything about alice@example.com").

The ledger never holds an actor's id: it records a pseudonym (p:<random token>), and
pymem.actor_pseudonyms is the only link between the two, outside the hash chain. A memory's
subject key (the person it is about, set by its writer) is kept the same way. `erase_actor`
deletes every memory the person wrote or that is about them (each a chained memory.delete
event), deletes their idempotency records (which name them in clear and are not chained), and
destroys the link: the entries that stay name nobody, and the chain, which covers the pseudonym,
still verifies, with `pymem verify` and `pymem verify --independent` alike.

Entries written before pseudonyms (migration 0013) hash the id itself; the migration moved it to
the link table (their actor column reads e:<token>). Erasing such a person checks those entries
while the id is still known, then seals them (a digest of each as it stays) in the actor.erased
event; verification checks them against that seal afterwards.

An operator's act: the context must be untagged (no adapter: a login bound to an adapter always
acts as it) and whole-tenant.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import errors as pgerr

from .. import queries
from ..errors import InvalidArguments, ServerError
from ..storage.validate import check_subject, check_text

if TYPE_CHECKING:  # pragma: no cover
    from ..storage.memories import Memories

__all__ = ["ActorErasure", "erase_actor", "MAX_REASON"]

#: The longest erasure reason (characters), as pymem.erase_actor checks it.
MAX_REASON = 300


@dataclass(frozen=True)
class ActorErasure:
    """What one erasure of a person did: memories deleted, idempotency records deleted, ledger
    entries that now name nobody (those from before pseudonyms among them, sealed), and the seq of
    the actor.erased event."""

    memories: int
    idempotency_keys: int
    ledger_entries: int
    legacy_entries: int
    seq: int

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def erase_actor(memories: Memories, actor: str, reason: str, *, conn: psycopg.Connection | None = None) -> ActorErasure:
    """Erase a person from the context tenant (see the module docstring); the reason, kept in the
    ledger, must not name them. AccessDenied for a context acting as an adapter or confined to a
    scope or a read allow-list; InvalidArguments for a bad id or reason (nothing is erased)."""
    actor = check_subject(actor, "actor") or ""
    if not actor:
        raise InvalidArguments("actor must be the id of the person to erase")
    reason = check_text(reason, "reason", max_bytes=4 * MAX_REASON, required=True)
    if not reason.strip() or len(reason) > MAX_REASON:
        raise InvalidArguments(f"an erasure reason must be 1-{MAX_REASON} characters")
    if actor.lower() in reason.lower():
        raise InvalidArguments("the erasure reason must not name the person (it stays in the ledger)")
    if actor == memories.ctx.actor:
        raise InvalidArguments("a context cannot erase its own actor: erase them from another actor's context")
    try:
        with memories.store.transaction(memories.ctx, conn) as c:
            row = c.execute(queries.query("erase_actor"), (actor, reason)).fetchone()
    except pgerr.DataCorrupted as exc:
        raise ServerError(f"{exc.diag.message_primary}") from None
    return ActorErasure(*(int(v) for v in row))
