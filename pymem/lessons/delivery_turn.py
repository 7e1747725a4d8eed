"""A session's turn with the lessons for its task: `lessons_for_task`, then `deliver` with them.

One call for what the command line, the service and the MCP `deliver` tool all do when a caller
names the task's tags: the lessons are picked and ranked as `lessons_for_task` picks them (the
role's exclusion and the cache included), among those the session receives (filed in its scope
or an ancestor's), rendered in the delivery's own envelope, and named in
the turn's injection record (`lesson_ids`). A role that receives no lessons gets a block without
a lessons section; tags that match nothing give the section, empty. Without tags it is `deliver`.

It lives here, above pymem.delivery, because picking lessons uses delivery's envelope, budget and
token counter: delivery itself cannot import lessons without a cycle between the two packages.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import psycopg

from ..admission.policy import AdmissionPolicy, admission_policy_in_force
from ..admission.trust import AdapterTrustPolicy, active_trust_policy
from ..delivery.deliver import Delivery, deliver
from ..delivery.tokens import TokenCounter, default_counter
from ..errors import InvalidArguments
from .selection import DEFAULT_CACHE, DEFAULT_LIMIT, LessonCache, lessons_for_task

if TYPE_CHECKING:  # pragma: no cover
    from ..storage.memories import Memories

__all__ = ["deliver_with_lessons"]


def deliver_with_lessons(memories: Memories, session_id: str, query: str | None,
                         lesson_tags: Iterable[str] | None = None, *, role: str | None = None,
                         lesson_limit: int = DEFAULT_LIMIT, policy: AdmissionPolicy | None = None,
                         trust: AdapterTrustPolicy | None = None, guard: Any = None,
                         counter: TokenCounter | None = None, now: _dt.datetime | None = None,
                         cache: LessonCache | None = DEFAULT_CACHE, conn: psycopg.Connection | None = None,
                         **options: Any) -> Delivery:
    """`deliver(memories, session_id, query, **options)` with the lessons for a task tagged
    `lesson_tags` (at most `lesson_limit`) for an agent in `role`. The policy, trust, guard,
    counter and clock are the same for both steps; `options` are deliver's other keywords (turn,
    budget, top_k, floor, tiers, embedder, ...). A `role` without tags is refused."""
    if lesson_tags is None:
        if role is not None:
            raise InvalidArguments("a role goes with lesson tags: name the task's tags too")
        return deliver(memories, session_id, query, policy=policy, trust=trust, guard=guard, counter=counter,
                       now=now, conn=conn, **options)
    policy = policy if policy is not None else admission_policy_in_force(memories.store.settings)
    trust = trust if trust is not None else active_trust_policy(memories.store.settings)
    counter = counter if counter is not None else default_counter()
    with memories.store.connection(conn) as c:  # one checkout for both steps
        found = lessons_for_task(memories, lesson_tags, role=role, limit=lesson_limit, policy=policy, trust=trust,
                                 guard=guard, counter=counter, now=now, cache=cache, session_id=session_id, conn=c)
        return deliver(memories, session_id, query, policy=policy, trust=trust, guard=guard, counter=counter,
                       now=now, lessons=None if found.excluded_role else found.lessons, conn=c, **options)
