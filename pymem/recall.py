"""Recall: a memory comes back into a prompt only if the policy in force *now* still believes it.

`recall(memories, query)` searches (pymem.search, under RLS), then re-judges every hit, best
first, before it may be kept:

1. the adapter trust policy (pymem.admission.trust; read from the environment at each call unless
   `trust=` is given): untagged (operator) rows are trusted, rows tagged with an adapter only
   if that adapter is allow-listed, else withheld as "untrusted adapter <name>";
2. the row's own consistency: its origin column and its provenance's origin must agree, and
   a provenance that names an adapter must name the row's writer;
3. pymem.admission.judge.rejudge under the admission policy in force now (default
   AdmissionPolicy.from_env(), read at each call): no provenance => withheld as unproven; an
   origin the current policy would not persist (or whose citation / injection-source
   requirement is unmet) => withheld; instruction-shaped content (the signatures, then the
   classifier at the policy's threshold) => withheld with the name that decided and, for the
   classifier, its score; the caller's `guard` (anything with `check_input(text)`) refusing => withheld;
   otherwise kept, its confidence capped by the current policy.

Over-fetching, stated: withheld rows must not starve the result, so the search asks for
`max(3 * top_k, top_k + 10)` candidates (at most 1000), walks them best first until `top_k`
are kept, and if it runs out while the search could have returned more, asks again for four
times as many (up to 1000). `withheld` lists exactly the hits walked past on the way: the rows
that outranked (or sat among) what was kept and would have been shown were they believed.
Rows beyond the last kept one are not judged (a guard can be expensive).

Withheld entries carry the id, the reason, the signature and the classifier's score, never the
content. Kept entries
carry the content: that is what recall is for.

`as_of=TIME` asks what was believed at that time instead (pymem.storage.as_of): rows written and
valid by then and not yet superseded then, re-judged under the policy in force now.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import psycopg

from .storage import search as _search
from .storage.as_of import check_as_of, search_rows_as_of
from .storage.search import SearchHit
from .storage.validate import check_embedding
from .admission.gate import admit
from .admission.judge import rejudge
from .embedder import Embedder, check_dimension, get_embedder
from .errors import InvalidArguments
from .vocabulary import MAX_QUERY_BYTES
from .admission.policy import AdmissionPolicy
from .admission.provenance import Provenance
from .admission.trust import AdapterTrustPolicy, active_trust_policy

if TYPE_CHECKING:  # pragma: no cover
    from .storage.memories import Memories

__all__ = ["recall", "recall_session", "WriteGate", "RecallResult", "RecalledMemory", "WithheldMemory", "judge_hit", "candidate_count",
           "OVERFETCH_FACTOR",
           "OVERFETCH_MIN_EXTRA", "OVERFETCH_GROWTH"]

OVERFETCH_FACTOR = 3
OVERFETCH_MIN_EXTRA = 10
OVERFETCH_GROWTH = 4

# Keys of a stored record that are the store's bookkeeping, re-read from the row's columns.
_FROM_COLUMNS = ("provenance", "origin", "confidence", "policy_fingerprint", "injection_source", "embedding",
                 "vector")


@dataclass(frozen=True)
class RecalledMemory:
    """A memory the current policy still believes, with the confidence it believes it at."""

    id: str
    content: str | None
    score: float
    origin: str
    confidence: float
    source_adapter: str | None
    created_at: _dt.datetime | None
    provenance: dict[str, Any]
    kind: str | None = None
    tags: list[str] = field(default_factory=list)
    reason: str = ""

    @property
    def session_id(self) -> str | None:
        """The session the memory was written in, from its provenance."""
        value = self.provenance.get("session_id") if isinstance(self.provenance, Mapping) else None
        return value if isinstance(value, str) else None

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["created_at"] = self.created_at.isoformat() if self.created_at else None
        return out


@dataclass(frozen=True)
class WithheldMemory:
    """A hit that was not returned, and why. Never carries content. `score` is the search's
    similarity; `classifier_score` the admission classifier's, when it decided."""

    id: str
    reason: str
    signature: str | None = None
    origin: str | None = None
    source_adapter: str | None = None
    score: float | None = None
    classifier_score: float | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class RecallResult:
    kept: list[RecalledMemory]
    withheld: list[WithheldMemory]
    policy_fingerprint: str
    candidates: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "kept": [k.to_json() for k in self.kept],
            "withheld": [w.to_json() for w in self.withheld],
            "policy_fingerprint": self.policy_fingerprint,
            "candidates": self.candidates,
        }


def candidate_count(top_k: int) -> int:
    """How many hits the first search asks for (see the module docstring)."""
    return min(_search.MAX_TOP_K, max(OVERFETCH_FACTOR * top_k, top_k + OVERFETCH_MIN_EXTRA))


