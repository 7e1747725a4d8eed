"""The write gate: a memory becomes durable only if its origin says it may.

`admit(memories, record, provenance)` judges the record under the admission policy in force
(pymem.admission.judge), and then either

* refuses it: the refusal is first chained into the tenant's ledger and COMMITTED, on a
  connection and in a transaction of its own (pymem.admission.refusals), and only then is
  `MemoryAdmissionError(reason, signature=..., audit_seq=...)` raised. A caller that swallows the
  exception, or rolls back its own transaction (even one it passed in as `conn=`), cannot erase
  the evidence. The event holds a digest of the arguments, never the content; a refusal by the
  classifier also holds its name (`classifier.v1` or a `signal.*` name), its score and the digest
  of the piece of the note that decided.
* or holds it (the third decision, pymem.admission.quarantine): a note the detector is unsure
  of (a classifier score in the policy's quarantine band, a doubt the detector names) is written
  to the quarantine, chained as `quarantine.held`, where no read path finds it, until an
  operator releases or rejects it. `admit` returns the held record like an admitted one; its
  `admission` says "quarantined" (pymem.admission.quarantine.admission_of). A writer that cannot
  hold (`hold=False`: a supersession, a lesson) decides as before the quarantine existed: it
  admits what the detector did not refuse.
* or writes a NEW record (the input is never returned nor mutated): the caller's fields plus the
  provenance (with the context's adapter), the origin, the confidence the policy believes (capped
  by the origin's ceiling) and the policy fingerprint. Admitted writes are not separately
  audited: their provenance, stored on the row and chained by the ledger, is the record.

`screen` is the same judgement without the write: it refuses (audited) or returns the admitted
record and the row to write, for callers that decide after judging how to write it (a lesson that
turns out to be a near-duplicate of one on file is merged into it instead of inserted).

A provenance that names a session must name a session started in this tenant and visible to the
context (pymem.delivery.sessions): an unknown one is refused like any other refusal (audited,
then `UnknownSession`), never written under a catch-all; an incognito one raises
`IncognitoSession` before anything is judged or recorded, since nothing from an incognito session
is stored, not even a refusal's digest. Postgres refuses both again (a trigger on memories), so a
caller that goes around the gate gets the same answer.

Identity comes from the context, never from the record: the provenance's adapter must be the
context's adapter (RLS makes the row's `source_adapter` the context's adapter anyway, and a login
bound in pymem.login_bindings cannot act as any other). Nothing is logged with content.

One limit, stated rather than hidden: a refusal needs the tenant's chain-head lock. If the
caller's own transaction (passed as `conn=`) already wrote to the same tenant, it holds that lock
until it ends, so no independent transaction can chain the refusal first. The gate detects this
and still refuses, with `audit_seq=None` and a reason saying it was not audited; write refusable
records before (or outside) such a transaction.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg.pq import TransactionStatus

from .. import queries, telemetry
from ..embedder import Embedder
from ..errors import AccessDenied, IncognitoSession, InvalidArguments, MemoryAdmissionError, UnknownSession
from ..storage.chunks import first_present
from ..storage.rows import operator_origin_refusal
from ..storage.session_rows import session_row
from ..storage.validate import check_id, check_subject, check_ttl
from ..vocabulary import CONTENT_KEYS, ID_KEYS, MAX_RECORD_BYTES, VECTOR_KEYS, canonical_json
from .judge import Decision, admitted_record, digest_of_arguments, judge
from .policy import AdmissionPolicy, admission_policy_in_force
from .provenance import Origin, Provenance
from .quarantine import hold as hold_note
from .quarantine import written
from .refusals import audit_source, record_refusal

if TYPE_CHECKING:  # pragma: no cover
    from ..storage.memories import Memories
    from ..storage.store import Store

__all__ = ["admit", "screen", "Screened", "judge_or_refuse", "bind_provenance", "audited_refusal", "NOT_AUDITED"]

log = logging.getLogger(__name__)

NOT_AUDITED = ("not audited: the caller's transaction already holds this tenant's chain lock, so no "
               "independent transaction could record the refusal first")


def bind_provenance(provenance: Provenance | Mapping[str, Any], adapter: str | None) -> Provenance:
    """The provenance with the context's adapter: filled in when absent, refused when it names
    another adapter (identity comes from the context, never from the caller's claim). Origin
    operator is refused (AccessDenied) to a context acting as an adapter: it is who the database
    says wrote the row, which Postgres enforces again on every write."""
    if isinstance(provenance, Mapping):
        provenance = Provenance.from_json(provenance)
    if not isinstance(provenance, Provenance):
        raise InvalidArguments(f"provenance must be a Provenance or a JSON object, not {type(provenance).__name__}")
    if provenance.origin is Origin.OPERATOR and adapter is not None:
        raise AccessDenied(operator_origin_refusal(adapter))
    if provenance.adapter is None:
        return dataclasses.replace(provenance, adapter=adapter) if adapter is not None else provenance
    if provenance.adapter != adapter:
        acting = f"adapter {adapter!r}" if adapter is not None else "the operator (no adapter)"
        raise InvalidArguments(
            f"the provenance names adapter {provenance.adapter[:100]!r} but the context acts as {acting}; "
            "the adapter comes from the context")
    return provenance


def _as_record(record: Any) -> Mapping[str, Any]:
    if isinstance(record, str):
        return {"content": record}
    if not isinstance(record, Mapping):
        raise InvalidArguments(f"a memory record must be an object or a string, not {type(record).__name__}")
    return record


def _holds_chain_lock(memories: Memories, conn: psycopg.Connection) -> bool:
    if conn.info.transaction_status != TransactionStatus.INTRANS:
        return False  # idle: no locks; failed: cannot ask (the audit's lock timeout bounds the wait)
    with memories.store.transaction(memories.ctx, conn) as c:
        # pymem.holds_chain_lock (sql/schema.sql) tells from the head row's xmin, on this connection.
        return bool(c.execute(queries.query("holds_chain_lock"), (memories.ctx.tenant,)).fetchone()[0])


def _refuse(memories: Memories, decision: Decision, provenance: Provenance, digest: str,
            conn: psycopg.Connection | None) -> MemoryAdmissionError:
    """Audit the refusal durably, then return the exception to raise."""
    telemetry.count("pymem_admissions_total", decision="refuse")
    if conn is not None and _holds_chain_lock(memories, conn):
        log.warning("admission refused but not audited: tenant=%s origin=%s signature=%s digest=%s "
                    "(the caller's transaction holds the tenant's chain lock)",
                    memories.ctx.tenant, provenance.origin.value, decision.signature, digest)
        return MemoryAdmissionError(f"{decision.reason}; {NOT_AUDITED}", signature=decision.signature,
                                    audit_seq=None, score=decision.score)
    seq = record_refusal(
        memories.store, memories.ctx, origin=provenance.origin.value, source=provenance.source,
        reason=decision.reason, signature=decision.signature, digest=digest,
        policy_fingerprint=decision.policy_fingerprint, score=decision.score, piece_digest=decision.piece_digest)
    return MemoryAdmissionError(decision.reason, signature=decision.signature, audit_seq=seq, score=decision.score)


def audited_refusal(memories: Memories, provenance: Provenance, reason: str, *, digest: str,
                    signature: str | None = None, policy_fingerprint: str | None = None,
                    conn: psycopg.Connection | None = None) -> MemoryAdmissionError:
    """Audit a refusal the gate's judge did not make (an unknown session, an instruction-shaped
    session summary) exactly as the gate audits its own; returns the exception to raise."""
    decision = Decision(False, reason, signature, None, provenance.origin, policy_fingerprint)
    return _refuse(memories, decision, provenance, digest, conn)


def _check_session(memories: Memories, record: Mapping[str, Any], provenance: Provenance,
                   policy: AdmissionPolicy, conn: psycopg.Connection | None) -> None:
    """Refuse a write naming an unknown session (audited) or an incognito one (not audited)."""
    session_id = provenance.session_id
    assert session_id is not None  # only called for a provenance that names a session
    with memories.store.transaction(memories.ctx, conn) as c:
        row = session_row(c, memories.ctx.tenant, session_id)
    if row is not None and row.incognito:
        raise IncognitoSession(f"session {session_id[:100]!r} is incognito: nothing from it is stored")
    if row is None:
        # the id as an audit may show it: one clean line, redacted if it is itself instruction-shaped
        shown = (audit_source(session_id[:100]) or "(unprintable)")
        reason = f"unknown session {shown!r}: never started in this tenant (or not visible here)"
        exc = audited_refusal(memories, provenance, reason, digest=digest_of_arguments(record, provenance),
                              policy_fingerprint=policy.fingerprint, conn=conn)
        raise UnknownSession(exc.reason, audit_seq=exc.audit_seq)


def check_event_time(value: Any) -> str:
    """A memory's event time (when the remembered thing happened, set by the writer; distinct from
    the database's created_at): an ISO 8601 time, stored as ISO 8601 in UTC. A time without an
    offset is taken as UTC."""
    if isinstance(value, _dt.datetime):
        when = value
    elif isinstance(value, str) and len(value) <= 64:
        try:
            when = _dt.datetime.fromisoformat(value.strip())
        except ValueError:
            raise InvalidArguments("event_at must be an ISO 8601 time, e.g. 2023-05-08T13:56:00+00:00") from None
    else:
        raise InvalidArguments("event_at must be an ISO 8601 time, e.g. 2023-05-08T13:56:00+00:00")
    if when.tzinfo is None:
        when = when.replace(tzinfo=_dt.UTC)
    return when.astimezone(_dt.UTC).isoformat()


def _embedding_for(store: Store, content: str | None,
                   embedder: Embedder | None) -> tuple[list[float] | None, str | None]:
    """The content's vector and the name of the embedder that computed it (the store's, or
    `embedder` checked against it and claimed for it: pymem.storage.embedding)."""
    if content is None:
        return None, None
    embedder = store.text_embedder(embedder, claim=True)
    return embedder.embed([content])[0], embedder.name


#: Appended to the reason of a doubtful note admitted by a writer that cannot hold it for review.
CANNOT_HOLD = " (the detector was unsure of it, but this write path holds nothing for review)"


def judge_or_refuse(memories: Memories, record: Mapping[str, Any], provenance: Provenance,
                    policy: AdmissionPolicy, *, conn: psycopg.Connection | None = None,
                    hold: bool = False) -> Decision:
    """The gate's decision on `record`: returned when admitted, or when held and the caller can
    hold (`hold`: it writes held notes to the quarantine); when refused, the refusal is audited
    first (see the module docstring) and MemoryAdmissionError is raised. A note the caller
    cannot hold is admitted, as before the quarantine existed. For writers that build their own
    rows (screen, the LangGraph store) from the decision."""
    if provenance.session_id is not None:
        _check_session(memories, record, provenance, policy, conn)
    decision = judge(record, provenance, policy)
    if decision.held and not hold:
        # A writer that cannot hold a note decides as before the quarantine existed: what the
        # detector did not refuse is admitted.
        decision = dataclasses.replace(decision, admitted=True, held=False,
                                       reason=f"admitted: {provenance.origin.value}{CANNOT_HOLD}")
    if not decision.admitted and not decision.held:
        raise _refuse(memories, decision, provenance, digest_of_arguments(record, provenance), conn)
    if decision.held:
        log.info("admission held: tenant=%s origin=%s name=%s score=%s", memories.ctx.tenant,
                 provenance.origin.value, decision.signature, decision.score)
    telemetry.count("pymem_admissions_total", decision="quarantine" if decision.held else "admit")
    return decision


def _check_size(memories: Memories, record: Mapping[str, Any]) -> None:
    """Refuse an oversized note before it is judged: the content check reads the whole record,
    and what could never be stored is not worth reading (InvalidArguments, nothing audited)."""
    limit = memories.store.settings.max_content_bytes
    content = first_present(record, CONTENT_KEYS)
    if isinstance(content, str) and len(content) > limit // 4:  # a character is at most 4 bytes
        size = len(content.encode("utf-8", "surrogatepass"))
        if size > limit:
            raise InvalidArguments(f"content is {size} bytes, the limit is {limit}")
    try:
        text = canonical_json({k: v for k, v in record.items() if k not in VECTOR_KEYS})
        size = len(text.encode("utf-8", "surrogatepass"))
    except (TypeError, ValueError):
        return  # not JSON: the checks after judging name what is wrong
    if size > MAX_RECORD_BYTES:
        raise InvalidArguments(f"the record is {size} bytes as JSON, the limit is {MAX_RECORD_BYTES}")


@dataclass(frozen=True)
class Screened:
    """A record the gate admitted (or holds), not yet written: `record` is what `admit` returns,
    `row` the memory row the one write path (`Memories.add`) writes, or the quarantine holds
    (`decision.held`), and `decision` the gate's decision."""

    record: dict[str, Any]
    row: dict[str, Any]
    decision: Decision


