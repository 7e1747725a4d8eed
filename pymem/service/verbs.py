"""The verb table, and the Service that runs a verb for a verified Context.

One row per verb: its name, how it calls the library, its arguments (JSON Schemas, which are also
the only argument names accepted), the required ones, its result's schema, and whether it takes
the envelope's idempotency key. The HTTP app, the MCP tools and the OpenAPI document all read this
table; adding a capability's verb to the service is adding one row.

Identity is never an argument: a call whose arguments name tenant, actor, adapter, scope or
read_adapters (or the columns behind them) is refused before anything runs, whatever they say. A
read filter is not identity: subscribe_facts's `read_only_from_adapters` narrows the token's own
allow-list and can never widen it, so it is an argument like any other. For the same reason a
fact's reach (run or tenant), `scope` in the library, is `reach` on the wire.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg_pool import PoolTimeout

from .. import db
from ..admission.gate import admit
from ..context import Context
from ..conventions import active_conventions, file_review_correction, retire_convention
from ..conventions.receipts import DEFAULT_ORIGIN as CORRECTION_ORIGIN
from ..conventions.receipts import RETIRE_REASON
from ..delivery.deliver import DEFAULT_BUDGET, DEFAULT_TOP_K
from ..delivery.sessions import end_session, start_session
from ..delivery.supersession import erase, supersede
from ..embedder import Embedder
from ..errors import InvalidArguments, ServerError
from ..facts import publish, subscribe
from ..lessons import deliver_with_lessons, file_lesson, lessons_for_task, list_lessons
from ..lessons.filing import DEFAULT_ORIGIN as LESSON_ORIGIN
from ..lessons.selection import DEFAULT_BUDGET as LESSON_BUDGET
from ..lessons.selection import DEFAULT_LIMIT as LESSON_LIMIT
from ..recall import recall
from ..storage.memories import Memories
from ..storage.store import Store
from . import schemas as s
from .auth import IDENTITY_CLAIMS
from .limits import HeavyLane, TenantLimits, is_heavy
from .wire import PROTOCOL, ProtocolError

__all__ = ["Verb", "VERBS", "Service", "REFUSED_ARGS", "version"]

#: Argument names that would claim an identity; refused in every body and every tool call.
REFUSED_ARGS = frozenset({*IDENTITY_CLAIMS, "tenant_id", "source_adapter", "context", "ctx"})
#: Most names an error message lists (an argument object may carry any number of them).
MAX_NAMES_SHOWN = 10


@dataclass(frozen=True)
class Verb:
    name: str
    run: Callable[..., Any]  # run(memories, service, **args) -> a JSON-able result
    args: Mapping[str, s.Schema] = field(default_factory=dict)
    required: tuple[str, ...] = ()
    result: s.Schema = field(default_factory=dict)
    summary: str = ""
    keyed: bool = False  # takes the envelope's idempotency_key, which is then required


def _remember(mem: Memories, svc: Service, record: Any, provenance: Any) -> dict[str, Any]:
    return admit(mem, record, provenance, embedder=svc.embedder)


def _recall(mem: Memories, svc: Service, query: Any, top_k: int = 5, scope_filter: Any = None) -> dict[str, Any]:
    return recall(mem, query, top_k=top_k, scope_filter=scope_filter, embedder=svc.embedder).to_json()


def _start_session(mem: Memories, svc: Service, session_id: str, surface: str, incognito: bool = False,
                   first_message: str | None = None) -> dict[str, Any]:
    return start_session(mem, session_id, surface, incognito=incognito, first_message=first_message).to_json()


def _deliver(mem: Memories, svc: Service, session_id: str, query: str | None = None, turn: int | None = None,
             budget: int = DEFAULT_BUDGET, top_k: int = DEFAULT_TOP_K, lesson_tags: Any = None,
             role: str | None = None) -> dict[str, Any]:
    return deliver_with_lessons(mem, session_id, query, lesson_tags, role=role, turn=turn, budget=budget, top_k=top_k,
                                embedder=svc.embedder).to_json()


def _file_lesson(mem: Memories, svc: Service, content: str, tags: Any, memory_type: str,
                 confidence: float | None = None, source_task: str | None = None,
                 origin: str = LESSON_ORIGIN) -> dict[str, Any]:
    return file_lesson(mem, content, tags, memory_type, confidence, source_task, origin=origin,
                       embedder=svc.embedder).to_json()


def _lessons_for_task(mem: Memories, svc: Service, tags: Any, role: str | None = None, limit: int = LESSON_LIMIT,
                      budget: int = LESSON_BUDGET) -> dict[str, Any]:
    return lessons_for_task(mem, tags, role=role, limit=limit, budget=budget).to_json()


def _file_review_correction(mem: Memories, svc: Service, rule_text: str, subject: str, base_commit: str,
                            assertion: str, subject_symbol: str | None = None, tags: Any = None,
                            confidence: float | None = None, source_task: str | None = None,
                            origin: str = CORRECTION_ORIGIN) -> dict[str, Any]:
    return file_review_correction(mem, rule_text, subject, base_commit, assertion, subject_symbol,
                                  tags=() if tags is None else tags, confidence=confidence, source_task=source_task,
                                  origin=origin, embedder=svc.embedder).to_json()


def _retire_convention(mem: Memories, svc: Service, receipt_id: str, reason: str | None = None) -> dict[str, Any]:
    return retire_convention(mem, receipt_id, RETIRE_REASON if reason is None else reason).to_json()


# A fact's reach is `reach` on the wire: `scope` names the token's authorised scope and is refused.
def _publish_fact(mem: Memories, svc: Service, tag: str, key: str, value: str, reach: str = "run",
                  run_id: str | None = None, producer_task: str | None = None) -> dict[str, Any]:
    return publish(mem, tag, key, value, reach, run_id=run_id, producer_task=producer_task).to_json()


def _subscribe_facts(mem: Memories, svc: Service, tag: str, reach: str = "run", run_id: str | None = None,
                     read_only_from_adapters: Any = None) -> list[dict[str, Any]]:
    return [f.to_json() for f in subscribe(mem, tag, reach, run_id=run_id,
                                           read_only_from_adapters=read_only_from_adapters)]


VERBS: dict[str, Verb] = {v.name: v for v in (
    Verb("upsert_many", lambda m, _, **a: m.upsert_many(**a), s.UPSERT_ARGS, ("records",), s.UPSERTED,
         "store chunk records verbatim, atomically, replay-or-conflict on the idempotency key", keyed=True),
    Verb("search", lambda m, _, **a: m.search(**a), s.SEARCH_ARGS, ("vector", "top_k"), s.HITS,
         "the top_k visible chunks closest by cosine, in scope"),
    Verb("get", lambda m, _, id: m.get(id), {"id": s.ID}, ("id",), s.nullable(s.STORED),
         "one chunk record with its revision, or null"),
    Verb("get_many", lambda m, _, ids: m.get_many(ids), {"ids": s.IDS}, ("ids",), {"type": "array", "items": s.STORED},
         "the records found, in the order asked"),
    Verb("delete_many", lambda m, _, ids: m.delete_many(ids), {"ids": s.IDS}, ("ids",), s.DELETED,
         "delete records in one transaction, one ledger event each"),
    Verb("list", lambda m, _, **a: m.list_chunks(**a), s.LIST_ARGS, (), s.PAGE, "a page of the records, in id order"),
    Verb("describe_store", lambda m, _: m.describe_store(), result=s.CAPABILITIES,
         summary="what the store implements, and nothing more"),
    Verb("health", lambda m, _: m.health(), result=s.HEALTH, summary="database reachable, pgvector, schema current"),
    Verb("remember", _remember, s.REMEMBER_ARGS, ("record", "provenance"), s.ADMITTED,
         "the write gate: admit the record under the policy in force, or refuse it (audited)"),
    Verb("recall", _recall, s.RECALL_ARGS, ("query",), s.RECALLED,
         "search, then re-judge every hit under the policy in force now: kept and withheld"),
    Verb("start_session", _start_session, s.START_SESSION_ARGS, ("session_id", "surface"), s.SESSION,
         "start a session (a conversation) on a surface"),
    Verb("end_session", lambda m, _, session_id, summary=None: end_session(m, session_id, summary=summary).to_json(),
         s.END_SESSION_ARGS, ("session_id",), s.SESSION, "end a session, storing its summary (scanned, audited)"),
    Verb("deliver", _deliver, s.DELIVER_ARGS, ("session_id",), s.DELIVERED,
         "the block one turn of a session receives, within a token budget, and its injection record; with "
         "lesson_tags (and role), the lessons for the task too, named in the record"),
    Verb("supersede", lambda m, svc, old_id, record, provenance: supersede(m, old_id, record, provenance,
                                                                           embedder=svc.embedder),
         s.SUPERSEDE_ARGS, ("old_id", "record", "provenance"), s.ADMITTED,
         "admit a record as the successor of a memory, which stops being believed"),
    Verb("erase", lambda m, _, id, reason: {"id": id, "seq": erase(m, id, reason)}, s.ERASE_ARGS, ("id", "reason"),
         s.ERASED, "erase a memory's content, record and embedding, keeping its hash; the reason is chained"),
    Verb("file_lesson", _file_lesson, s.FILE_LESSON_ARGS, ("content", "tags", "memory_type"), s.FILED_LESSON,
         "file a lesson through the write gate, or confirm its near-duplicate (its version goes up)"),
    Verb("list_lessons", lambda m, _, **a: [x.to_json() for x in list_lessons(m, **a)], s.LIST_LESSONS_ARGS, (),
         {"type": "array", "items": s.LESSON}, "the lessons, last filed first, with their confidence decayed to now"),
    Verb("lessons_for_task", _lessons_for_task, s.LESSONS_FOR_TASK_ARGS, ("tags",), s.LESSONS_FOR_TASK,
         "the lessons block for a task: the best lessons sharing its tags, rendered, and the lessons themselves"),
    Verb("file_review_correction", _file_review_correction, s.FILE_CORRECTION_ARGS,
         ("rule_text", "subject", "base_commit", "assertion"), s.FILED_CORRECTION,
         "file a review correction: a feedback lesson and a signed, commit-pinned convention receipt"),
    Verb("active_conventions", lambda m, _: active_conventions(m).to_json(), result=s.ACTIVE_CONVENTIONS,
         summary="the rules in force and their ruleset hash"),
    Verb("retire_convention", _retire_convention, s.RETIRE_ARGS, ("receipt_id",), s.CONVENTION,
         "take a rule out of force by an appended event (the receipt stays)"),
    Verb("publish_fact", _publish_fact, s.PUBLISH_ARGS, ("tag", "key", "value"), s.FACT,
         "publish a fact for the tasks of a run (reach run) or of the whole tenant (reach tenant)"),
    Verb("subscribe_facts", _subscribe_facts, s.SUBSCRIBE_ARGS, ("tag",), s.FACTS,
         "the facts published so far under a tag, oldest first, narrowed by an adapter allow-list if given"),
)}


def version() -> str:
    try:
        return importlib.metadata.version("pymem-pg")  # the distribution; the import package is pymem
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - a source tree without metadata
        return "0"


def names_shown(names: Any) -> str:
    """The first MAX_NAMES_SHOWN names, sorted and cut to 64 characters each, and how many more."""
    shown = sorted(str(k)[:64] for k in names)
    more = len(shown) - MAX_NAMES_SHOWN
    return ", ".join(shown[:MAX_NAMES_SHOWN]) + (f" and {more} more" if more > 0 else "")


def check_args(verb: Verb, args: Any) -> dict[str, Any]:
    """The call's arguments as keywords: an object, no identity, only the verb's names, required present."""
    if args is None:
        args = {}
    if not isinstance(args, Mapping):
        raise InvalidArguments(f"args must be an object, got {type(args).__name__}")
    claimed = sorted(REFUSED_ARGS.intersection(args))
    if claimed:
        raise ProtocolError("identity_in_body", f"{', '.join(claimed)} may not be given in a call: "
                            "identity comes from the verified token (or the process's context) only")
    unknown = [k for k in args if k not in verb.args]
    if unknown:
        known = ", ".join(verb.args) or "none"
        raise InvalidArguments(f"unknown argument(s) for {verb.name}: {names_shown(unknown)} (known: {known})")
    missing = [k for k in verb.required if k not in args]
    if missing:
        raise InvalidArguments(f"{verb.name} needs {', '.join(missing)}")
    return dict(args)


class Service:
    """The verbs of one open store, for callers whose identity was already verified."""

    def __init__(self, store: Store, *, embedder: Embedder | None = None, verbs: Mapping[str, Verb] | None = None,
                 per_tenant: int | None = None, heavy_calls: int | None = None):
        """`per_tenant`: the most calls one tenant may run at a time (None: no limit); a call
        beyond it raises TenantBusy at once. `heavy_calls`: the most heavy calls (many records,
        long texts) the service runs at once, among all tenants (None: no bound); a heavy call
        waits for a slot up to the store's pool wait (pymem.service.limits)."""
        self.store = store
        # the store's embedder (the one its vectors were written with), or `embedder` checked against it
        self.embedder = store.text_embedder(embedder)
        self.verbs = dict(VERBS if verbs is None else verbs)
        self.limits = TenantLimits(per_tenant)
        self.heavy = HeavyLane(heavy_calls, store.settings.pool_wait)

    def call(self, ctx: Context, verb: str, args: Any = None, idempotency_key: str | None = None) -> Any:
        """Run one verb in `ctx`; raises pymem's typed errors or ProtocolError."""
        entry = self.verbs.get(verb) if isinstance(verb, str) else None
        if entry is None:
            shown = verb[:64] if isinstance(verb, str) else type(verb).__name__
            raise ProtocolError("unknown_verb", f"unknown verb {shown!r}; known: {', '.join(sorted(self.verbs))}")
        kwargs = check_args(entry, args)
        if entry.keyed:
            kwargs["idempotency_key"] = idempotency_key
        elif idempotency_key is not None:
            raise InvalidArguments(f"{entry.name} takes no idempotency_key")
        with self.limits.slot(ctx.tenant), self.heavy.slot(ctx.tenant, is_heavy(kwargs)), \
                _database_unavailable(self.store):
            return entry.run(self.store.bind(ctx), self, **kwargs)

    def handshake(self, ctx: Context, protocols: Any = None) -> dict[str, Any]:
        """Capability negotiation: the protocol spoken, the verbs, what the store implements, who you are."""
        if protocols is not None:
            if not isinstance(protocols, list) or not all(isinstance(p, str) for p in protocols):
                raise InvalidArguments("protocols must be a list of protocol names")
            if PROTOCOL not in protocols:
                raise ProtocolError("protocol_unsupported", f"this service speaks {PROTOCOL} only")
        with _database_unavailable(self.store):
            store = self.store.bind(ctx).describe_store()
        return {
            "protocol": PROTOCOL,
            "server": {"name": "pymem", "version": version()},
            "verbs": sorted(self.verbs),
            "store": store,
            "identity": {"tenant": ctx.tenant, "actor": ctx.actor, "adapter": ctx.adapter, "scope": dict(ctx.scope)},
        }


@contextlib.contextmanager
def _database_unavailable(store: Store) -> Iterator[None]:
    """A connection the pool could not hand out in time (every one busy: PoolExhausted; none could
    be opened: ServerError), or one that dropped, outside the library's own translation: a 503,
    never an internal error."""
    try:
        yield
    except PoolTimeout as exc:
        raise db.pool_error(store.pool, store.settings.pool_wait) from exc
    except psycopg.OperationalError as exc:
        raise ServerError(f"the database is unavailable ({type(exc).__name__})") from exc