def check_query_text(query: str, what: str = "the recall query") -> str:
    """A text query of at most MAX_QUERY_BYTES, without NUL: refused otherwise, before embedding."""
    if "\x00" in query:
        raise InvalidArguments(f"{what} contains a NUL character")
    size = len(query.encode("utf-8", "surrogatepass"))
    if size > MAX_QUERY_BYTES:
        raise InvalidArguments(f"{what} is {size} bytes; the limit is {MAX_QUERY_BYTES} (a query is a question, "
                               "not a document)")
    return query


def _query_vector(memories: "Memories", query: Any, embedder: Embedder | None) -> list[float]:
    if isinstance(query, str):
        if not query.strip():
            raise InvalidArguments("the recall query is empty")
        check_query_text(query)
        embedder = embedder if embedder is not None else get_embedder()
        check_dimension(embedder, memories.store.embedding_dim)
        return embedder.embed([query])[0]
    if isinstance(query, (bytes, Mapping)) or not isinstance(query, Sequence) and not hasattr(query, "tolist"):
        raise InvalidArguments(f"the recall query must be text or a vector, not {type(query).__name__}")
    return list(query.tolist() if hasattr(query, "tolist") else query)


def _stored_record(row: SearchHit) -> dict[str, Any]:
    """What rejudge sees: the stored record (or the row's columns when it has none), with the
    bookkeeping taken from the columns, which are what the policy set and the chain hashed."""
    base = row.record
    out = {k: v for k, v in base.items() if k not in _FROM_COLUMNS} if isinstance(base, Mapping) else {}
    if row.content is not None:
        out["content"] = row.content
    if row.confidence is not None:
        out["confidence"] = float(row.confidence)
    return out


def _withhold(row: SearchHit, reason: str, signature: str | None = None,
              origin: str | None = None, classifier_score: float | None = None) -> WithheldMemory:
    return WithheldMemory(id=row.id, reason=reason, signature=signature,
                          origin=origin if origin is not None else row.origin,
                          source_adapter=row.source_adapter, score=float(row.score),
                          classifier_score=classifier_score)


def judge_hit(row: SearchHit, policy: AdmissionPolicy, trust: AdapterTrustPolicy,
              guard: Any = None) -> RecalledMemory | WithheldMemory:
    """Re-judge one stored row (a search hit, or any row shaped like one) as recall does: adapter
    trust, consistency, then the admission policy in force and the guard."""
    adapter = row.source_adapter
    distrust = trust.verdict(adapter)
    if distrust is not None:
        return _withhold(row, distrust)
    provenance = row.provenance
    if isinstance(provenance, Mapping):
        claimed = provenance.get("origin")
        if row.origin is not None and claimed is not None and claimed != row.origin:
            return _withhold(row, "unproven: the row's origin and its provenance's origin disagree")
        if provenance.get("adapter") is not None and provenance.get("adapter") != adapter:
            return _withhold(row, "unproven: the provenance names another adapter than the row's writer")
    decision = rejudge(_stored_record(row), provenance, policy, guard)
    origin = decision.origin.value if decision.origin is not None else row.origin
    if not decision.admitted:
        return _withhold(row, decision.reason, decision.signature, origin, decision.score)
    return RecalledMemory(
        id=row.id, content=row.content, score=float(row.score), origin=origin,
        confidence=float(decision.confidence), source_adapter=adapter, created_at=row.created_at,
        provenance=dict(provenance), kind=row.kind, tags=list(row.tags or []),
        reason=decision.reason)


def recall(memories: "Memories", query: str | Sequence[float], *, top_k: int = 5,
           policy: AdmissionPolicy | None = None, guard: Any = None, trust: AdapterTrustPolicy | None = None,
           embedder: Embedder | None = None, scope_filter: Mapping[str, str] | None = None,
           as_of: Any = None, conn: psycopg.Connection | None = None) -> RecallResult:
    """Search, then re-judge every hit under the policy in force now; see the module docstring.

    `query`: text (embedded with `embedder`, default pymem.embedder.get_embedder(), checked
    against the store's dimension) or a vector. `as_of`: a datetime or ISO 8601 time to ask what
was believed then (default: now). `policy`: default AdmissionPolicy.from_env();
    `trust`: default pymem.admission.trust.active_trust_policy(); both read at this call. `guard`: any
    object with `check_input(text)`. `scope_filter`: only rows whose scope contains it.
    """
    top_k = _search.check_top_k(top_k)
    policy = policy if policy is not None else AdmissionPolicy.from_env()
    if not isinstance(policy, AdmissionPolicy):
        raise InvalidArguments(f"policy must be an AdmissionPolicy, not {type(policy).__name__}")
    trust = trust if trust is not None else active_trust_policy()
    if not isinstance(trust, AdapterTrustPolicy):
        raise InvalidArguments(f"trust must be an AdapterTrustPolicy, not {type(trust).__name__}")
    if guard is not None and not callable(getattr(guard, "check_input", None)):
        raise InvalidArguments("guard must have a check_input(text) method")
    as_of = check_as_of(as_of) if as_of is not None else None
    vector = _query_vector(memories, query, embedder)
    store = memories.store

    def search(c: psycopg.Connection, fetch: int) -> list[SearchHit]:
        if as_of is not None:
            return search_rows_as_of(c, memories.ctx, vector, fetch, as_of, scope_filter, dim=store.embedding_dim)
        return _search.search_rows(c, memories.ctx, vector, fetch, scope_filter, dim=store.embedding_dim,
                                   with_vectors=False)

    # every round of the search in one transaction, on one connection (one snapshot on pymem's own)
    with store.transaction(memories.ctx, conn, snapshot=True) as c:
        return _judged(lambda fetch: search(c, fetch), top_k, policy, trust, guard)


