"""Recall: a memory comes back into a prompt only if the policy in force *now* still believes it.

`recall(memories, query)` searches (pymem.search, under RLS), then re-judges every hit, best
first, before it may be kept:

1. the adapter trust policy (pymem.admission.trust; the store settings' trust in force unless
   `trust=` is given): untagged (operator) rows are trusted, rows tagged with an adapter only
   if that adapter is allow-listed, else withheld as "untrusted adapter <name>";
2. the row's own consistency: its origin column and its provenance's origin must agree, and
   a provenance that names an adapter must name the row's writer;
3. pymem.admission.judge.rejudge under the admission policy in force now (default
   policy in force, from the store's settings: pymem.config): no provenance => withheld as unproven; an
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

Verdicts are reused: the policy part of a re-judgement (step 3, the detector's work) is kept in a
per-process cache keyed by the policy's fingerprint and a digest of exactly what was judged (the
stored record, content and confidence, and the provenance), so a memory is judged once per
(content, policy) and judged again as soon as either changes: "the policy in force now" still
decides. Trust (step 1) and consistency (step 2) are checked on every call; a call with a `guard`
bypasses the cache (a guard is the caller's code, with state of its own).

Hybrid: a text query is searched by its vector and its words together (pymem.search's hybrid
ranking, full-text BM25 fused with cosine as pymem.embedder.hybrid_fusion_of says for the
store's embedder: by score, cosine + the embedder's text weight x the hit's share of the best
BM25 score, that sum being the hit's score; or by reciprocal rank, the score staying the
cosine); a vector query by cosine alone.

The floor: hits whose score is below `floor` are dropped before they are judged (they are not
relevant, so not withheld either): the same floor as deliver's, by default
the store settings' PYMEM_SIMILARITY_FLOOR, else the floor calibrated for the store's embedder
(pymem.embedder.similarity_floor_of), else DEFAULT_FLOOR.

Withheld entries carry the id, the reason, the signature and the classifier's score, never the
content. Kept entries
carry the content: that is what recall is for.

`as_of=TIME` asks what was believed at that time instead (pymem.storage.as_of): rows written and
valid by then and not yet superseded then, re-judged under the policy in force now.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import psycopg

from .admission.judge import rejudge
from .admission.policy import AdmissionPolicy, admission_policy_in_force
from .admission.trust import AdapterTrustPolicy, active_trust_policy
from .config import environment
from .embedder import RANK_FUSION, Embedder, embed_query, hybrid_fusion_of, similarity_floor_of
from .errors import InvalidArguments
from .storage import search as _search
from .storage.as_of import check_as_of, search_rows_as_of
from .storage.search import SearchHit
from .storage.validate import check_embedding
from .vocabulary import MAX_QUERY_BYTES, canonical_json

if TYPE_CHECKING:  # pragma: no cover
    from .admission.judge import Decision
    from .storage.memories import Memories

__all__ = ["recall", "recall_session", "RecallResult", "RecalledMemory", "WithheldMemory", "judge_hit", "event_time",
           "candidate_count", "similarity_floor", "check_floor", "DEFAULT_FLOOR", "VERDICT_CACHE_SIZE",
           "clear_verdicts", "OVERFETCH_FACTOR",
           "OVERFETCH_MIN_EXTRA", "OVERFETCH_GROWTH"]

#: The floor when neither the caller, the store's settings nor the embedder names one.
DEFAULT_FLOOR = 0.35
#: Verdicts kept per process (see the module docstring), least recently used dropped first.
VERDICT_CACHE_SIZE = 65_536

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
    event_at: _dt.datetime | None = None  # when the remembered thing happened (the writer's event_at)

    @property
    def session_id(self) -> str | None:
        """The session the memory was written in, from its provenance."""
        value = self.provenance.get("session_id") if isinstance(self.provenance, Mapping) else None
        return value if isinstance(value, str) else None

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["created_at"] = self.created_at.isoformat() if self.created_at else None
        out["event_at"] = self.event_at.isoformat() if self.event_at else None
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
    """What `recall` returns: the memories kept (best first), those withheld on the way and why, the fingerprint of
    the policy that judged them, and how many candidates the search returned."""

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


def check_floor(value: object, what: str = "floor") -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not -1.0 <= value <= 1.0:
        raise InvalidArguments(f"{what} must be a cosine similarity in [-1, 1]")
    return float(value)


def similarity_floor(embedder: Embedder | None = None, environ: Mapping[str, str] | None = None) -> float:
    """`environ`'s PYMEM_SIMILARITY_FLOOR when set, else `embedder`'s calibrated floor, else DEFAULT_FLOOR."""
    env = environment() if environ is None else environ
    raw = (env.get("PYMEM_SIMILARITY_FLOOR") or "").strip()
    if raw:
        try:
            return check_floor(float(raw), "PYMEM_SIMILARITY_FLOOR")
        except ValueError:
            raise InvalidArguments(f"PYMEM_SIMILARITY_FLOOR must be a number in [-1, 1], got {raw[:32]!r}") from None
    calibrated = similarity_floor_of(embedder) if embedder is not None else None
    return calibrated if calibrated is not None else DEFAULT_FLOOR


class _Verdicts:
    """The per-process verdict cache (see the module docstring): policy fingerprint + digest of
    the judged inputs -> the admission Decision."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[tuple[str, bytes], Any] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def key(record: Mapping[str, Any], provenance: Any, policy: AdmissionPolicy,
            fingerprint: str | None = None) -> tuple[str, bytes] | None:
        try:
            text = canonical_json([record, provenance])
        except (TypeError, ValueError):
            return None  # not JSON-shaped: judge it every time
        digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=20).digest()
        return fingerprint or policy.fingerprint, digest

    def get(self, key: tuple[str, bytes]) -> Any:
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def put(self, key: tuple[str, bytes], value: Any) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


