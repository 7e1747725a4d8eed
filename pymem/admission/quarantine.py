"""The quarantine: the write gate's third decision, between admitting and refusing a note.

A note the detector is unsure of (pymem.admission.judge.doubt: a classifier score in the
policy's quarantine band, or a doubt the detector names) is *held*: written to
`pymem.quarantine`, durable and chained (`quarantine.held`, with the reason, the deciding name
and the score, never the content), stamped with the provenance the gate would have given it.
It is in no table a read path reads: search, recall, a session's delivery, the LangGraph store
and export read pymem.memories, so a held note reaches no prompt. Reading it is asking for it
explicitly (`list_quarantined`, `get_quarantined`).

An operator context (no adapter) decides it: `release_quarantined` writes it into memories as
its writer wrote it (`memory.insert`, then `quarantine.released`), `reject_quarantined` drops its content
(`quarantine.rejected`); both need a reason, which is chained. Postgres refuses either to a
context acting as an adapter (every bound agent login is one), so the agent that wrote a note
cannot release it (pymem.release_quarantined, pymem.reject_quarantined in sql/schema.sql).

`Admission` is the gate's decision in the one shape every surface reports:
`{"decision": "admitted" | "quarantined" | "refused", "reason", "signature", "score",
"audit_seq", "id", "origin", "confidence", "policy_fingerprint", "provenance"}`.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import psycopg
from pgvector import Vector
from psycopg import errors as pgerr
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from .. import queries
from ..context import Context
from ..errors import InvalidArguments, MemoryAdmissionError
from ..storage.rows import MemoryRow
from ..storage.validate import check_id, check_text
from .judge import ADMITTED, REFUSED, Decision

if TYPE_CHECKING:  # pragma: no cover
    from ..storage.memories import Memories

__all__ = ["Admission", "AdmittedRecord", "QuarantinedNote", "hold", "hold_row", "list_quarantined", "get_quarantined",
           "release_quarantined", "reject_quarantined", "admission_of", "written", "STATUSES", "MAX_DECISION_REASON"]

#: A held note's states: held (waiting for an operator), released (now a memory), rejected.
STATUSES = ("held", "released", "rejected")
#: Longest reason an operator may give for a release or a rejection (it is chained).
MAX_DECISION_REASON = 300
#: Most notes one listing returns.
MAX_LIST = 1000


@dataclass(frozen=True)
class Admission:
    """What the write gate decided about one note, as every surface reports it.

    `decision` is "admitted", "quarantined" or "refused"; `reason` says why (never content);
    `signature` names what decided (a signature, `classifier.v1`, a signal or a doubt) and
    `score` is the classifier's score when it ran. `audit_seq` is the ledger event of a refusal
    or a hold (an admitted note's record is its memory.insert). `id`, `origin`, `confidence` and
    `policy_fingerprint` and `provenance` are the note's as written (None for a refusal)."""

    decision: str
    reason: str
    signature: str | None = None
    score: float | None = None
    audit_seq: int | None = None
    id: str | None = None
    origin: str | None = None
    confidence: float | None = None
    policy_fingerprint: str | None = None
    provenance: Mapping[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {"decision": self.decision, "reason": self.reason, "signature": self.signature, "score": self.score,
                "audit_seq": self.audit_seq, "id": self.id, "origin": self.origin, "confidence": self.confidence,
                "policy_fingerprint": self.policy_fingerprint,
                "provenance": dict(self.provenance) if self.provenance is not None else None}

    @classmethod
    def refused(cls, exc: MemoryAdmissionError) -> Admission:
        """A refusal (the exception the gate raised after auditing it) in the one shape."""
        return cls(REFUSED, exc.reason, exc.signature, exc.score, exc.audit_seq)


class AdmittedRecord(dict[str, Any]):
    """The record `admit` returns (the caller's fields plus id, origin, provenance, confidence,
    policy fingerprint), carrying the gate's `admission` beside it: the decision is not a key of
    the record, which belongs to the caller."""

    admission: Admission


def admission_of(record: Mapping[str, Any]) -> Admission:
    """The gate's decision on a record `admit` returned (an admitted one when the record does not
    carry it: a record written before the quarantine existed was admitted)."""
    found = getattr(record, "admission", None)
    if isinstance(found, Admission):
        return found
    return Admission(ADMITTED, f"admitted: {record.get('origin')}", id=record.get("id"), origin=record.get("origin"),
                     confidence=record.get("confidence"), policy_fingerprint=record.get("policy_fingerprint"),
                     provenance=record.get("provenance"))


def written(record: Mapping[str, Any], decision: Decision, audit_seq: int | None = None) -> AdmittedRecord:
    """`record` (as written) carrying the gate's decision on it."""
    out = AdmittedRecord(record)
    out.admission = Admission(decision.decision, decision.reason, decision.signature, decision.score, audit_seq,
                              record.get("id"), record.get("origin"), record.get("confidence"),
                              record.get("policy_fingerprint"), record.get("provenance"))
    return out


def hold(memories: Memories, row: Mapping[str, Any], decision: Decision, *,
         conn: psycopg.Connection | None = None) -> int | None:
    """Write the row the gate built for a note it holds into pymem.quarantine, in the caller's
    transaction (as `admit` writes an admitted one); returns the seq of its quarantine.held event.
    InvalidArguments when the id is already a memory's or a held note's (nothing written)."""
    prepared = memories.prepare_row(row)  # the one validator of memory rows (pymem.storage.rows)
    with memories.store.transaction(memories.ctx, conn) as c:
        return hold_row(c, memories.ctx, prepared, decision)


def hold_row(conn: psycopg.Connection, ctx: Context, row: MemoryRow, decision: Decision) -> int | None:
    """Write one checked row into pymem.quarantine on `conn` (whose transaction carries `ctx`);
    returns the seq of its quarantine.held event. The row's ttl and subject are held with it (the
    database keeps the subject's pseudonym and refuses a ttl above the tenant's maximum); released,
    the memory expires ttl after the release. For writers that build their own rows (the
    LangGraph store); `hold` is this for a gate's row."""
    assert decision.held, "only a held decision is written to the quarantine"
    params = (ctx.tenant, row.id, Jsonb(row.scope), row.kind, row.content,
              Jsonb(row.record) if row.record is not None else None,
              Vector(row.embedding) if row.embedding is not None else None, row.tags,
              row.importance, row.confidence, row.origin, ctx.adapter,
              Jsonb(row.provenance), row.injection_source, row.policy_fingerprint, row.embedder, row.ttl, row.subject,
              decision.reason[:MAX_DECISION_REASON], decision.signature, decision.score, decision.piece_digest)
    try:
        with conn.transaction():  # a savepoint: a refused id leaves the caller's transaction usable
            conn.execute(queries.query("hold_note"), params)
    except pgerr.UniqueViolation:
        raise InvalidArguments(f"a memory with id {row.id[:100]!r} already exists, or a note held under it "
                               "waits for review") from None
    seq = conn.execute(queries.query("held_event_seq"), (ctx.tenant, row.id)).fetchone()
    return int(seq[0]) if seq and seq[0] is not None else None


@dataclass(frozen=True)
class QuarantinedNote:
    """One held (or decided) note, as an operator reviews it: its reason, name and score, the
    provenance the gate stamped, and its content while it is held (None once decided). `ttl` is
    the writer's (None: the tenant's default, from the release on), `subject` the pseudonym of the
    person it is about; `held_by` and `decided_by` name the actors as the audit views do (their
    pseudonym once that person was erased). `erased_at` is set when pymem.erase_actor erased the
    person who wrote it or whom it is about: its content, tags and provenance details are gone."""

    id: str
    status: str
    reason: str
    signature: str | None
    score: float | None
    piece_digest: str | None
    origin: str
    source_adapter: str | None
    scope: dict[str, str]
    kind: str
    content: str | None
    tags: list[str]
    confidence: float | None
    provenance: dict[str, Any]
    policy_fingerprint: str | None
    ttl: _dt.timedelta | None
    subject: str | None
    held_at: _dt.datetime
    held_by: str | None
    decided_at: _dt.datetime | None
    decided_by: str | None
    decision_reason: str | None
    erased_at: _dt.datetime | None

    def to_json(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in self.__dataclass_fields__}
        for key in ("held_at", "decided_at", "erased_at"):
            value = out[key]
            out[key] = value.isoformat() if value is not None else None
        out["ttl"] = self.ttl.total_seconds() if self.ttl is not None else None
        return out


def _note(row: Mapping[str, Any]) -> QuarantinedNote:
    fields: dict[str, Any] = dict(row)
    fields["tags"] = list(fields["tags"] or [])
    return QuarantinedNote(**fields)


def list_quarantined(memories: Memories, *, status: str | None = "held", limit: int = 100,
                     conn: psycopg.Connection | None = None) -> list[QuarantinedNote]:
    """The quarantined notes this context may read (its tenant, scope and allow-list), oldest
    first: those still held by default, or those of `status` (None: every status)."""
    if status is not None and status not in STATUSES:
        raise InvalidArguments(f"status must be one of {', '.join(STATUSES)} (or None for all)")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIST:
        raise InvalidArguments(f"limit must be an integer in [1, {MAX_LIST}]")
    with memories.store.transaction(memories.ctx, conn) as c, c.cursor(row_factory=dict_row) as cur:
        cur.execute(queries.query("quarantined_notes"), (memories.ctx.tenant, status, status, limit))
        return [_note(r) for r in cur.fetchall()]


def get_quarantined(memories: Memories, note_id: str, *,
                    conn: psycopg.Connection | None = None) -> QuarantinedNote | None:
    """One quarantined note this context may read, or None."""
    note_id = check_id(note_id, "id")
    with memories.store.transaction(memories.ctx, conn) as c, c.cursor(row_factory=dict_row) as cur:
        cur.execute(queries.query("quarantined_note"), (memories.ctx.tenant, note_id))
        row = cur.fetchone()
    return _note(row) if row is not None else None


def _check_reason(reason: Any) -> str:
    text = check_text(reason, "reason", max_bytes=4 * MAX_DECISION_REASON, required=True)
    assert text is not None
    if not text.strip() or len(text) > MAX_DECISION_REASON:
        raise InvalidArguments(f"a release or rejection needs a reason of 1-{MAX_DECISION_REASON} characters")
    return text


def _decide(memories: Memories, statement: str, note_id: str, reason: str, conn: psycopg.Connection | None) -> int:
    note_id = check_id(note_id, "id")
    reason = _check_reason(reason)
    with memories.store.transaction(memories.ctx, conn) as c:
        try:
            seq = c.execute(statement, (note_id, reason)).fetchone()[0]
        except pgerr.UniqueViolation:
            raise InvalidArguments(f"id {note_id[:100]!r} is already a memory of this tenant; the held note cannot "
                                   "be released under it") from None
        except pgerr.ObjectNotInPrerequisiteState as exc:
            raise InvalidArguments(str(exc.diag.message_primary or "the note was already decided")
                                   .removeprefix("pymem: ")) from None
    return int(seq)


def release_quarantined(memories: Memories, note_id: str, reason: str, *,
                        conn: psycopg.Connection | None = None) -> int:
    """Release a held note: it becomes the memory its writer asked for (same id, scope, adapter,
    origin, provenance, confidence), believed from now on. Returns the seq of the
    quarantine.released event. An operator context only: AccessDenied for a context acting as an
    adapter (the database refuses it); NotFound for a note this context cannot see;
    InvalidArguments for one already decided."""
    return _decide(memories, queries.query("release_quarantined"), note_id, reason, conn)


def reject_quarantined(memories: Memories, note_id: str, reason: str, *,
                       conn: psycopg.Connection | None = None) -> int:
    """Reject a held note: its content, record and embedding go (its hash stays in the chain).
    Returns the seq of the quarantine.rejected event. An operator context only, as `release_quarantined`."""
    return _decide(memories, queries.query("reject_quarantined"), note_id, reason, conn)
