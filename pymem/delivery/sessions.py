"""Sessions: started by id, ended with an optional summary, listed, recalled on demand, erased.

There is no default session: every session id is chosen by the caller, and a memory, summary or
delivery that names a session this tenant never started is refused (audited), never pooled into
a catch-all. The topic comes from the first *user* message only (pymem.delivery.topics). An
incognito session keeps nothing: no topic, no summary (a summary given when it ends is dropped,
and the database would refuse it anyway), no memory, no injection record, and it never appears
in a list, a digest or a recall. Postgres enforces the rules (sql/schema.sql, pymem.sessions):
the times are the database's, what identifies a session never changes, and every change is a
ledger event carrying digests of the topic and summary, never their text.

A summary is stored content that an agent reads back later (`recall_session`), so it is scanned
like a memory: an instruction-shaped summary is refused and the refusal audited (origin
`model_inferred`, tool `memory.write:session.summary`), and a stored one that has become
instruction-shaped under today's signatures, or whose session was started by an adapter the trust
policy does not allow, is withheld on recall with the reason.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import errors as pgerr
from psycopg.rows import class_row
from psycopg.types.json import Jsonb

from .. import queries
from ..admission.gate import audited_refusal
from ..admission.judge import digest_of_arguments
from ..admission.provenance import Provenance
from ..admission.scanning import instruction_shaped
from ..admission.trust import AdapterTrustPolicy, active_trust_policy
from ..errors import IncognitoSession, InvalidArguments, MemoryAdmissionError, NotFound, UnknownSession
from ..storage.session_rows import SessionRow, session_row
from ..storage.validate import check_id, check_text
from ..vocabulary import SURFACES, Origin, is_plain_text
from .topics import derive_topic, first_user_message, topic_is_safe

if TYPE_CHECKING:  # pragma: no cover
    from ..storage.memories import Memories

__all__ = ["Session", "SessionSummary", "start_session", "end_session", "replace_summary", "list_sessions",
           "recall_session", "erase_session", "check_session_id", "MAX_SUMMARY_BYTES"]

#: The schema's limit on a stored summary (UTF-8 bytes).
MAX_SUMMARY_BYTES = 65536
SUMMARY_SOURCE = "session.summary"


@dataclass(frozen=True)
class Session:
    """A session as lists show it: never its summary's text (`recall_session` returns that)."""

    id: str
    surface: str
    incognito: bool
    topic: str | None
    started_at: _dt.datetime
    ended_at: _dt.datetime | None
    has_summary: bool
    source_adapter: str | None
    scope: dict[str, Any]

    @classmethod
    def from_row(cls, row: SessionRow) -> Session:
        return cls(id=row.id, surface=row.surface, incognito=row.incognito, topic=row.topic,
                   started_at=row.started_at, ended_at=row.ended_at, has_summary=row.summary is not None,
                   source_adapter=row.source_adapter, scope=dict(row.scope))

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["started_at"] = self.started_at.isoformat()
        out["ended_at"] = self.ended_at.isoformat() if self.ended_at else None
        return out


@dataclass(frozen=True)
class SessionSummary:
    """What `recall_session` returns: the session and its stored summary, or why it is withheld."""

    id: str
    surface: str
    started_at: _dt.datetime
    ended_at: _dt.datetime | None
    topic: str | None
    summary: str | None
    withheld: str | None = None

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["started_at"] = self.started_at.isoformat()
        out["ended_at"] = self.ended_at.isoformat() if self.ended_at else None
        return out


def check_session_id(value: Any, what: str = "session id") -> str:
    """A session id: 1-256 characters, no control or format characters (it is shown to agents)."""
    checked = check_id(value, what)
    if not is_plain_text(checked) or checked != checked.strip():
        raise InvalidArguments(f"{what} must have no control or format characters and no surrounding spaces")
    return checked


def _check_summary(summary: Any) -> str:
    text = check_text(summary, "summary", max_bytes=MAX_SUMMARY_BYTES, required=True)
    if not text.strip():
        raise InvalidArguments("a summary must not be blank")
    return text


def _row(memories: Memories, session_id: str, conn: psycopg.Connection | None) -> SessionRow | None:
    with memories.store.transaction(memories.ctx, conn) as c:
        return session_row(c, memories.ctx.tenant, session_id)


