"""The verb table, and the Service that runs a verb for a verified Context.

One row per verb: its name, how it calls the library, its arguments (JSON Schemas, which are also
the only argument names accepted), the required ones, its result's schema, and whether it takes
the envelope's idempotency key. The HTTP app, the MCP tools and the OpenAPI document all read this
table; adding a capability's verb to the service is adding one row.

Identity is never an argument: a call whose arguments name tenant, actor, adapter, scope or
read_adapters (or the columns behind them) is refused before anything runs, whatever they say.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping

import psycopg

from ..admission.gate import admit
from ..context import Context
from ..delivery.deliver import DEFAULT_BUDGET, DEFAULT_TOP_K, deliver
from ..delivery.memories import erase, supersede
from ..delivery.sessions import end_session, start_session
from ..embedder import Embedder, check_dimension, get_embedder
from ..errors import InvalidArguments, ServerError
from ..recall import recall
from ..storage.memories import Memories
from ..storage.store import Store
from . import schemas as s
from .auth import IDENTITY_CLAIMS
from .wire import PROTOCOL, ProtocolError

__all__ = ["Verb", "VERBS", "Service", "REFUSED_ARGS", "version"]

#: Argument names that would claim an identity; refused in every body and every tool call.
REFUSED_ARGS = frozenset({*IDENTITY_CLAIMS, "tenant_id", "source_adapter", "context", "ctx"})


@dataclass(frozen=True)
class Verb:
    name: str
    run: Callable[..., Any]  # run(memories, service, **args) -> a JSON-able result
    args: Mapping[str, s.Schema] = field(default_factory=dict)
    required: tuple[str, ...] = ()
    result: s.Schema = field(default_factory=dict)
    summary: str = ""
    keyed: bool = False  # takes the envelope's idempotency_key, which is then required


def _remember(mem: Memories, svc: "Service", record: Any, provenance: Any) -> dict[str, Any]:
    return admit(mem, record, provenance, embedder=svc.embedder)


def _recall(mem: Memories, svc: "Service", query: Any, top_k: int = 5, scope_filter: Any = None) -> dict[str, Any]:
    return recall(mem, query, top_k=top_k, scope_filter=scope_filter, embedder=svc.embedder).to_json()


def _start_session(mem: Memories, svc: "Service", session_id: str, surface: str, incognito: bool = False,
                   first_message: str | None = None) -> dict[str, Any]:
    return start_session(mem, session_id, surface, incognito=incognito, first_message=first_message).to_json()


def _deliver(mem: Memories, svc: "Service", session_id: str, query: str | None = None, turn: int | None = None,
             budget: int = DEFAULT_BUDGET, top_k: int = DEFAULT_TOP_K) -> dict[str, Any]:
    return deliver(mem, session_id, query, turn=turn, budget=budget, top_k=top_k, embedder=svc.embedder).to_json()


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
         "the block one turn of a session receives, within a token budget, and its injection record"),
    Verb("supersede", lambda m, svc, old_id, record, provenance: supersede(m, old_id, record, provenance,
                                                                           embedder=svc.embedder),
         s.SUPERSEDE_ARGS, ("old_id", "record", "provenance"), s.ADMITTED,
         "admit a record as the successor of a memory, which stops being believed"),
    Verb("erase", lambda m, _, id, reason: {"id": id, "seq": erase(m, id, reason)}, s.ERASE_ARGS, ("id", "reason"),
         s.ERASED, "erase a memory's content, record and embedding, keeping its hash; the reason is chained"),
)}


def version() -> str:
    try:
        return importlib.metadata.version("pymem")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - a source tree without metadata
        return "0"


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
    unknown = sorted(str(k)[:64] for k in args if k not in verb.args)
    if unknown:
        known = ", ".join(verb.args) or "none"
        raise InvalidArguments(f"unknown argument(s) for {verb.name}: {', '.join(unknown)} (known: {known})")
    missing = [k for k in verb.required if k not in args]
    if missing:
        raise InvalidArguments(f"{verb.name} needs {', '.join(missing)}")
    return dict(args)


class Service:
    """The verbs of one open store, for callers whose identity was already verified."""

    def __init__(self, store: Store, *, embedder: Embedder | None = None, verbs: Mapping[str, Verb] | None = None):
        self.store = store
        self.embedder = embedder if embedder is not None else get_embedder()
        check_dimension(self.embedder, store.embedding_dim)
        self.verbs = dict(VERBS if verbs is None else verbs)

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
        with _database_unavailable():
            return entry.run(self.store.bind(ctx), self, **kwargs)

    def handshake(self, ctx: Context, protocols: Any = None) -> dict[str, Any]:
        """Capability negotiation: the protocol spoken, the verbs, what the store implements, who you are."""
        if protocols is not None:
            if not isinstance(protocols, list) or not all(isinstance(p, str) for p in protocols):
                raise InvalidArguments("protocols must be a list of protocol names")
            if PROTOCOL not in protocols:
                raise ProtocolError("protocol_unsupported", f"this service speaks {PROTOCOL} only")
        with _database_unavailable():
            store = self.store.bind(ctx).describe_store()
        return {
            "protocol": PROTOCOL,
            "server": {"name": "pymem", "version": version()},
            "verbs": sorted(self.verbs),
            "store": store,
            "identity": {"tenant": ctx.tenant, "actor": ctx.actor, "adapter": ctx.adapter, "scope": dict(ctx.scope)},
        }


@contextlib.contextmanager
def _database_unavailable() -> Iterator[None]:
    """A connection the pool could not hand out in time, or one that dropped, outside the library's
    own translation: the database is unavailable (503), not an internal error."""
    try:
        yield
    except psycopg.OperationalError as exc:
        raise ServerError(f"the database is unavailable ({type(exc).__name__})") from exc
