"""Lessons for a task: the few lessons worth putting in front of the agent that picks it up.

Given the task's tags (and the agent's role):

1. a role in the excluded set (PYMEM_LESSONS_EXCLUDED_ROLES, comma-separated; default `manager`
   and `planner`, roles that plan work rather than do it) gets nothing;
2. the candidates are the context's lessons sharing at least one tag with the task, each with its
   confidence decayed to now by the database (pymem.lesson_confidence);
3. each is re-judged like a recalled memory (adapter trust, the admission policy in force now, an
   optional guard) and, if kept, believed at the lower of its decayed confidence and what the
   policy allows now;
4. they rank by shared tags + that confidence (pymem.lessons.similarity), best first, ties by id;
5. the best `limit` (5) are rendered as a lessons section inside the delivery envelope
   (pymem.delivery.envelope), each with its type, tags, confidence, source task and, when it was
   last filed more than a day ago, a staleness caveat, fitted to a `budget` of 5,000 tokens: a
   lesson that does not fit is left out and a truncation notice says how many were.

The result (`LessonsForTask`) carries the lessons themselves too: pass `.lessons` to
`pymem.deliver(..., lessons=...)` to put them into a session's turn, whose injection record then
names them. Repeated calls for the same (context, role, tags, limits) within the cache's TTL (30 s
by default) return the same result without asking the database again; a lesson filed meanwhile
shows up once it expires. `cache=None` always asks.
"""

from __future__ import annotations

import datetime as _dt
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg.rows import dict_row

from .. import queries
from ..admission.policy import AdmissionPolicy, admission_policy_in_force
from ..admission.trust import AdapterTrustPolicy, active_trust_policy
from ..config import environment
from ..delivery.budget import fit
from ..delivery.envelope import DeliveredLesson
from ..delivery.sessions import check_session_id
from ..delivery.tokens import TokenCounter, default_counter
from ..errors import InvalidArguments, UnknownSession
from ..recall import RecalledMemory, WithheldMemory, judge_hit
from ..storage.search import SearchHit
from ..storage.session_rows import session_row
from ..vocabulary import MAX_NAME, is_plain_text
from .filing import check_lesson_tags
from .similarity import rank_score

if TYPE_CHECKING:  # pragma: no cover
    from ..storage.memories import Memories

__all__ = ["LessonsForTask", "LessonCache", "lessons_for_task", "excluded_roles", "DEFAULT_LIMIT", "DEFAULT_BUDGET",
           "DEFAULT_TTL", "DEFAULT_EXCLUDED_ROLES", "DEFAULT_CACHE"]

DEFAULT_LIMIT = 5
DEFAULT_BUDGET = 5000
DEFAULT_TTL = 30.0
DEFAULT_EXCLUDED_ROLES = ("manager", "planner")
EXCLUDED_ROLES_ENV = "PYMEM_LESSONS_EXCLUDED_ROLES"

_HIT_FIELDS = tuple(f.name for f in fields(SearchHit))


@dataclass(frozen=True)
class LessonsForTask:
    """The lessons block for a task: the lessons in it (best first), the block's text, its size,
    how many lessons the budget left out, and what re-judging withheld (ids and reasons only)."""

    tags: tuple[str, ...]
    role: str | None
    lessons: list[DeliveredLesson] = field(default_factory=list)
    text: str = ""
    tokens: int = 0
    budget: int = DEFAULT_BUDGET
    truncated: int = 0
    counter: str = ""
    candidates: int = 0
    withheld: list[WithheldMemory] = field(default_factory=list)
    excluded_role: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"tags": list(self.tags), "role": self.role, "lessons": [lesson.to_json() for lesson in self.lessons],
                "block": self.text, "tokens": self.tokens, "budget": self.budget, "truncated": self.truncated,
                "counter": self.counter, "candidates": self.candidates,
                "withheld": [w.to_json() for w in self.withheld], "excluded_role": self.excluded_role}