def screen(memories: Memories, record: Mapping[str, Any] | str, provenance: Provenance | Mapping[str, Any], *,
           policy: AdmissionPolicy | None = None, embedder: Embedder | None = None,
           conn: psycopg.Connection | None = None, hold: bool = False) -> Screened:
    """The gate's judgement without the write: judge `record` (raising MemoryAdmissionError after
    the refusal's audit committed, exactly as `admit` does) and build the row it may be written
    as. `admit` is `screen` and then the write; a caller that decides after judging whether and
    how to write (a near-duplicate lesson merged into an existing one) calls `screen` itself, so
    its content passes the same gate. With `hold`, a note the detector is unsure of comes back
    held (`Screened.decision.held`) for the caller to write to the quarantine; without, it is
    admitted."""
    record = _as_record(record)
    if record.get("event_at") is not None:
        record = {**record, "event_at": check_event_time(record["event_at"])}
    ctx = memories.ctx
    provenance = bind_provenance(provenance, ctx.adapter)
    policy = policy if policy is not None else admission_policy_in_force(memories.store.settings)
    if not isinstance(policy, AdmissionPolicy):
        raise InvalidArguments(f"policy must be an AdmissionPolicy, not {type(policy).__name__}")

    _check_size(memories, record)
    decision = judge_or_refuse(memories, record, provenance, policy, conn=conn, hold=hold)

    out = admitted_record(record, provenance, policy)
    vector = first_present(out, VECTOR_KEYS)
    for key in VECTOR_KEYS:
        out.pop(key, None)
    raw_id = first_present(out, ID_KEYS)
    memory_id = check_id(raw_id) if raw_id is not None else str(uuid.uuid4())
    out["id"] = memory_id
    content = first_present(out, CONTENT_KEYS)
    if content is not None and not isinstance(content, str):
        raise InvalidArguments("content must be a string")
    embedded_by = None
    if vector is None:
        vector, embedded_by = _embedding_for(memories.store, content, embedder)
    if content is None and vector is None:
        raise InvalidArguments("a memory needs text (content, distillate or text) or an embedding")

    row = {
        "id": memory_id,
        "content": content,
        "record": out,
        "embedding": vector,
        "tags": out.get("tags"),
        "kind": out.get("kind"),
        "scope": out["scope"] if out.get("scope") is not None else dict(ctx.scope),
        "importance": out.get("importance"),
        "confidence": out["confidence"],
        "origin": out["origin"],
        "provenance": out["provenance"],
        "injection_source": out.get("injection_source"),
        "policy_fingerprint": out["policy_fingerprint"],
        "embedder": embedded_by,
    }
    return Screened(record=out, row=row, decision=decision)


