"""LangGraph namespaces as pymem scopes, and item ids (pure: no database, no LangGraph import).

An item's namespace becomes axes of its row's scope, so a namespace prefix is a scope
containment that row-level security and `pymem.search` apply in the database:

    namespace ("users", "u1", "prefs") in the store named "default"
    -> scope {"lg_store": "default", "ns0": "users", "ns1": "u1", "ns2": "prefs", "ns_depth": "3"}
       (plus the context's own scope axes, if it has any)

- `lg_store` marks the rows of one LangGraph store (a name, "default" unless given), so other
  memories of the tenant never show up in it, and two stores can share a tenant;
- `ns<i>` holds the namespace's label at level i (LangGraph labels are non-empty strings);
- `ns_depth` holds the namespace's length, so an exact namespace is a containment too.

A search under the prefix ("users", "u1") is the scope filter {"lg_store": ..., "ns0": "users",
"ns1": "u1"}: it contains every namespace below it at any depth, and nothing else. A context
whose own scope names these axes is confined to that subtree by row-level security.

An item's row id is a digest of the store name, the context's own scope axes, the namespace and
the key: the same (namespace, key) written under two different context scopes are two items, and
neither can learn that the other exists.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..vocabulary import canonical_json

__all__ = ["STORE_AXIS", "DEPTH_AXIS", "level_axis", "is_reserved_axis", "own_scope", "prefix_scope",
           "namespace_scope", "item_id", "matches", "select_namespaces", "conditions_of"]

STORE_AXIS = "lg_store"
DEPTH_AXIS = "ns_depth"
_LEVEL = re.compile(r"ns[0-9]+")
WILDCARD = "*"


def level_axis(level: int) -> str:
    return f"ns{level}"


def is_reserved_axis(axis: str) -> bool:
    """Axes the store writes itself: a context scope may name them only to confine itself."""
    return axis in (STORE_AXIS, DEPTH_AXIS) or _LEVEL.fullmatch(axis) is not None


def own_scope(scope: Mapping[str, str]) -> dict[str, str]:
    """The context scope's axes that are not the store's: they make the item ids distinct."""
    return {k: v for k, v in scope.items() if not is_reserved_axis(k)}


def prefix_scope(store_name: str, prefix: Sequence[str], *, wildcards: bool = False) -> dict[str, str]:
    """The scope filter for every namespace that starts with `prefix`. With `wildcards` (a
    namespace listing's match condition) a "*" label matches any label; a search's prefix is
    literal, as in LangGraph."""
    scope = {STORE_AXIS: store_name}
    for level, label in enumerate(prefix):
        if not (wildcards and label == WILDCARD):
            scope[level_axis(level)] = label
    return scope


def namespace_scope(store_name: str, namespace: Sequence[str]) -> dict[str, str]:
    """The scope axes of one exact namespace."""
    scope = prefix_scope(store_name, ())
    for level, label in enumerate(namespace):
        scope[level_axis(level)] = label
    scope[DEPTH_AXIS] = str(len(namespace))
    return scope


def item_id(store_name: str, scope: Mapping[str, str], namespace: Sequence[str], key: str) -> str:
    """The row id of (namespace, key) for a context with this scope."""
    text = canonical_json([store_name, own_scope(scope), list(namespace), key])
    return "lg:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _matches_one(match_type: str, path: Sequence[str], namespace: tuple[str, ...]) -> bool:
    if len(namespace) < len(path):
        return False
    if match_type == "prefix":
        pairs = zip(namespace, path, strict=False)
    elif match_type == "suffix":
        pairs = zip(reversed(namespace), reversed(path), strict=False)
    else:
        raise ValueError(f"unsupported namespace match type {match_type!r}: expected prefix or suffix")
    return all(p == WILDCARD or label == p for label, p in pairs)


def matches(conditions: Iterable[tuple[str, Sequence[str]]], namespace: tuple[str, ...]) -> bool:
    """Whether a namespace meets every (match_type, path) condition."""
    return all(_matches_one(match_type, path, namespace) for match_type, path in conditions)


def select_namespaces(namespaces: Iterable[Sequence[str]], conditions: Sequence[tuple[str, Sequence[str]]],
                      max_depth: int | None, limit: int, offset: int) -> list[tuple[str, ...]]:
    """LangGraph's namespace listing over the namespaces that hold items: those meeting every
    condition, cut to `max_depth` labels, without duplicates, sorted label by label (by code
    point, a shorter namespace before the longer ones it starts), then paged."""
    found = {tuple(ns) for ns in namespaces}
    kept = [ns for ns in found if matches(conditions, ns)]
    if max_depth is not None:
        kept = list({ns[:max_depth] for ns in kept})
    kept.sort()
    return kept[offset:offset + limit]


def conditions_of(match_conditions: Any) -> list[tuple[str, tuple[str, ...]]]:
    """(match_type, path) pairs from LangGraph MatchConditions (or None)."""
    return [(c.match_type, tuple(c.path)) for c in (match_conditions or ())]