class LessonCache:
    """Results of `lessons_for_task` by their full key, each kept `ttl` seconds (of `clock`)."""

    def __init__(self, ttl: float = DEFAULT_TTL, *, clock: Callable[[], float] = time.monotonic,
                 max_entries: int = 256):
        if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or ttl < 0:
            raise InvalidArguments("the cache's ttl must be a number of seconds >= 0")
        self.ttl = float(ttl)
        self.clock = clock
        self.max_entries = max_entries
        self._entries: OrderedDict[Hashable, tuple[float, LessonsForTask]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> LessonsForTask | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            if self.clock() - entry[0] >= self.ttl:
                del self._entries[key]
                return None
            return entry[1]

    def put(self, key: Hashable, value: LessonsForTask) -> None:
        with self._lock:
            self._entries[key] = (self.clock(), value)
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


#: The process's cache, shared by every store (its keys name the database and the context).
DEFAULT_CACHE = LessonCache()


def _check_role(role: Any) -> str | None:
    if role is None:
        return None
    if not isinstance(role, str) or not role.strip() or len(role) > MAX_NAME or not is_plain_text(role):
        raise InvalidArguments(f"a role must be 1 to {MAX_NAME} characters without control or format characters")
    return role.strip().lower()


def excluded_roles(environ: Mapping[str, str] | None = None) -> frozenset[str]:
    """The roles that never receive lessons: `environ`'s PYMEM_LESSONS_EXCLUDED_ROLES
    (comma-separated; set it empty to exclude none), else manager and planner."""
    env = environment() if environ is None else environ
    raw = env.get(EXCLUDED_ROLES_ENV)
    if raw is None:
        return frozenset(DEFAULT_EXCLUDED_ROLES)
    return frozenset(r for r in (_check_role(part) for part in raw.split(",") if part.strip()) if r)


def _count(value: Any, what: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidArguments(f"{what} must be an integer between {low} and {high}")
    return value


def _lesson(row: Mapping[str, Any], kept: RecalledMemory, task_tags: tuple[str, ...]) -> DeliveredLesson:
    decayed = row["decayed"] if row["decayed"] is not None else 0.0
    confidence = min(float(decayed), float(kept.confidence))
    return DeliveredLesson(id=row["id"], memory_type=row["memory_type"], tags=tuple(row["tags"]),
                           confidence=confidence, source_task=row["source_task"], filed_at=row["filed_at"],
                           age_days=max(0.0, float(row["age_days"])), text=row["content"] or "",
                           version=row["version"], score=rank_score(row["tags"], task_tags, confidence))


def lessons_for_task(memories: Memories, tags: Iterable[str], *, role: str | None = None,
                     limit: int = DEFAULT_LIMIT, budget: int = DEFAULT_BUDGET,
                     excluded: Iterable[str] | None = None, policy: AdmissionPolicy | None = None,
                     trust: AdapterTrustPolicy | None = None, guard: Any = None,
                     counter: TokenCounter | None = None, now: _dt.datetime | None = None,
                     cache: LessonCache | None = DEFAULT_CACHE, session_id: str | None = None,
                     conn: psycopg.Connection | None = None) -> LessonsForTask:
    """The lessons block for a task tagged `tags` (see the module docstring). `excluded`: the
    roles that get nothing (default: the store settings' `excluded_roles`); `now`: the time decay is measured to
    (default: the database's clock); `policy`, `trust`: default the store's in force (pymem.config);
    `guard`: anything with `check_input(text)` (a call with a guard is never cached).
    `session_id`: the lessons a turn of that session may receive instead, those filed in its
    scope or an ancestor's (pymem.session_lessons), rather than every lesson the context may
    read; UnknownSession when the context cannot see that session."""
    task_tags = tuple(check_lesson_tags(tags))
    if session_id is not None:
        session_id = check_session_id(session_id)
    role = _check_role(role)
    limit = _count(limit, "limit", 1, 100)
    budget = _count(budget, "budget", 1, 1_000_000)
    excluded_set = excluded_roles(memories.store.settings.environ) if excluded is None else frozenset(
        r for r in (_check_role(x) for x in _as_names(excluded)) if r)
    policy = policy if policy is not None else admission_policy_in_force(memories.store.settings)
    trust = trust if trust is not None else active_trust_policy(memories.store.settings)
    counter = counter if counter is not None else default_counter()
    if not isinstance(policy, AdmissionPolicy) or not isinstance(trust, AdapterTrustPolicy) \
            or not callable(getattr(counter, "count", None)):
        raise InvalidArguments("policy, trust and counter must be an AdmissionPolicy, an AdapterTrustPolicy and a "
                               "token counter")
    if guard is not None and not callable(getattr(guard, "check_input", None)):
        raise InvalidArguments("guard must have a check_input(text) method")
    if now is not None and (not isinstance(now, _dt.datetime) or now.tzinfo is None):
        raise InvalidArguments("now must be a timezone-aware datetime")
    if cache is not None and not isinstance(cache, LessonCache):
        raise InvalidArguments("cache must be a LessonCache (or None)")
    if role is not None and role in excluded_set:
        return LessonsForTask(tags=task_tags, role=role, budget=budget, counter=counter.name, excluded_role=True)

    ctx = memories.ctx
    key = None
    if cache is not None and guard is None:
        key = (memories.store.endpoints.app, ctx.tenant, ctx.adapter, tuple(sorted(ctx.scope.items())),
               ctx.read_adapters, role, task_tags, limit, budget, counter.name, policy.fingerprint, trust, now,
               session_id)
        found = cache.get(key)
        if found is not None:
            return found

    with memories.store.transaction(ctx, conn) as c, c.cursor(row_factory=dict_row) as cur:
        if session_id is not None:
            # a session not (yet) visible is an error, never an empty answer kept in the cache
            if session_row(c, ctx.tenant, session_id) is None:
                raise UnknownSession(f"unknown session {session_id[:100]!r}: never started in this tenant "
                                     "(or not visible here)")
            cur.execute(queries.query("session_lessons"),
                        (session_id, list(task_tags), min(1000, 10 * limit + 20), now))
        else:
            cur.execute(queries.query("lessons_for_task"),
                        (now, ctx.tenant, list(task_tags), list(task_tags), min(1000, 10 * limit + 20)))
        rows = cur.fetchall()
    ranked: list[DeliveredLesson] = []
    withheld: list[WithheldMemory] = []
    for row in rows:
        verdict = judge_hit(SearchHit(**{name: row[name] for name in _HIT_FIELDS}), policy, trust, guard)
        if isinstance(verdict, WithheldMemory):
            withheld.append(verdict)
        else:
            ranked.append(_lesson(row, verdict, task_tags))
    ranked.sort(key=lambda lesson: (-(lesson.score or 0.0), lesson.id))
    fitted = fit(None, None, None, lessons=ranked[:limit], budget=budget, counter=counter)
    result = LessonsForTask(tags=task_tags, role=role, lessons=fitted.lessons, text=fitted.text, tokens=fitted.tokens,
                            budget=budget, truncated=fitted.omitted, counter=counter.name, candidates=len(rows),
                            withheld=withheld)
    if cache is not None and key is not None:
        cache.put(key, result)
    return result


def _as_names(values: Iterable[str]) -> list[str]:
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise InvalidArguments("excluded must be a list of role names")
    return list(values)
