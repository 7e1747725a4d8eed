"""Tenant isolation through the LangGraph store: a store bound to tenant A never sees tenant B's
items, under any namespace, prefix, filter or query, nor their namespaces, even while both write
at once on separate sessions (the app login is not a superuser: row-level security decides)."""

from __future__ import annotations

import itertools
import threading

from helpers.graph_store import index
from langgraph.store.base import GetOp, ListNamespacesOp, MatchCondition, PutOp, SearchOp

from pymem import Context
from pymem.langgraph import PymemStore

NAMESPACES = [("users",), ("users", "u1"), ("users", "u1", "prefs"), ("shared",), ("b-only", "x")]
KEYS = ["k1", "k2"]
PREFIXES = [(), ("users",), ("users", "u1"), ("users", "u1", "prefs"), ("shared",), ("b-only",), ("b-only", "x")]
FILTERS = [None, {"owner": "B"}, {"owner": {"$ne": "A"}}, {"n": {"$gte": 0}}, {"secret": {"$eq": "b"}}]


def _stores(store):
    a = PymemStore(store.bind(Context(tenant="tenant-a", actor="graph")), index=index())
    b = PymemStore(store.bind(Context(tenant="tenant-b", actor="graph")), index=index())
    return a, b


def _assert_only_a(a):
    for prefix, flt, query in itertools.product(PREFIXES, FILTERS, [None, "likes tea"]):
        for item in a.search(prefix, filter=flt, query=query, limit=100):
            assert item.value["owner"] == "A", (prefix, flt, query)
    for namespace, key in itertools.product(NAMESPACES, KEYS):
        item = a.get(namespace, key)
        assert item is None or item.value["owner"] == "A"
    for prefix in PREFIXES:
        for spaces in (a.list_namespaces(prefix=prefix), a.list_namespaces(suffix=prefix or ("*",)),
                       a.list_namespaces(prefix=prefix, max_depth=1)):
            assert not any(ns and ns[0] == "b-only" for ns in spaces)


def test_a_store_bound_to_one_tenant_never_sees_another(store):
    a, b = _stores(store)
    for namespace, key in itertools.product(NAMESPACES, KEYS):
        b.put(namespace, key, {"text": "likes tea", "owner": "B", "n": 1, "secret": "b"})
    for namespace, key in itertools.product(NAMESPACES[:4], KEYS[:1]):
        a.put(namespace, key, {"text": "likes tea", "owner": "A", "n": 1})
    _assert_only_a(a)
    assert a.get(("b-only", "x"), "k1") is None and a.list_namespaces(prefix=("b-only",)) == []
    assert len(a.search((), limit=100)) == 4 and len(b.search((), limit=100)) == 10
    # A writing the same namespace and key as B makes A's own item, and leaves B's alone
    a.put(("b-only", "x"), "k1", {"text": "likes tea", "owner": "A", "n": 2})
    assert b.get(("b-only", "x"), "k1").value["owner"] == "B"
    a.delete(("shared",), "k2")  # B's item of that name is not A's to delete
    assert b.get(("shared",), "k2") is not None


def test_isolation_holds_while_both_tenants_write_at_once(store):
    a, b = _stores(store)
    errors: list[BaseException] = []
    start = threading.Barrier(2)

    def work(lg, owner, namespaces):
        try:
            start.wait()
            for i in range(15):
                namespace = namespaces[i % len(namespaces)]
                lg.batch([PutOp(namespace, f"k{i}", {"text": "likes tea", "owner": owner, "n": i}),
                          SearchOp(namespace[:1], {"n": {"$gte": 0}}, 50, 0, "likes tea"),
                          GetOp(namespace, f"k{i}"),
                          ListNamespacesOp((MatchCondition("prefix", namespace[:1]),))])
                for item in lg.search((), limit=100):
                    assert item.value["owner"] == owner
        except BaseException as exc:  # noqa: BLE001 - re-raised in the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(a, "A", NAMESPACES[:4])),
               threading.Thread(target=work, args=(b, "B", NAMESPACES))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    _assert_only_a(a)
    assert {i.value["owner"] for i in b.search((), limit=100)} == {"B"}
