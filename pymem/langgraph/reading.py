"""What the LangGraph store believes of what it reads back: its own items, judged again now.

A row under the store's scope is one of its items only if the store wrote it: kind `langgraph`
and tagged with the store's own adapter (the database tags every write with the writer's, so
another adapter, or the operator for an agent's store, cannot make one; the store's queries ask
for nothing else), with a record of the item's shape whose namespace and key are those its id and
scope were derived from (`item_id`, `namespace_scope`). Anything else in the scope (a plain note
another adapter admitted there, a record crafted to look like an item) is not an item and is
never returned, nor does it break a read.

Its own items are then re-judged like `recall` (pymem.recall.judge_hit): the adapter trust policy
(the store's adapter must be trusted; untagged, operator rows are by default), the row's
consistency, and the admission policy in force now over what the write gate judged when it was
put (the item's value, with the row's provenance). A row the policy now withholds is not
returned. The judgement is a pure function of the row and the policies, so decisions are kept
(`BeliefCache`, by a digest of both) and an item read again under the same policies is not
judged again.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from ..admission.policy import AdmissionPolicy
from ..admission.trust import AdapterTrustPolicy
from ..recall import RecalledMemory, judge_hit
from ..storage.search import SearchHit
from ..vocabulary import canonical_json
from . import namespaces as ns

__all__ = ["KIND", "BeliefCache", "BELIEFS", "own_record", "believed"]

#: The kind of every row the store writes.
KIND = "langgraph"


class BeliefCache:
    """Admit-or-withhold decisions by a digest of (policies, row): bounded, thread-safe."""

    def __init__(self, max_entries: int = 20_000):
        self.max_entries = max_entries
        self._entries: OrderedDict[bytes, bool] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: bytes) -> bool | None:
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
            return found

    def put(self, key: bytes, value: bool) -> None:
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


#: The process's decisions, shared by every store (the key names the policies).
BELIEFS = BeliefCache()


def own_record(row: SearchHit, store_name: str) -> dict[str, Any] | None:
    """The item record of a row the store wrote, or None when the row is not one of its items:
    another kind, a record not shaped as an item, or a namespace and key other than those its id
    and scope were made from."""
    if row.kind != KIND:
        return None
    record = row.record
    if not isinstance(record, Mapping) or not isinstance(record.get("value"), Mapping) \
            or not isinstance(record.get("key"), str) or not isinstance(record.get("namespace"), list) \
            or not all(isinstance(label, str) and label for label in record["namespace"]) \
            or not isinstance(record.get("created_at"), str) or not isinstance(record.get("updated_at"), str):
        return None
    try:
        _dt.datetime.fromisoformat(record["created_at"]), _dt.datetime.fromisoformat(record["updated_at"])
    except ValueError:
        return None
    namespace = tuple(record["namespace"])
    scope = row.scope if isinstance(row.scope, Mapping) else {}
    placed = ns.namespace_scope(store_name, namespace)
    if {axis: value for axis, value in scope.items() if ns.is_reserved_axis(axis)} != placed:
        return None
    if row.id != ns.item_id(store_name, scope, namespace, record["key"]):
        return None
    return dict(record)


def believed(row: SearchHit, record: Mapping[str, Any], policy: AdmissionPolicy, trust: AdapterTrustPolicy,
             cache: BeliefCache | None = BELIEFS) -> bool:
    """Whether recall would return this item now: judge_hit over what the gate judged at the put
    (its value) with the row's origin, provenance, writer and confidence."""
    judged = SearchHit(id=row.id, record={"value": record["value"]}, content=None, kind=row.kind, tags=row.tags,
                       scope=row.scope, origin=row.origin, provenance=row.provenance, confidence=row.confidence,
                       source_adapter=row.source_adapter, injection_source=row.injection_source,
                       policy_fingerprint=row.policy_fingerprint, created_at=row.created_at, revision=row.revision,
                       score=0.0)
    key = None
    if cache is not None:
        try:
            text = canonical_json([policy.fingerprint, sorted(trust.trusted_adapters), trust.trust_untagged,
                                   row.source_adapter, row.origin, row.provenance, row.confidence, judged.record])
            key = hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()
        except (TypeError, ValueError):
            key = None
        if key is not None:
            found = cache.get(key)
            if found is not None:
                return found
    verdict = isinstance(judge_hit(judged, policy, trust), RecalledMemory)
    if cache is not None and key is not None:
        cache.put(key, verdict)
    return verdict
