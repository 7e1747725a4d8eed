"""`deliver`: build what one turn of a session receives, and record that it received it.

For session S, turn N and the user's query:

1. S must be a session this context started (else UnknownSession). An incognito session gets
   nothing: no memory is injected into it and no record is kept (an empty Delivery).
2. The digest: up to `max_sessions` *other* sessions, newest first (never S, never an incognito
   or erased one, never one started by an adapter the trust policy does not allow, and only
   sessions of S's scope or a narrower one), each as id, start time, surface and topic, the topic
   only if it is not instruction-shaped today.
3. Hot memories: the newest `max_hot` live memories tagged hot that S receives, re-judged like
   recall.
4. Recalled memories: `recall_session` (recall's hybrid search over what S receives, re-judged
   under the policy in force now, cut at the similarity floor), then ranked by their place in
   that fused ranking x trust-tier weight (pymem.delivery.ranking); the best `top_k`.
   In 3 and 4, tiers the trust tiers do not inject automatically are left out.
   What S receives: the memories of S's scope (the scope it was started in) and of its
   ancestors (tenant-wide memories reach every session, a user's only that user's sessions, a
   sibling scope's never), whatever context delivers; the database applies the rule
   (pymem.session_hot, pymem.session_search, sql/schema.sql).
5. Lessons of earlier tasks, when the caller passes them (pymem.lessons.lessons_for_task picks and
   ranks them): a section of their own, ahead of the recalled memories; a lesson S does not
   receive is left out, a lesson already in the block as a hot memory is not repeated, and none
   is recalled again.
6. Everything goes into one envelope (pymem.delivery.envelope), fitted to the token budget
   (pymem.delivery.budget), and the turn's injection record is chained into the ledger
   (pymem.delivery.injections) with exactly the ids that are in the block, the lessons named as
   such.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg.rows import class_row

from .. import queries, telemetry
from ..admission.policy import AdmissionPolicy, admission_policy_in_force
from ..admission.trust import AdapterTrustPolicy, active_trust_policy
from ..embedder import Embedder
from ..errors import ContextError, InvalidArguments, UnknownSession
from ..recall import OVERFETCH_GROWTH, RecalledMemory, check_floor, check_query_text, judge_hit, recall_session
from ..storage.search import MAX_TOP_K, SearchHit, check_top_k
from ..storage.session_rows import SessionRow, session_row
from . import injections
from .budget import fit
from .envelope import DeliveredItem, DeliveredLesson, DigestEntry
from .ranking import fused_rank_score
from .sessions import check_session_id, digest_sessions
from .tiers import TrustTiers, tier_of, tiers_in_force
from .tokens import TokenCounter, default_counter
from .topics import topic_is_safe

if TYPE_CHECKING:  # pragma: no cover
    from ..storage.memories import Memories

__all__ = ["Delivery", "deliver", "DEFAULT_BUDGET", "DEFAULT_MAX_SESSIONS", "DEFAULT_MAX_HOT", "DEFAULT_TOP_K"]

DEFAULT_BUDGET = 1000
DEFAULT_MAX_SESSIONS = 10
DEFAULT_MAX_HOT = 5
DEFAULT_TOP_K = 5


@dataclass(frozen=True)
class Delivery:
    """What one turn received: the block's text (exactly what the agent gets), its items and
    digest entries, its size, and the ledger seq of its injection record."""

    session_id: str
    turn: int
    text: str
    items: list[DeliveredItem] = field(default_factory=list)
    digest: list[DigestEntry] = field(default_factory=list)
    tokens: int = 0
    budget: int = DEFAULT_BUDGET
    truncated: int = 0
    counter: str = ""
    block_sha256: str | None = None
    injection_seq: int | None = None
    incognito: bool = False
    lessons: list[DeliveredLesson] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"session_id": self.session_id, "turn": self.turn, "block": self.text,
                "items": [i.to_json() for i in self.items], "lessons": [lesson.to_json() for lesson in self.lessons],
                "digest": [d.to_json() for d in self.digest],
                "tokens": self.tokens, "budget": self.budget, "truncated": self.truncated, "counter": self.counter,
                "block_sha256": self.block_sha256, "injection_seq": self.injection_seq, "incognito": self.incognito}


def _count(value: Any, what: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidArguments(f"{what} must be an integer between {low} and {high}")
    return value


def _digest(memories: Memories, session: SessionRow, max_sessions: int, trust: AdapterTrustPolicy,
            conn: psycopg.Connection | None) -> list[DigestEntry]:
    # asks for more than it shows: sessions of untrusted adapters are skipped, not counted
    rows = digest_sessions(memories, session, limit=min(10_000, 3 * max_sessions + 10), conn=conn)
    out = []
    for row in rows:
        if trust.verdict(row.source_adapter) is not None:
            continue
        topic = row.topic if row.topic is not None and topic_is_safe(row.topic) else None
        out.append(DigestEntry(row.id, row.started_at, row.ended_at, row.surface, topic))
        if len(out) == max_sessions:
            break
    return out


def _hot(memories: Memories, session_id: str, max_hot: int, policy: AdmissionPolicy, trust: AdapterTrustPolicy,
         guard: Any, tiers: TrustTiers, conn: psycopg.Connection | None) -> list[RecalledMemory]:
    with memories.store.transaction(memories.ctx, conn) as c, c.cursor(row_factory=class_row(SearchHit)) as cur:
        cur.execute(queries.query("session_hot"), (session_id, min(1000, 3 * max_hot + 10)))
        rows = cur.fetchall()
    kept = []
    for row in rows:
        verdict = judge_hit(row, policy, trust, guard)
        if isinstance(verdict, RecalledMemory) and tiers.auto(
                tier_of(verdict.origin, verdict.provenance, source_adapter=verdict.source_adapter)):
            kept.append(verdict)
            if len(kept) == max_hot:
                break
    return kept


def _recalled(memories: Memories, session_id: str, query: str, top_k: int, floor: float | None, exclude: set[str],
              now: _dt.datetime, policy: AdmissionPolicy, trust: AdapterTrustPolicy, guard: Any, tiers: TrustTiers,
              embedder: Embedder | None, conn: psycopg.Connection | None) -> list[tuple[float, RecalledMemory]]:
    """The best `top_k` recalled memories by fused_rank_score. recall_session is asked for as many
    kept hits as can matter: top_k plus the excluded ones, and more (OVERFETCH_GROWTH times) only
    while a hit beyond those could still outrank the top_k-th (it would score at most the best
    automatic tier's weight at the next place), so the result is that of ranking every hit."""
    weights = [rule.weight for rule in tiers.rules.values() if rule.auto]
    if not weights:
        return []
    want = min(MAX_TOP_K, top_k + len(exclude))
    while True:
        result = recall_session(memories, session_id, query, top_k=want, policy=policy, trust=trust, guard=guard,
                                embedder=embedder, floor=floor, conn=conn)
        ranked = []
        for position, hit in enumerate(result.kept):
            tier = tier_of(hit.origin, hit.provenance, source_adapter=hit.source_adapter)
            if hit.id in exclude or not tiers.auto(tier):
                continue
            ranked.append((fused_rank_score(position, tiers.weight(tier)), hit))
        ranked.sort(key=lambda pair: (-pair[0], pair[1].id))
        if len(result.kept) < want or want >= MAX_TOP_K \
                or (len(ranked) >= top_k and ranked[top_k - 1][0] > fused_rank_score(want, max(weights))):
            return ranked[:top_k]
        want = min(MAX_TOP_K, want * OVERFETCH_GROWTH)


def _session_times(memories: Memories, hits: Sequence[RecalledMemory],
                   conn: psycopg.Connection | None) -> dict[str, _dt.datetime]:
    ids = sorted({h.session_id for h in hits if h.session_id is not None})
    if not ids:
        return {}
    with memories.store.transaction(memories.ctx, conn) as c:
        return dict(c.execute(queries.query("session_start_times"), (memories.ctx.tenant, ids)).fetchall())


def _received(memories: Memories, session_id: str, lessons: list[DeliveredLesson],
              conn: psycopg.Connection | None) -> list[DeliveredLesson]:
    """The lessons the session receives (filed in its scope or an ancestor's), in their order."""
    if not lessons:
        return lessons
    with memories.store.transaction(memories.ctx, conn) as c:
        kept = set(c.execute(queries.query("session_receives"),
                             (session_id, [lesson.id for lesson in lessons])).fetchone()[0])
    return [lesson for lesson in lessons if lesson.id in kept]


def _item(section: str, hit: RecalledMemory, times: dict[str, _dt.datetime],
          score: float | None = None) -> DeliveredItem:
    return DeliveredItem(section=section, id=hit.id, created_at=hit.created_at, session_id=hit.session_id,
                         session_started_at=times.get(hit.session_id) if hit.session_id else None,
                         origin=hit.origin,
                         tier=tier_of(hit.origin, hit.provenance, source_adapter=hit.source_adapter).value,
                         text=hit.content or "",
                         score=score, similarity=float(hit.score) if section == "recalled" else None,
                         event_at=hit.event_at)


#: How often a delivery records its block again after memories of it vanished concurrently.
_RECORD_ATTEMPTS = 3


def _live(memories: Memories, ids: Sequence[str], conn: psycopg.Connection | None) -> set[str]:
    """Which of `ids` are still live memories of this context."""
    with memories.store.transaction(memories.ctx, conn) as c:
        return {row[0] for row in c.execute(queries.query("live_memory_ids"), (memories.ctx.tenant, list(ids)))}


def _check_lessons(lessons: Any) -> list[DeliveredLesson] | None:
    if lessons is None:
        return None
    if isinstance(lessons, (str, bytes)) or not isinstance(lessons, Sequence) \
            or not all(isinstance(lesson, DeliveredLesson) for lesson in lessons):
        raise InvalidArguments("lessons must be a list of DeliveredLesson (see pymem.lessons.lessons_for_task)")
    if len({lesson.id for lesson in lessons}) != len(lessons):
        raise InvalidArguments("lessons names the same lesson twice")
    return list(lessons)


def deliver(memories: Memories, session_id: str, query: str | None, *, turn: int | None = None,
            budget: int = DEFAULT_BUDGET, top_k: int = DEFAULT_TOP_K, max_sessions: int = DEFAULT_MAX_SESSIONS,
            max_hot: int = DEFAULT_MAX_HOT, floor: float | None = None, tiers: TrustTiers | None = None,
            policy: AdmissionPolicy | None = None, trust: AdapterTrustPolicy | None = None, guard: Any = None,
            embedder: Embedder | None = None, counter: TokenCounter | None = None,
            now: _dt.datetime | None = None, lessons: Sequence[DeliveredLesson] | None = None,
            conn: psycopg.Connection | None = None) -> Delivery:
    """Build and record the block that turn `turn` of session `session_id` receives (see the
    module docstring). `turn` defaults to one after the last recorded turn of the session (0 for
    the first). `query` (the user's message) drives the recalled section; None or blank recalls
    nothing. Defaults: `floor` recall's (PYMEM_SIMILARITY_FLOOR, else the floor calibrated for the
    store's embedder), `tiers`, `policy` and `trust` the store's
    trust tiers, admission policy and adapter trust in force (pymem.config), `counter` the
    approximate counter, `now` the current time (recency is measured to it). `lessons`: the
    lessons section (None = no section; pymem.lessons.lessons_for_task builds it)."""
    session_id = check_session_id(session_id)
    if turn is not None:
        _count(turn, "turn", 0, 2**31 - 1)
    budget = _count(budget, "budget", 1, 1_000_000)
    top_k = check_top_k(top_k)
    _count(max_sessions, "max_sessions", 0, 1000)
    _count(max_hot, "max_hot", 0, 1000)
    if query is not None and not isinstance(query, str):
        raise InvalidArguments(f"the query must be text, not {type(query).__name__}")
    if query is not None:
        check_query_text(query, "the delivery query")
    lessons = _check_lessons(lessons)
    floor = check_floor(floor) if floor is not None else None
    tiers = tiers if tiers is not None else tiers_in_force(memories.store.settings)
    policy = policy if policy is not None else admission_policy_in_force(memories.store.settings)
    trust = trust if trust is not None else active_trust_policy(memories.store.settings)
    counter = counter if counter is not None else default_counter()
    if not isinstance(tiers, TrustTiers) or not isinstance(policy, AdmissionPolicy) \
            or not isinstance(trust, AdapterTrustPolicy) or not callable(getattr(counter, "count", None)):
        raise InvalidArguments("tiers, policy, trust and counter must be TrustTiers, AdmissionPolicy, "
                               "AdapterTrustPolicy and a token counter")
    now = now if now is not None else _dt.datetime.now(_dt.UTC)

    # One checkout for the whole call; every read in one snapshot (on pymem's own connection a
    # REPEATABLE READ, READ ONLY transaction), then the injection record in a transaction of its
    # own on the same connection. Given a caller's connection, both run inside its transaction.
    with memories.store.connection(conn) as c:
        with memories.store.transaction(memories.ctx, c, snapshot=True):
            session = session_row(c, memories.ctx.tenant, session_id)
            previous = injections.last_turn(c, memories.ctx.tenant, session_id) if session and turn is None else None
            if session is None:
                raise UnknownSession(f"unknown session {session_id[:100]!r}: never started in this tenant "
                                     "(or not visible here)")
            if turn is None:
                turn = 0 if previous is None else previous + 1
            if session.incognito:
                telemetry.count("pymem_deliveries_total", outcome="incognito")
                return Delivery(session_id=session_id, turn=turn, text="", budget=budget, counter=counter.name,
                                incognito=True)
            digest = _digest(memories, session, max_sessions, trust, c) if max_sessions else []
            hot = _hot(memories, session_id, max_hot, policy, trust, guard, tiers, c) if max_hot else []
            hot_ids = {h.id for h in hot}
            if lessons is not None:
                lessons = _received(memories, session_id, [lesson for lesson in lessons if lesson.id not in hot_ids],
                                    c)
            exclude = hot_ids | {lesson.id for lesson in lessons or ()}
            recalled = (_recalled(memories, session_id, query, top_k, floor, exclude, now, policy, trust, guard, tiers,
                                  embedder, c)
                        if query is not None and query.strip() else [])
            times = _session_times(memories, hot + [hit for _, hit in recalled], c)
        fitted = fit(digest, [_item("hot", h, times) for h in hot],
                     [_item("recalled", hit, times, score) for score, hit in recalled], lessons=lessons, budget=budget,
                     counter=counter)

        for attempt in range(_RECORD_ATTEMPTS):
            block_sha256 = hashlib.sha256(fitted.text.encode("utf-8")).hexdigest()
            try:
                with memories.store.transaction(memories.ctx, c) as w:
                    seq = injections.record_injection(
                        w, session_id=session_id, turn=turn,
                        memory_ids=[i.id for i in fitted.hot] + [lesson.id for lesson in fitted.lessons]
                        + [i.id for i in fitted.recalled],
                        hot_ids=[i.id for i in fitted.hot], lesson_ids=[lesson.id for lesson in fitted.lessons],
                        digest_sessions=[d.session_id for d in fitted.digest], block_sha256=block_sha256,
                        tokens=fitted.tokens, budget=budget, truncated=fitted.omitted, counter=counter.name,
                        policy_fingerprint=policy.fingerprint, tiers_fingerprint=tiers.fingerprint)
                break
            except ContextError:
                # A memory of the block was deleted or erased after it was ranked (a concurrent call):
                # deliver without it rather than fail the turn. Anything else is raised as it was.
                named = ([i.id for i in fitted.hot] + [lesson.id for lesson in fitted.lessons]
                         + [i.id for i in fitted.recalled])
                gone = set(named) - _live(memories, named, c)
                if not gone or attempt == _RECORD_ATTEMPTS - 1:
                    raise
                hot = [h for h in hot if h.id not in gone]
                recalled = [(score, hit) for score, hit in recalled if hit.id not in gone]
                if lessons is not None:
                    lessons = [lesson for lesson in lessons if lesson.id not in gone]
                fitted = fit(digest, [_item("hot", h, times) for h in hot],
                             [_item("recalled", hit, times, score) for score, hit in recalled], lessons=lessons,
                             budget=budget, counter=counter)
        items = fitted.hot + fitted.recalled
    telemetry.count("pymem_deliveries_total", outcome="recorded")
    return Delivery(session_id=session_id, turn=turn, text=fitted.text, items=items, digest=fitted.digest,
                    tokens=fitted.tokens, budget=budget, truncated=fitted.omitted, counter=counter.name,
                    block_sha256=block_sha256, injection_seq=seq, lessons=fitted.lessons)