def _summary_provenance(session_id: str) -> Provenance:
    return Provenance(Origin.MODEL_INFERRED, session_id=session_id, source=SUMMARY_SOURCE)


def _changed(memories: Memories, statement: str, params: tuple[Any, ...],
             conn: psycopg.Connection | None) -> SessionRow | None:
    """Run a named statement that writes one session and returns it (None: no row it may change)."""
    with memories.store.transaction(memories.ctx, conn) as c, c.cursor(row_factory=class_row(SessionRow)) as cur:
        cur.execute(statement, params)
        row: SessionRow | None = cur.fetchone()
        return row


def _refuse_write(memories: Memories, session_id: str, summary: str | None, reason: str,
                  conn: psycopg.Connection | None, signature: str | None = None) -> MemoryAdmissionError:
    provenance = _summary_provenance(session_id)
    digest = digest_of_arguments({"session": session_id, "summary": summary}, provenance)
    return audited_refusal(memories, provenance, reason, digest=digest, signature=signature, conn=conn)


def _writable(memories: Memories, session_id: str, summary: str | None,
              conn: psycopg.Connection | None) -> SessionRow:
    """The session a summary or an end is written to: known (else an audited refusal)."""
    row = _row(memories, session_id, conn)
    if row is None:
        exc = _refuse_write(memories, session_id, summary,
                            "unknown session: never started in this tenant (or not visible here)", conn)
        raise UnknownSession(exc.reason, audit_seq=exc.audit_seq)
    return row


def _scanned(memories: Memories, session_id: str, summary: str, conn: psycopg.Connection | None) -> None:
    signature = instruction_shaped(summary)
    if signature is not None:
        raise _refuse_write(memories, session_id, summary, f"instruction-shaped summary ({signature})", conn,
                            signature=signature)


def start_session(memories: Memories, session_id: str, surface: str, *, incognito: bool = False,
                  first_message: str | None = None, messages: Sequence[Mapping[str, Any]] | None = None,
                  conn: psycopg.Connection | None = None) -> Session:
    """Start session `session_id` on `surface` (one of SURFACES) in the context's tenant and scope.

    The topic comes from `first_message` (the user's first message) or from the first message
    whose role is "user" in `messages`; assistant text is never used. An incognito session stores
    no topic. A session id already started in this tenant is refused (InvalidArguments)."""
    session_id = check_session_id(session_id)
    if surface not in SURFACES:
        raise InvalidArguments(f"surface must be one of {', '.join(SURFACES)}")
    if not isinstance(incognito, bool):
        raise InvalidArguments("incognito must be true or false")
    if first_message is not None and messages is not None:
        raise InvalidArguments("give first_message or messages, not both")
    text = first_user_message(messages) if messages is not None else first_message
    topic = derive_topic(text)
    if incognito:
        topic = None  # nothing from an incognito session is stored, its first words included
    ctx = memories.ctx
    try:
        row = _changed(memories, queries.query("start_session"),
                       (ctx.tenant, session_id, Jsonb(dict(ctx.scope)), surface, incognito, topic), conn)
    except pgerr.UniqueViolation:
        raise InvalidArguments(f"session {session_id[:100]!r} was already started in this tenant") from None
    assert row is not None  # an insert returns the row it wrote
    return Session.from_row(row)


def end_session(memories: Memories, session_id: str, *, summary: str | None = None,
                conn: psycopg.Connection | None = None) -> Session:
    """End an open session, storing `summary` if given (dropped, never sent, for an incognito
    session). An instruction-shaped summary is refused (audited) and the session stays open."""
    session_id = check_session_id(session_id)
    if summary is not None:
        summary = _check_summary(summary)
    row = _writable(memories, session_id, summary, conn)
    if row.ended_at is not None:
        raise InvalidArguments(f"session {session_id[:100]!r} has already ended")
    if row.incognito:
        summary = None
    elif summary is not None:
        _scanned(memories, session_id, summary, conn)
    ended = _changed(memories, queries.query("end_session"), (summary, memories.ctx.tenant, session_id), conn)
    if ended is None:
        raise InvalidArguments(f"session {session_id[:100]!r} has already ended, or this context may not end it")
    return Session.from_row(ended)


