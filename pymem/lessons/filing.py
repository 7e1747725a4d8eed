"""Filing a lesson, and listing lessons with their confidence after decay.

A lesson is a memory of kind 'lesson': its text is the content, its tags the memory's tags, its
type, version and source task live in its record. It is written through the write gate like any
memory (`pymem.admission.gate.screen`: instruction-shaped content and origins the policy does not
persist are refused, and the refusal audited, before anything is written), and chained like any
memory.

A near-duplicate (pymem.lessons.similarity: same type, tag Jaccard >= 0.75, word Jaccard > 0.8)
of a lesson of the same scope, filed by the same adapter (or both by the operator), does not add
a row: the existing lesson's version goes up by one and its stored confidence becomes the larger
of the two, in one update chained as memory.update. Its filing time moves to now, so decay
restarts: a lesson filed again is a lesson confirmed again. Lessons of other adapters are never
merged into (an adapter changes only its own rows; the operator merging into an agent's lesson
would re-tag it as the operator's).

Concurrent filers cannot both miss each other's lesson: the check and the write run in one
transaction that first locks the tenant's filing row for the lesson type (pymem.lock_for_filing:
a row under row-level security that only the tenant's own context can lock, never an advisory
key any login could compute and hold), so filings of one type in one tenant serialize (Postgres
releases the lock at commit, after the row is visible) while other types and tenants never
wait. A filing waits at most `Settings.filing_lock_timeout_ms` (PYMEM_FILING_LOCK_TIMEOUT_MS)
for another one, then fails with LockTimeout and writes nothing.
"""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from .. import queries
from ..admission.gate import Screened, screen
from ..admission.policy import AdmissionPolicy
from ..admission.provenance import Origin, Provenance
from ..context import Context
from ..delivery.envelope import STALE_AFTER_DAYS
from ..embedder import Embedder
from ..errors import InvalidArguments, RevisionMismatch
from ..vocabulary import LESSON_KIND, LESSON_TYPES, MAX_NAME, MAX_TAG, MAX_TAGS, ORIGINS, is_plain_text
from .similarity import is_near_duplicate, normalise_tags, tag_similarity, word_similarity

if TYPE_CHECKING:  # pragma: no cover
    from ..storage.memories import Memories

__all__ = ["Lesson", "FiledLesson", "file_lesson", "list_lessons", "check_lesson", "screen_lesson", "write_lesson",
           "lock_for_filing", "MAX_LESSON_CHARS", "DEFAULT_ORIGIN"]

#: Lessons are short: a sentence or a paragraph, never a document.
MAX_LESSON_CHARS = 2000
#: An agent's lesson is its own conclusion, believed as far as the policy believes inferences.
DEFAULT_ORIGIN = "model_inferred"
#: What the gate records as the write's source (a refusal's tool is memory.write:lessons).
SOURCE = "lessons"


@dataclass(frozen=True)
class Lesson:
    """A stored lesson as read now: its stored confidence, and that confidence after decay."""

    id: str
    memory_type: str
    tags: list[str]
    content: str | None
    confidence: float | None
    decayed_confidence: float | None
    version: int
    source_task: str | None
    origin: str | None
    source_adapter: str | None
    created_at: _dt.datetime
    filed_at: _dt.datetime
    age_days: float

    @property
    def stale(self) -> bool:
        return self.age_days > STALE_AFTER_DAYS

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["created_at"] = self.created_at.isoformat()
        out["filed_at"] = self.filed_at.isoformat()
        out["stale"] = self.stale
        return out