_verdicts = _Verdicts(VERDICT_CACHE_SIZE)


def clear_verdicts() -> None:
    """Forget every cached verdict (tests; a process that changed its detector in place)."""
    _verdicts.clear()


def _rejudge(record: dict[str, Any], provenance: Any, policy: AdmissionPolicy, guard: Any,
             fingerprint: str | None = None) -> Decision:
    if guard is not None:
        return rejudge(record, provenance, policy, guard)
    key = _Verdicts.key(record, provenance, policy, fingerprint)
    if key is None:
        return rejudge(record, provenance, policy, guard)
    decision: Decision | None = _verdicts.get(key)
    if decision is None:
        decision = rejudge(record, provenance, policy, guard)
        _verdicts.put(key, decision)
    return decision


def _query_vector(memories: Memories, query: Any, embedder: Embedder | None) -> list[float]:
    if isinstance(query, str):
        if not query.strip():
            raise InvalidArguments("the recall query is empty")
        check_query_text(query)
        return embed_query(memories.store.text_embedder(embedder), query)
    if isinstance(query, (bytes, Mapping)) or (not isinstance(query, Sequence) and not hasattr(query, "tolist")):
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


def event_time(record: Any) -> _dt.datetime | None:
    """The stored record's event_at (written checked by the gate), None when absent or unreadable."""
    value = record.get("event_at") if isinstance(record, Mapping) else None
    if not isinstance(value, str):
        return None
    try:
        when = _dt.datetime.fromisoformat(value)
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=_dt.UTC)


