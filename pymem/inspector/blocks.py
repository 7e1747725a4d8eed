"""A delivered turn's block, rendered again from its injection record's ids, and checked against
the sha256 the record chained.

The record names the memories of each section and the sessions of the digest, never the text;
the rows still hold it. Rendered with the same envelope (pymem.delivery.envelope) from the rows
as they are now, a block whose memories, sessions and trust tiers have not changed since comes
out byte for byte as the agent received it, and its sha256 matches the record's: the page can
then say "this is exactly what the turn received". When it does not match, the page says what
could have changed (a memory erased since, its text gone; the tiers in force; a block with
lessons, whose confidence decays with time) and shows the sections from the recorded ids.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import psycopg

from ..delivery.envelope import DeliveredItem, DigestEntry, render
from ..delivery.injections import Injection
from ..delivery.tiers import tier_of, tiers_in_force
from ..delivery.topics import topic_is_safe
from ..recall import event_time
from ..storage.memories import Memories
from ..storage.session_rows import SessionRow, session_row

__all__ = ["Rerendered", "rerender"]


@dataclass(frozen=True)
class Rerendered:
    """The block rendered again (None when it cannot be), whether its sha256 is the recorded one,
    and why not when it is not."""

    text: str | None
    matches: bool
    why_not: str | None = None


def _sessions(c: psycopg.Connection, tenant: str, ids: set[str]) -> dict[str, SessionRow]:
    found = {sid: session_row(c, tenant, sid) for sid in sorted(ids)}
    return {sid: row for sid, row in found.items() if row is not None}


def rerender(mem: Memories, record: Injection) -> Rerendered:
    """Render the block of `record` again in `mem`'s context and compare its sha256."""
    if record.lesson_ids:
        return Rerendered(None, False, "the block holds lessons, whose confidence decays with time: "
                                       "it is shown by its recorded ids")
    tiers = tiers_in_force(mem.store.settings)
    hot_ids = set(record.hot_ids)
    with mem.store.transaction(mem.ctx, snapshot=True) as c:
        rows = {i: mem.get_row(i, conn=c) for i in record.memory_ids}
        gone = [i for i, row in rows.items() if row is None or row["erased_at"] is not None]
        if gone:
            return Rerendered(None, False, f"{len(gone)} of its memories were erased since (or are not visible "
                                           "to this token): their text is gone")
        wanted = set(record.digest_sessions)
        for row in rows.values():
            provenance = row["provenance"] if row is not None else None
            session = provenance.get("session_id") if isinstance(provenance, dict) else None
            if isinstance(session, str):
                wanted.add(session)
        sessions = _sessions(c, mem.ctx.tenant, wanted)
    if any(s not in sessions for s in record.digest_sessions):
        return Rerendered(None, False, "a session of its digest was erased since (or is not visible to this token)")

    def item(memory_id: str) -> DeliveredItem:
        row = rows[memory_id]
        assert row is not None
        provenance = row["provenance"] if isinstance(row["provenance"], dict) else None
        session = provenance.get("session_id") if provenance else None
        session = session if isinstance(session, str) else None
        started = sessions[session].started_at if session in sessions else None
        return DeliveredItem(section="hot" if memory_id in hot_ids else "recalled", id=memory_id,
                             created_at=row["created_at"], session_id=session, session_started_at=started,
                             origin=row["origin"],
                             tier=tier_of(row["origin"], provenance, source_adapter=row["source_adapter"]).value,
                             text=row["content"] or "", event_at=event_time(row["record"]))

    def entry(sid: str) -> DigestEntry:
        s = sessions[sid]
        # the digest line shows the end only of a session that had ended when the turn was delivered
        ended = s.ended_at if s.ended_at is not None and s.ended_at <= record.occurred_at else None
        topic = s.topic if s.topic is not None and topic_is_safe(s.topic) else None
        return DigestEntry(sid, s.started_at, ended, s.surface, topic)

    hot = [item(i) for i in record.hot_ids]
    recalled = [item(i) for i in record.memory_ids if i not in hot_ids]
    digest = [entry(s) for s in record.digest_sessions]
    total = len(hot) + len(recalled) + len(digest) + record.truncated
    # the record does not say whether the block had a lessons section: with none filed, it read "(none)"
    no_lessons: list[list[Any] | None] = [None, []]
    texts = [render(digest, hot, recalled, lessons=lessons, omitted=record.truncated, total=total,
                    budget=record.budget) for lessons in no_lessons]
    for text in texts:
        if hashlib.sha256(text.encode("utf-8")).hexdigest() == record.block_sha256:
            return Rerendered(text, True)
    why = ("the trust tiers in force are not those of the turn" if record.tiers_fingerprint != tiers.fingerprint
           else "something it shows changed since the turn (a session's topic, a tier's rule)")
    return Rerendered(texts[0], False, why)