def recall_session(memories: "Memories", session_id: str, query: str | Sequence[float], *, top_k: int = 5,
                   policy: AdmissionPolicy | None = None, guard: Any = None, trust: AdapterTrustPolicy | None = None,
                   embedder: Embedder | None = None, conn: psycopg.Connection | None = None) -> RecallResult:
    """What a turn of session `session_id` recalls: `recall`'s search and re-judging, over the
    memories the session receives (pymem.session_search: those of its scope and of its ancestors,
    so tenant-wide memories but never a sibling scope's) instead of every row the context may read.
    Nothing when the context cannot see the session."""
    top_k = _search.check_top_k(top_k)
    policy = policy if policy is not None else AdmissionPolicy.from_env()
    trust = trust if trust is not None else active_trust_policy()
    if not isinstance(policy, AdmissionPolicy) or not isinstance(trust, AdapterTrustPolicy):
        raise InvalidArguments("policy and trust must be an AdmissionPolicy and an AdapterTrustPolicy")
    if guard is not None and not callable(getattr(guard, "check_input", None)):
        raise InvalidArguments("guard must have a check_input(text) method")
    vector = check_embedding(_query_vector(memories, query, embedder), memories.store.embedding_dim, "vector")
    with memories.store.transaction(memories.ctx, conn, snapshot=True) as c:
        return _judged(lambda fetch: _search.session_search_rows(c, session_id, vector, fetch), top_k, policy, trust,
                       guard)


def _judged(rows_for: Callable[[int], list[SearchHit]], top_k: int, policy: AdmissionPolicy,
            trust: AdapterTrustPolicy, guard: Any) -> RecallResult:
    """Walk the hits best first, re-judging each, until top_k are kept; over-fetch as the module
    docstring says."""
    fetch = candidate_count(top_k)
    judged: dict[str, RecalledMemory | WithheldMemory] = {}  # by id: a row is judged once per call
    while True:
        rows = rows_for(fetch)
        kept: list[RecalledMemory] = []
        withheld: list[WithheldMemory] = []
        for row in rows:
            verdict = judged.get(row.id)
            if verdict is None:
                verdict = judged[row.id] = judge_hit(row, policy, trust, guard)
            (kept if isinstance(verdict, RecalledMemory) else withheld).append(verdict)
            if len(kept) == top_k:
                break
        exhausted = len(rows) < fetch or fetch >= _search.MAX_TOP_K
        if len(kept) == top_k or exhausted:
            return RecallResult(kept=kept, withheld=withheld, policy_fingerprint=policy.fingerprint,
                                candidates=len(rows))
        fetch = min(_search.MAX_TOP_K, fetch * OVERFETCH_GROWTH)


class WriteGate:
    """`admit` bound to one context, policy and embedder: gate = WriteGate(memories); gate.admit(record, prov).

    `policy=None` re-reads AdmissionPolicy.from_env() at every call (the policy in force now).
    """

    def __init__(self, memories: "Memories", policy: AdmissionPolicy | None = None, *,
                 embedder: Embedder | None = None):
        self.memories = memories
        self.policy = policy
        self.embedder = embedder

    def admit(self, record: Mapping[str, Any] | str, provenance: Provenance | Mapping[str, Any], *,
              conn: psycopg.Connection | None = None) -> dict[str, Any]:
        return admit(self.memories, record, provenance, policy=self.policy, embedder=self.embedder, conn=conn)

    def recall(self, query: Any, **kwargs: Any):
        """recall() with this gate's policy and embedder (unless given)."""
        kwargs.setdefault("policy", self.policy)
        kwargs.setdefault("embedder", self.embedder)
        return recall(self.memories, query, **kwargs)