def judge_hit(row: SearchHit, policy: AdmissionPolicy, trust: AdapterTrustPolicy,
              guard: Any = None, fingerprint: str | None = None) -> RecalledMemory | WithheldMemory:
    """Re-judge one stored row (a search hit, or any row shaped like one) as recall does: adapter
    trust, consistency, then the admission policy in force and the guard. `fingerprint`: the
    policy's, when the caller has computed it already (it hashes the whole policy)."""
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
    decision = _rejudge(_stored_record(row), provenance, policy, guard, fingerprint)
    origin = decision.origin.value if decision.origin is not None else row.origin
    if not decision.admitted:
        return _withhold(row, decision.reason, decision.signature, origin, decision.score)
    assert row.score is not None  # a search hit carries its similarity
    assert decision.confidence is not None  # an admitted decision carries its confidence
    return RecalledMemory(
        id=row.id, content=row.content, score=float(row.score),
        origin=origin,  # type: ignore[arg-type]  # an admitted decision's origin, else the stored row's (never None)
        confidence=float(decision.confidence), source_adapter=adapter, created_at=row.created_at,
        provenance=dict(provenance), kind=row.kind, tags=list(row.tags or []),
        reason=decision.reason, event_at=event_time(row.record))


def recall(memories: Memories, query: str | Sequence[float], *, top_k: int = 5,
           policy: AdmissionPolicy | None = None, guard: Any = None, trust: AdapterTrustPolicy | None = None,
           embedder: Embedder | None = None, scope_filter: Mapping[str, str] | None = None,
           as_of: Any = None, floor: float | None = None, hybrid: bool = True,
           conn: psycopg.Connection | None = None) -> RecallResult:
    """Search, then re-judge every hit under the policy in force now; see the module docstring.

    `query`: text (embedded with `embedder`, default the store's, pymem.storage.embedding, checked
    against the store's dimension) or a vector. `as_of`: a datetime or ISO 8601 time to ask what
was believed then (default: now). `policy` and `trust`: default the store's
    admission policy and adapter trust in force (pymem.config). `guard`: any
    object with `check_input(text)`. `scope_filter`: only rows whose scope contains it.
    `floor`: the similarity floor (default similarity_floor() for the store's embedder; -1 keeps
    every hit). `hybrid`: a text query also ranks by its words (default True; ignored for
    vector queries and `as_of`).
    """
    top_k = _search.check_top_k(top_k)
    policy = policy if policy is not None else admission_policy_in_force(memories.store.settings)
    if not isinstance(policy, AdmissionPolicy):
        raise InvalidArguments(f"policy must be an AdmissionPolicy, not {type(policy).__name__}")
    trust = trust if trust is not None else active_trust_policy(memories.store.settings)
    if not isinstance(trust, AdapterTrustPolicy):
        raise InvalidArguments(f"trust must be an AdapterTrustPolicy, not {type(trust).__name__}")
    if guard is not None and not callable(getattr(guard, "check_input", None)):
        raise InvalidArguments("guard must have a check_input(text) method")
    as_of = check_as_of(as_of) if as_of is not None else None
    if not isinstance(hybrid, bool):
        raise InvalidArguments("hybrid must be true or false")
    if floor is not None:
        floor = check_floor(floor)
    vector = _query_vector(memories, query, embedder)
    store = memories.store
    if floor is None:
        floor = similarity_floor(store.text_embedder(embedder) if isinstance(query, str) or embedder is not None
                                 else _recorded_embedder(store), store.settings.environ)
    text = query if isinstance(query, str) and hybrid and as_of is None else None
    fusion = hybrid_fusion_of(store.text_embedder(embedder)) if text is not None else RANK_FUSION

    def search(c: psycopg.Connection, fetch: int) -> list[SearchHit]:
        if as_of is not None:
            return search_rows_as_of(c, memories.ctx, vector, fetch, as_of, scope_filter, dim=store.embedding_dim)
        return _search.search_rows(c, memories.ctx, vector, fetch, scope_filter, dim=store.embedding_dim,
                                   with_vectors=False, text=text, fusion=fusion)

    # every round of the search in one transaction, on one connection (one snapshot on pymem's own)
    with store.transaction(memories.ctx, conn, snapshot=True) as c:
        return _judged(lambda fetch: search(c, fetch), top_k, floor, policy, trust, guard)