def admit(memories: Memories, record: Mapping[str, Any] | str, provenance: Provenance | Mapping[str, Any], *,
          policy: AdmissionPolicy | None = None, embedder: Embedder | None = None,
          ttl: float | timedelta | None = None, subject: str | None = None,
          conn: psycopg.Connection | None = None, hold: bool = True) -> dict[str, Any]:
    """Judge `record` and write it (or hold it), or audit the refusal and raise MemoryAdmissionError.

    `record`: an object (or a bare string, taken as its content). The store reads `id` (else
    `chunk_id`/`memory_id`; generated when absent), `content` (else `distillate`/`text`),
    `embedding`/`vector` (computed from the content with `embedder`, default
    the store's embedder, pymem.storage.embedding, when absent), `tags`, `kind`, `scope` (default: the
    context's), `importance` and `confidence` (a request; the policy caps it). Everything else is
    kept in the stored record. `policy` defaults to the store's policy in force (pymem.config).
    `ttl` (seconds, or a timedelta) makes the memory expire that long after the write (None: the
    tenant's default, pymem.storage.retention); `subject` names the person it is about, so erasing
    that person (pymem.integrity.erase_actor) erases it.

    Returns the admitted record as written (a new dict, without vectors): the caller's fields
    plus `id`, `origin`, `provenance`, `confidence`, `policy_fingerprint` (and `injection_source`).
    With `conn`, the write joins the caller's transaction as a savepoint; a refusal's audit never
    does (see the module docstring).

    A note the detector is unsure of is held in the quarantine instead (never recalled or
    delivered until an operator releases it): the record returned is the one held, and
    `pymem.admission.quarantine.admission_of(result)` says "quarantined", with the reason, name,
    score and the seq of its quarantine.held event. `hold=False` admits such a note instead.
    """
    retention = {k: v for k, v in (("ttl", ttl), ("subject", subject)) if v is not None}
    if retention:  # checked before anything is judged or audited
        check_ttl(ttl)
        check_subject(subject)
    screened = screen(memories, record, provenance, policy=policy, embedder=embedder, conn=conn, hold=hold)
    row = {**screened.row, **retention}
    if screened.decision.held:
        seq = hold_note(memories, row, screened.decision, conn=conn)
        return written(screened.record, screened.decision, seq)
    memories.add([row], conn=conn)  # an existing id: InvalidArguments (storage.rows)
    return written(screened.record, screened.decision)
