"""Recording an admission refusal durably, before the write gate raises it.

Why a transaction of its own. A refusal is evidence that something tried to plant a memory. If it
were written in the caller's transaction, a caller that rolls back (or swallows the exception
and rolls back later) would erase the evidence along with its own work. So `record_refusal`
takes a connection of its own (one of the store's one-statement connections, outside the pool
the verbs' transactions hold), appends the event to the tenant's hash chain through
`pymem.record_refusal` (SQL), and commits before it returns; only then does the write gate raise.

What is recorded. The decision, the action class (`memory.persist`), the writing tool
(`memory.write:<source>`), origin, adapter, actor, the reason, the detector signature if one
matched (a signature's name, `classifier.v1` or a structural signal's name), the classifier's
score and the `sha256:` digest of the piece of the note that decided it when the classifier ran,
the admission policy's fingerprint, and `sha256:` of the canonical JSON of the arguments. Never
the content: an audit trail that quotes a poisoned note has copied the poison
somewhere else. The SQL function checks the shapes again (a digest must look like one, a reason
is short, no control characters), because the app role can call it directly. Reading the
refusals back is pymem.integrity.audit.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from .. import db, queries
from ..errors import LockTimeout
from ..vocabulary import MAX_REFUSAL_REASON, MAX_REFUSAL_SOURCE, is_plain_text
from .classifier import classify
from .scanning import instruction_shaped

if TYPE_CHECKING:  # pragma: no cover
    from ..context import Context
    from ..storage.store import Store

__all__ = ["record_refusal", "audit_source", "LOCK_TIMEOUT", "MAX_SOURCE", "MAX_REASON"]

log = logging.getLogger(__name__)

#: How long a refusal waits for its tenant's chain-head lock before giving up with a clear error
#: instead of hanging (a caller holding that lock in another open transaction would otherwise
#: wait on us forever, and we on it).
LOCK_TIMEOUT = "10s"
LOCK_TIMEOUT_MS = 10_000
#: Limits enforced by pymem.record_refusal (sql/schema.sql).
MAX_SOURCE = MAX_REFUSAL_SOURCE
MAX_REASON = MAX_REFUSAL_REASON


def _clean(text: str, limit: int) -> str:
    """One line of at most `limit` characters: control and format characters become spaces."""
    text = " ".join("".join(c if is_plain_text(c) else " " for c in text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def audit_source(source: str | None) -> str | None:
    """The provenance source as the audit may record it: short, one line, and never itself
    instruction-shaped, by the signatures or the classifier (a refused note's source can be part
    of the payload)."""
    if source is None:
        return None
    cleaned = _clean(source, MAX_SOURCE)
    if not cleaned:
        return None
    if instruction_shaped(source) is not None or classify(source).refused:
        return "redacted"
    return cleaned


def record_refusal(store: Store, ctx: Context, *, origin: str, source: str | None, reason: str,
                   signature: str | None, digest: str, policy_fingerprint: str | None, score: float | None = None,
                   piece_digest: str | None = None) -> int:
    """Append an `admission.refused` event to the context tenant's chain and COMMIT it, on a
    pooled connection and in a transaction of its own. Returns the event's ledger seq.

    `score` (the classifier's, in [0, 1]) and `piece_digest` (sha256 of the deciding piece) are
    recorded when the classifier ran; the SQL function checks both again."""
    args = (origin, audit_source(source), _clean(reason, MAX_REASON) or "refused", signature, digest,
            policy_fingerprint, None if score is None else round(float(score), 6),
            piece_digest if score is not None else None)
    timeouts = store.timeouts
    wait = LOCK_TIMEOUT if timeouts.lock_ms is None or timeouts.lock_ms >= LOCK_TIMEOUT_MS else f"{timeouts.lock_ms}ms"
    try:
        # the store's one-statement connections, not the pool: a verb holding a pool connection in its
        # own transaction refuses without waiting for a second one from the same pool
        with store.statements.connection() as conn, db.transaction(conn, ctx, timeouts=timeouts):
            conn.execute(queries.query("set_lock_timeout"), (wait,))
            seq = db.one(conn.execute(queries.query("record_refusal"), args).fetchone())[0]
    except LockTimeout as exc:
        raise LockTimeout(
            f"could not record the refusal's audit event within {wait}: tenant {ctx.tenant}'s chain is locked by "
            "another open transaction (one that already wrote to this tenant, perhaps the caller's own); nothing "
            "was written", retry_after=exc.retry_after) from exc
    log.info("admission refused: tenant=%s origin=%s signature=%s score=%s audit_seq=%s digest=%s",
             ctx.tenant, origin, signature, score, seq, digest)
    return int(seq)