def recall_session(memories: Memories, session_id: str, query: str | Sequence[float], *, top_k: int = 5,
                   policy: AdmissionPolicy | None = None, guard: Any = None, trust: AdapterTrustPolicy | None = None,
                   embedder: Embedder | None = None, floor: float | None = None, hybrid: bool = True,
                   conn: psycopg.Connection | None = None) -> RecallResult:
    """What a turn of session `session_id` recalls: `recall`'s search (hybrid for a text query),
    floor and re-judging, over the memories the session receives (pymem.session_search and
    pymem.session_search_hybrid: those of its scope and of its ancestors, so tenant-wide memories
    but never a sibling scope's) instead of every row the context may read. Nothing when the
    context cannot see the session."""
    top_k = _search.check_top_k(top_k)
    policy = policy if policy is not None else admission_policy_in_force(memories.store.settings)
    trust = trust if trust is not None else active_trust_policy(memories.store.settings)
    if not isinstance(policy, AdmissionPolicy) or not isinstance(trust, AdapterTrustPolicy):
        raise InvalidArguments("policy and trust must be an AdmissionPolicy and an AdapterTrustPolicy")
    if guard is not None and not callable(getattr(guard, "check_input", None)):
        raise InvalidArguments("guard must have a check_input(text) method")
    if not isinstance(hybrid, bool):
        raise InvalidArguments("hybrid must be true or false")
    if floor is not None:
        floor = check_floor(floor)
    store = memories.store
    vector = check_embedding(_query_vector(memories, query, embedder), store.embedding_dim, "vector")
    if floor is None:
        floor = similarity_floor(store.text_embedder(embedder) if isinstance(query, str) or embedder is not None
                                 else _recorded_embedder(store), store.settings.environ)
    text = query if isinstance(query, str) and hybrid else None
    fusion = hybrid_fusion_of(store.text_embedder(embedder)) if text is not None else RANK_FUSION
    with store.transaction(memories.ctx, conn, snapshot=True) as c:
        return _judged(lambda fetch: _search.session_search_rows(c, session_id, vector, fetch, text=text,
                                                                 fusion=fusion), top_k, floor, policy, trust, guard)


def _judged(rows_for: Callable[[int], list[SearchHit]], top_k: int, floor: float, policy: AdmissionPolicy,
            trust: AdapterTrustPolicy, guard: Any) -> RecallResult:
    """Walk the hits best first, re-judging each and skipping those under the similarity floor,
    until top_k are kept; over-fetch as the module docstring says."""
    fetch = candidate_count(top_k)
    fingerprint = policy.fingerprint  # once per call: it hashes the whole policy
    judged: dict[str, RecalledMemory | WithheldMemory] = {}  # by id: a row is judged once per call
    while True:
        rows = rows_for(fetch)
        kept: list[RecalledMemory] = []
        withheld: list[WithheldMemory] = []
        for row in rows:
            if row.score < floor:
                continue  # not relevant: neither kept nor withheld
            verdict = judged.get(row.id)
            if verdict is None:
                verdict = judged[row.id] = judge_hit(row, policy, trust, guard, fingerprint)
            if isinstance(verdict, RecalledMemory):
                kept.append(verdict)
            else:
                withheld.append(verdict)
            if len(kept) == top_k:
                break
        exhausted = len(rows) < fetch or fetch >= _search.MAX_TOP_K
        if len(kept) == top_k or exhausted:
            return RecallResult(kept=kept, withheld=withheld, policy_fingerprint=fingerprint,
                                candidates=len(rows))
        fetch = min(_search.MAX_TOP_K, fetch * OVERFETCH_GROWTH)


def _recorded_embedder(store: Any) -> Embedder | None:
    """The store's embedder for a vector query's floor: the recorded one, if it can be resolved."""
    try:
        embedder: Embedder | None = store.text_embedder()
        return embedder
    except InvalidArguments:
        return None