@dataclass(frozen=True)
class FiledLesson:
    """What filing did: a new lesson (version 1), or a merge into a near-duplicate (`merged`,
    with the similarities that made it one)."""

    id: str
    memory_type: str
    tags: list[str]
    confidence: float
    version: int
    merged: bool
    source_task: str | None = None
    tag_similarity: float | None = None
    word_similarity: float | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _check_name(value: Any, what: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_NAME or not is_plain_text(value):
        raise InvalidArguments(f"{what} must be 1 to {MAX_NAME} characters without control or format characters")
    return value.strip()


def check_lesson_type(memory_type: Any) -> str:
    if not isinstance(memory_type, str) or memory_type.strip().lower() not in LESSON_TYPES:
        raise InvalidArguments(f"a lesson's type must be one of {', '.join(LESSON_TYPES)}")
    return memory_type.strip().lower()


def check_lesson_tags(tags: Any, *, required: bool = True) -> list[str]:
    """1 to MAX_TAGS tags of plain text, normalised (stripped, lowercased), each once, sorted."""
    # A mapping or a set is iterable too, but not a list of tags: {} would pass as "no tags".
    if isinstance(tags, (str, bytes, Mapping, set, frozenset)) or not isinstance(tags, Iterable):
        raise InvalidArguments("tags must be a list of strings")
    tags = list(tags)
    for tag in tags:
        if not isinstance(tag, str) or not tag.strip() or len(tag) > MAX_TAG or not is_plain_text(tag):
            raise InvalidArguments(f"each tag must be 1 to {MAX_TAG} characters without control or format characters")
    out = list(normalise_tags(tags))
    if required and not out:
        raise InvalidArguments("a lesson needs at least one tag (lessons are found by their tags)")
    if len(out) > MAX_TAGS:
        raise InvalidArguments(f"at most {MAX_TAGS} tags")
    return out


def check_lesson(content: Any, tags: Any, memory_type: Any, confidence: Any = None,
                 source_task: Any = None) -> tuple[str, list[str], str, float | None, str | None]:
    """The arguments of a filing, checked and normalised; InvalidArguments names the field (never
    the content)."""
    if not isinstance(content, str) or not content.strip():
        raise InvalidArguments("a lesson's text must be a non-empty string")
    if len(content) > MAX_LESSON_CHARS or "\x00" in content:
        raise InvalidArguments(f"a lesson's text must be at most {MAX_LESSON_CHARS} characters, without NUL")
    try:
        content.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidArguments("a lesson's text is not valid Unicode (lone surrogate)") from None
    if confidence is not None and (isinstance(confidence, bool) or not isinstance(confidence, (int, float))
                                   or not math.isfinite(confidence) or not 0 <= confidence <= 1):
        raise InvalidArguments("confidence must be a number between 0 and 1")
    return (content.strip(), check_lesson_tags(tags), check_lesson_type(memory_type),
            float(confidence) if confidence is not None else None, _check_name(source_task, "source task"))


def _check_origin(origin: Any) -> Origin:
    if not isinstance(origin, str) or origin not in ORIGINS:
        raise InvalidArguments(f"origin must be one of {', '.join(ORIGINS)}")
    return Origin(origin)


def screen_lesson(memories: Memories, content: str, tags: list[str], memory_type: str, confidence: float | None,
                  source_task: str | None, *, origin: str = DEFAULT_ORIGIN, extra: Mapping[str, Any] | None = None,
                  policy: AdmissionPolicy | None = None, embedder: Embedder | None = None,
                  conn: psycopg.Connection | None = None) -> Screened:
    """The write gate's judgement of a checked lesson (raises MemoryAdmissionError, audited)."""
    record: dict[str, Any] = {"content": content, "kind": LESSON_KIND, "tags": tags, "memory_type": memory_type,
                              "version": 1}
    if source_task is not None:
        record["source_task"] = source_task
    if confidence is not None:
        record["confidence"] = confidence
    if extra:
        record.update(extra)
    provenance = Provenance(origin=_check_origin(origin), source=SOURCE)
    return screen(memories, record, provenance, policy=policy, embedder=embedder, conn=conn)


def lock_for_filing(conn: psycopg.Connection, name: str, timeout_ms: int) -> None:
    """Serialize, until `conn`'s transaction ends, the context tenant's filings named `name`
    ("lessons:<type>", "conventions"), waiting at most `timeout_ms` (then LockTimeout)."""
    conn.execute(queries.query("lock_for_filing"), (name, timeout_ms))


def write_lesson(memories: Memories, conn: psycopg.Connection, screened: Screened) -> FiledLesson:
    """Merge a screened lesson into its near-duplicate, or insert it, on `conn` (whose transaction
    carries the context): the lock, the check and the write in that one transaction."""
    ctx: Context = memories.ctx
    record = screened.record
    memory_type, tags, content = record["memory_type"], list(record["tags"]), record["content"]
    scope = screened.row["scope"]
    lock_for_filing(conn, f"lessons:{memory_type}", memories.store.settings.filing_lock_timeout_ms)
    with conn.cursor(row_factory=dict_row) as cur:
        cur.execute(queries.query("lesson_duplicate_candidates"),
                    (ctx.tenant, memory_type, Jsonb(scope), ctx.adapter, tags))
        candidates = cur.fetchall()
    matches = [c for c in candidates if is_near_duplicate(c["tags"], c["content"] or "", tags, content)]
    if not matches:
        memories.add([screened.row], conn=conn)
        return FiledLesson(id=screened.row["id"], memory_type=memory_type, tags=tags,
                           confidence=float(record["confidence"]), version=1, merged=False,
                           source_task=record.get("source_task"))
    # the closest match, then the oldest: deterministic whatever order the rows came in
    best = max(matches, key=lambda c: (word_similarity(c["content"] or "", content), tag_similarity(c["tags"], tags),
                                       -c["created_at"].timestamp(), c["id"]))
    confidence = max(float(best["confidence"] or 0.0), float(record["confidence"]))
    version = best["version"] + 1
    row = conn.execute(queries.query("merge_lesson"),
                       (confidence, version, confidence, ctx.tenant, best["id"], best["revision"])).fetchone()
    if row is None:
        raise RevisionMismatch(f"lesson {best['id'][:100]!r} changed while it was being merged; file it again")
    return FiledLesson(id=best["id"], memory_type=memory_type, tags=list(best["tags"]), confidence=float(row[1]),
                       version=version, merged=True, source_task=best["source_task"],
                       tag_similarity=float(tag_similarity(best["tags"], tags)),
                       word_similarity=float(word_similarity(best["content"] or "", content)))


def file_lesson(memories: Memories, content: str, tags: Iterable[str], memory_type: str,
                confidence: float | None = None, source_task: str | None = None, *, origin: str = DEFAULT_ORIGIN,
                policy: AdmissionPolicy | None = None, embedder: Embedder | None = None,
                conn: psycopg.Connection | None = None) -> FiledLesson:
    """File a lesson, or confirm its near-duplicate (see the module docstring).

    `memory_type`: one of pymem.vocabulary.LESSON_TYPES (its half-life sets the decay).
    `confidence`: a request in [0, 1]; the admission policy caps it by `origin` (default
    model_inferred) and supplies it when absent. `source_task`: the task that learned it.
    Raises InvalidArguments (nothing written) or MemoryAdmissionError (refused and audited).
    With `conn`, it joins the caller's transaction (file before other writes in it: the gate
    cannot audit a refusal while the caller holds the tenant's chain lock).
    """
    content, tags, memory_type, confidence, source_task = check_lesson(content, tags, memory_type, confidence,
                                                                        source_task)
    screened = screen_lesson(memories, content, tags, memory_type, confidence, source_task, origin=origin,
                             policy=policy, embedder=embedder, conn=conn)
    with memories.store.transaction(memories.ctx, conn) as c:
        return write_lesson(memories, c, screened)


def _check_now(now: Any) -> _dt.datetime | None:
    if now is None:
        return None
    if not isinstance(now, _dt.datetime) or now.tzinfo is None:
        raise InvalidArguments("now must be a timezone-aware datetime")
    return now


def list_lessons(memories: Memories, *, memory_type: str | None = None, tag: str | None = None, limit: int = 100,
                 now: _dt.datetime | None = None, conn: psycopg.Connection | None = None) -> list[Lesson]:
    """The context's lessons, last filed first, each with its confidence decayed to `now` (default:
    the database's clock). Reading changes nothing."""
    memory_type = check_lesson_type(memory_type) if memory_type is not None else None
    tag = check_lesson_tags([tag])[0] if tag is not None else None
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 10_000:
        raise InvalidArguments("limit must be an integer between 1 and 10000")
    now = _check_now(now)
    with memories.store.transaction(memories.ctx, conn) as c, c.cursor(row_factory=dict_row) as cur:
        cur.execute(queries.query("list_lessons"),
                    (now, memories.ctx.tenant, memory_type, memory_type, tag, tag, limit))
        rows = cur.fetchall()
    return [Lesson(**row) for row in rows]