def replace_summary(memories: Memories, session_id: str, summary: str, *,
                    conn: psycopg.Connection | None = None) -> Session:
    """Set or replace a session's summary (a session.summary event; the old text is not kept)."""
    session_id = check_session_id(session_id)
    summary = _check_summary(summary)
    row = _writable(memories, session_id, summary, conn)
    if row.incognito:
        raise IncognitoSession(f"session {session_id[:100]!r} is incognito: its summary is not stored")
    if row.erased_at is not None:
        raise InvalidArguments(f"session {session_id[:100]!r} was erased")
    _scanned(memories, session_id, summary, conn)
    changed = _changed(memories, queries.query("replace_session_summary"),
                       (summary, memories.ctx.tenant, session_id), conn)
    if changed is None:
        raise InvalidArguments(f"this context may not change session {session_id[:100]!r}")
    return Session.from_row(changed)


def recent_sessions(memories: Memories, *, limit: int, exclude: str | None = None,
                    conn: psycopg.Connection | None = None) -> list[SessionRow]:
    """The context's visible sessions, newest first: never incognito, never erased, never `exclude`."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 10_000:
        raise InvalidArguments("limit must be an integer between 1 and 10000")
    with memories.store.transaction(memories.ctx, conn) as c, c.cursor(row_factory=class_row(SessionRow)) as cur:
        cur.execute(queries.query("recent_sessions"), (memories.ctx.tenant, exclude, limit))
        found: list[SessionRow] = cur.fetchall()
        return found


def digest_sessions(memories: Memories, session: SessionRow, *, limit: int,
                    conn: psycopg.Connection | None = None) -> list[SessionRow]:
    """The other sessions `session`'s digest may list, newest first: visible, never incognito or
    erased, and of `session`'s own scope or a narrower one (a user's session lists that user's
    sessions, never another user's, nor the tenant-wide ones whatever context delivers)."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 10_000:
        raise InvalidArguments("limit must be an integer between 1 and 10000")
    with memories.store.transaction(memories.ctx, conn) as c, c.cursor(row_factory=class_row(SessionRow)) as cur:
        cur.execute(queries.query("digest_sessions"),
                    (memories.ctx.tenant, Jsonb(dict(session.scope)), session.id, limit))
        found: list[SessionRow] = cur.fetchall()
        return found


def list_sessions(memories: Memories, *, limit: int = 100, conn: psycopg.Connection | None = None) -> list[Session]:
    """The context's sessions, newest first (incognito and erased sessions never appear)."""
    return [Session.from_row(r) for r in recent_sessions(memories, limit=limit, conn=conn)]


def recall_session(memories: Memories, session_id: str, *, trust: AdapterTrustPolicy | None = None,
                   conn: psycopg.Connection | None = None) -> SessionSummary:
    """One session's stored summary, on demand (the tool an agent calls to expand a digest line).

    An unknown, incognito or erased session is NotFound (an incognito one is never revealed).
    The summary is withheld, with the reason, when it is instruction-shaped under today's
    signatures or the session was started by an adapter `trust` (default: the store's in force) does
    not allow; the topic is shown only when it is safe."""
    session_id = check_session_id(session_id)
    trust = trust if trust is not None else active_trust_policy(memories.store.settings)
    row = _row(memories, session_id, conn)
    if row is None or row.incognito or row.erased_at is not None:
        raise NotFound(f"no stored session {session_id[:100]!r} in this context")
    summary, withheld = row.summary, None
    distrust = trust.verdict(row.source_adapter)
    if distrust is not None:
        summary, withheld = None, distrust
    elif summary is not None:
        signature = instruction_shaped(summary)
        if signature is not None:
            summary, withheld = None, f"instruction-shaped summary ({signature})"
    topic = row.topic if row.topic is not None and topic_is_safe(row.topic) else None
    return SessionSummary(id=row.id, surface=row.surface, started_at=row.started_at, ended_at=row.ended_at,
                          topic=topic, summary=summary, withheld=withheld)


def erase_session(memories: Memories, session_id: str, reason: str, *,
                  conn: psycopg.Connection | None = None) -> int:
    """Erase a session's topic and summary (the row stays, so its id still explains the memories
    and injection records that name it); the reason is a ledger event. Returns its seq."""
    session_id = check_session_id(session_id)
    reason = check_text(reason, "reason", max_bytes=1200, required=True)
    with memories.store.transaction(memories.ctx, conn) as c:
        return int(c.execute(queries.query("erase_session"), (session_id, reason)).fetchone()[0])
