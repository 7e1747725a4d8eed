"""The library's verbs on a bound `pymem.aio.Memories`, as coroutines: admitting (and deciding the
notes the gate held), recalling and delivering, sessions, supersession and erasure, lessons and shared facts.

Each is the sync verb of the same name with the same arguments, defaults, results and typed
errors, run on the bridge (pymem.bridge): its own code, SQL and transaction, its waits for the
server awaited on the event loop and its CPU work (the content check, embedding) on a worker
thread; `conn=` takes a caller's `psycopg.AsyncConnection`, joined as the sync verbs join a
caller's connection. A test keeps every signature equal to its sync twin's.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable, Mapping, Sequence
from datetime import timedelta
from typing import Any

from .. import bridge
from ..admission.gate import admit as admit_
from ..admission.policy import AdmissionPolicy
from ..admission.provenance import Provenance
from ..admission.quarantine import QuarantinedNote
from ..admission.quarantine import get_quarantined as get_quarantined_
from ..admission.quarantine import list_quarantined as list_quarantined_
from ..admission.quarantine import reject_quarantined as reject_quarantined_
from ..admission.quarantine import release_quarantined as release_quarantined_
from ..admission.trust import AdapterTrustPolicy
from ..delivery.deliver import Delivery
from ..delivery.deliver import deliver as deliver_
from ..delivery.envelope import DeliveredLesson
from ..delivery.sessions import Session
from ..delivery.sessions import end_session as end_session_
from ..delivery.sessions import erase_session as erase_session_
from ..delivery.sessions import list_sessions as list_sessions_
from ..delivery.sessions import start_session as start_session_
from ..delivery.supersession import erase as erase_
from ..delivery.supersession import supersede as supersede_
from ..delivery.tiers import TrustTiers
from ..delivery.tokens import TokenCounter
from ..embedder import Embedder
from ..facts.sharing import Fact
from ..facts.sharing import publish as publish_
from ..facts.sharing import subscribe as subscribe_
from ..lessons.delivery_turn import deliver_with_lessons as deliver_with_lessons_
from ..lessons.filing import FiledLesson, Lesson
from ..lessons.filing import file_lesson as file_lesson_
from ..lessons.filing import list_lessons as list_lessons_
from ..lessons.selection import DEFAULT_CACHE, LessonCache, LessonsForTask
from ..lessons.selection import lessons_for_task as lessons_for_task_
from ..recall import RecallResult
from ..recall import recall as recall_
from .store import AsyncConn, Memories, sync_conn, sync_memories

__all__ = ["admit", "list_quarantined", "get_quarantined", "release_quarantined", "reject_quarantined",
           "recall", "deliver", "start_session", "end_session", "supersede", "erase", "erase_session",
           "list_sessions", "file_lesson", "list_lessons", "lessons_for_task", "deliver_with_lessons", "publish",
           "subscribe"]


async def admit(memories: Memories, record: Mapping[str, Any] | str, provenance: Provenance | Mapping[str, Any], *,
                policy: AdmissionPolicy | None = None, embedder: Embedder | None = None,
                ttl: float | timedelta | None = None, subject: str | None = None,
                conn: AsyncConn | None = None, hold: bool = True) -> dict[str, Any]:
    """`pymem.admit`, awaited."""
    return await bridge.run(admit_, sync_memories(memories), record, provenance, policy=policy, embedder=embedder,
                            ttl=ttl, subject=subject, conn=sync_conn(conn), hold=hold)


async def list_quarantined(memories: Memories, *, status: str | None = "held", limit: int = 100,
                           conn: AsyncConn | None = None) -> list[QuarantinedNote]:
    """`pymem.admission.list_quarantined`, awaited."""
    return await bridge.run(list_quarantined_, sync_memories(memories), status=status, limit=limit,
                            conn=sync_conn(conn))


async def get_quarantined(memories: Memories, note_id: str, *,
                          conn: AsyncConn | None = None) -> QuarantinedNote | None:
    """`pymem.admission.get_quarantined`, awaited."""
    return await bridge.run(get_quarantined_, sync_memories(memories), note_id, conn=sync_conn(conn))


async def release_quarantined(memories: Memories, note_id: str, reason: str, *,
                              conn: AsyncConn | None = None) -> int:
    """`pymem.admission.release_quarantined`, awaited."""
    return await bridge.run(release_quarantined_, sync_memories(memories), note_id, reason, conn=sync_conn(conn))


async def reject_quarantined(memories: Memories, note_id: str, reason: str, *,
                             conn: AsyncConn | None = None) -> int:
    """`pymem.admission.reject_quarantined`, awaited."""
    return await bridge.run(reject_quarantined_, sync_memories(memories), note_id, reason, conn=sync_conn(conn))


async def recall(memories: Memories, query: str | Sequence[float], *, top_k: int = 5,
                 policy: AdmissionPolicy | None = None, guard: Any = None, trust: AdapterTrustPolicy | None = None,
                 embedder: Embedder | None = None, scope_filter: Mapping[str, str] | None = None, as_of: Any = None,
                 floor: float | None = None, hybrid: bool = True, conn: AsyncConn | None = None) -> RecallResult:
    """`pymem.recall`, awaited."""
    return await bridge.run(recall_, sync_memories(memories), query, top_k=top_k, policy=policy, guard=guard,
                            trust=trust, embedder=embedder, scope_filter=scope_filter, as_of=as_of,
                            floor=floor, hybrid=hybrid, conn=sync_conn(conn))


async def deliver(memories: Memories, session_id: str, query: str | None, *, turn: int | None = None,
                  budget: int = 1000, top_k: int = 5, max_sessions: int = 10, max_hot: int = 5,
                  floor: float | None = None, tiers: TrustTiers | None = None, policy: AdmissionPolicy | None = None,
                  trust: AdapterTrustPolicy | None = None, guard: Any = None, embedder: Embedder | None = None,
                  counter: TokenCounter | None = None, now: _dt.datetime | None = None,
                  lessons: Sequence[DeliveredLesson] | None = None, conn: AsyncConn | None = None) -> Delivery:
    """`pymem.deliver`, awaited."""
    return await bridge.run(deliver_, sync_memories(memories), session_id, query, turn=turn, budget=budget,
                            top_k=top_k, max_sessions=max_sessions, max_hot=max_hot, floor=floor,
                            tiers=tiers, policy=policy, trust=trust, guard=guard, embedder=embedder,
                            counter=counter, now=now, lessons=lessons, conn=sync_conn(conn))


async def start_session(memories: Memories, session_id: str, surface: str, *, incognito: bool = False,
                        first_message: str | None = None, messages: Sequence[Mapping[str, Any]] | None = None,
                        conn: AsyncConn | None = None) -> Session:
    """`pymem.start_session`, awaited."""
    return await bridge.run(start_session_, sync_memories(memories), session_id, surface, incognito=incognito,
                            first_message=first_message, messages=messages, conn=sync_conn(conn))


async def end_session(memories: Memories, session_id: str, *, summary: str | None = None,
                      conn: AsyncConn | None = None) -> Session:
    """`pymem.end_session`, awaited."""
    return await bridge.run(end_session_, sync_memories(memories), session_id, summary=summary, conn=sync_conn(conn))


async def supersede(memories: Memories, old_id: str, new_record: Mapping[str, Any] | str,
                    provenance: Provenance | Mapping[str, Any], *, policy: AdmissionPolicy | None = None,
                    embedder: Embedder | None = None, conn: AsyncConn | None = None) -> dict[str, Any]:
    """`pymem.supersede`, awaited."""
    return await bridge.run(supersede_, sync_memories(memories), old_id, new_record, provenance, policy=policy,
                            embedder=embedder, conn=sync_conn(conn))


async def erase(memories: Memories, memory_id: str, reason: str, *, conn: AsyncConn | None = None) -> int:
    """`pymem.erase`, awaited."""
    return await bridge.run(erase_, sync_memories(memories), memory_id, reason, conn=sync_conn(conn))


async def erase_session(memories: Memories, session_id: str, reason: str, *, conn: AsyncConn | None = None) -> int:
    """`pymem.delivery.erase_session`, awaited."""
    return await bridge.run(erase_session_, sync_memories(memories), session_id, reason, conn=sync_conn(conn))


async def list_sessions(memories: Memories, *, limit: int = 100, conn: AsyncConn | None = None) -> list[Session]:
    """`pymem.delivery.list_sessions`, awaited."""
    return await bridge.run(list_sessions_, sync_memories(memories), limit=limit, conn=sync_conn(conn))


async def file_lesson(memories: Memories, content: str, tags: Iterable[str], memory_type: str,
                      confidence: float | None = None, source_task: str | None = None, *,
                      origin: str = 'model_inferred', policy: AdmissionPolicy | None = None,
                      embedder: Embedder | None = None, conn: AsyncConn | None = None) -> FiledLesson:
    """`pymem.lessons.file_lesson`, awaited."""
    return await bridge.run(file_lesson_, sync_memories(memories), content, tags, memory_type, confidence, source_task,
                            origin=origin, policy=policy, embedder=embedder, conn=sync_conn(conn))


async def list_lessons(memories: Memories, *, memory_type: str | None = None, tag: str | None = None, limit: int = 100,
                       now: _dt.datetime | None = None, conn: AsyncConn | None = None) -> list[Lesson]:
    """`pymem.lessons.list_lessons`, awaited."""
    return await bridge.run(list_lessons_, sync_memories(memories), memory_type=memory_type, tag=tag, limit=limit,
                            now=now, conn=sync_conn(conn))


async def lessons_for_task(memories: Memories, tags: Iterable[str], *, role: str | None = None, limit: int = 5,
                           budget: int = 5000, excluded: Iterable[str] | None = None,
                           policy: AdmissionPolicy | None = None, trust: AdapterTrustPolicy | None = None,
                           guard: Any = None, counter: TokenCounter | None = None, now: _dt.datetime | None = None,
                           cache: LessonCache | None = DEFAULT_CACHE, session_id: str | None = None,
                           conn: AsyncConn | None = None) -> LessonsForTask:
    """`pymem.lessons.lessons_for_task`, awaited."""
    return await bridge.run(lessons_for_task_, sync_memories(memories), tags, role=role, limit=limit, budget=budget,
                            excluded=excluded, policy=policy, trust=trust, guard=guard,
                            counter=counter, now=now, cache=cache, session_id=session_id,
                            conn=sync_conn(conn))


async def deliver_with_lessons(memories: Memories, session_id: str, query: str | None,
                               lesson_tags: Iterable[str] | None = None, *, role: str | None = None,
                               lesson_limit: int = 5, policy: AdmissionPolicy | None = None,
                               trust: AdapterTrustPolicy | None = None, guard: Any = None,
                               counter: TokenCounter | None = None, now: _dt.datetime | None = None,
                               cache: LessonCache | None = DEFAULT_CACHE, conn: AsyncConn | None = None,
                               **options: Any) -> Delivery:
    """`pymem.lessons.deliver_with_lessons`, awaited."""
    return await bridge.run(deliver_with_lessons_, sync_memories(memories), session_id, query, lesson_tags, role=role,
                            lesson_limit=lesson_limit, policy=policy, trust=trust, guard=guard,
                            counter=counter, now=now, cache=cache, conn=sync_conn(conn),
                            **options)


async def publish(memories: Memories, tag: str, key: str, value: str, scope: str = 'run', *, run_id: str | None = None,
                  producer_task: str | None = None, conn: AsyncConn | None = None) -> Fact:
    """`pymem.facts.publish`, awaited."""
    return await bridge.run(publish_, sync_memories(memories), tag, key, value, scope, run_id=run_id,
                            producer_task=producer_task, conn=sync_conn(conn))


async def subscribe(memories: Memories, tag: str, scope: str = 'run', *, run_id: str | None = None,
                    read_only_from_adapters: Sequence[str] | None = None, conn: AsyncConn | None = None) -> list[Fact]:
    """`pymem.facts.subscribe`, awaited."""
    return await bridge.run(subscribe_, sync_memories(memories), tag, scope, run_id=run_id,
                            read_only_from_adapters=read_only_from_adapters, conn=sync_conn(conn))
