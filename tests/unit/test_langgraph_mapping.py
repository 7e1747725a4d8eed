"""The LangGraph store's pure parts: namespaces as scope axes, item ids, namespace listing, and
filters compiled to conditions (no database)."""

from __future__ import annotations

import math

import pytest

from pymem.errors import InvalidArguments
from pymem.langgraph.filters import compile_filter
from pymem.langgraph.namespaces import (
    is_reserved_axis,
    item_id,
    namespace_scope,
    own_scope,
    prefix_scope,
    select_namespaces,
)


def test_a_namespace_is_scope_axes_and_a_prefix_is_contained_in_it():
    exact = namespace_scope("default", ("users", "u1", "prefs"))
    assert exact == {"lg_store": "default", "ns0": "users", "ns1": "u1", "ns2": "prefs", "ns_depth": "3"}
    for prefix in [(), ("users",), ("users", "u1"), ("users", "u1", "prefs")]:
        assert prefix_scope("default", prefix).items() <= exact.items()  # what `scope @> filter` asks
    assert not prefix_scope("default", ("users", "u2")).items() <= exact.items()
    assert not prefix_scope("other", ("users",)).items() <= exact.items()
    assert prefix_scope("default", ("a", "*")) == {"lg_store": "default", "ns0": "a", "ns1": "*"}  # literal
    assert prefix_scope("default", ("a", "*", "c"), wildcards=True) == {"lg_store": "default", "ns0": "a",
                                                                       "ns2": "c"}


def test_item_ids_depend_on_store_scope_namespace_and_key():
    base = item_id("default", {}, ("a",), "k")
    assert base.startswith("lg:") and len(base) <= 256
    assert item_id("default", {"ns0": "a"}, ("a",), "k") == base  # the store's own axes do not count
    others = {item_id("other", {}, ("a",), "k"), item_id("default", {"team": "x"}, ("a",), "k"),
              item_id("default", {}, ("a", "k"), ""), item_id("default", {}, ("a",), "k2")}
    assert base not in others and len(others) == 4
    assert own_scope({"team": "x", "ns3": "y", "lg_store": "s", "ns_depth": "2"}) == {"team": "x"}
    assert is_reserved_axis("ns12") and not is_reserved_axis("nsx") and not is_reserved_axis("team")


def test_namespace_listing():
    spaces = [("a", "b", "c"), ("a", "b", "d", "e"), ("a", "b", "d", "i"), ("a", "b", "f"), ("a", "c", "f"), ("é",),
              ("Z",)]
    assert select_namespaces(spaces, [("prefix", ("a", "b"))], 3, 100, 0) == [("a", "b", "c"), ("a", "b", "d"),
                                                                              ("a", "b", "f")]
    assert select_namespaces(spaces, [], 1, 100, 0) == [("Z",), ("a",), ("é",)]  # by code point
    assert select_namespaces(spaces, [("suffix", ("*", "f"))], None, 100, 0) == [("a", "b", "f"), ("a", "c", "f")]
    assert select_namespaces(spaces, [("prefix", ("a",)), ("suffix", ("f",))], None, 1, 1) == [("a", "c", "f")]
    assert select_namespaces(spaces, [("prefix", ("a", "b", "c", "d"))], None, 100, 0) == []
    with pytest.raises(ValueError):
        select_namespaces(spaces, [("infix", ("a",))], None, 10, 0)


def test_filters_compile_to_typed_conditions():
    assert compile_filter(None) == [] and compile_filter({}) == []
    assert compile_filter({"n": 3}) == [{"path": ["n"], "op": "eq", "value": 3}]
    assert compile_filter({"n": {"$gt": 9, "$lte": 10.5}}) == [{"path": ["n"], "op": "gt", "value": 9},
                                                              {"path": ["n"], "op": "lte", "value": 10.5}]
    assert compile_filter({"o": {"x": [1, None]}}) == [
        {"path": ["o"], "op": "object", "value": None}, {"path": ["o", "x"], "op": "array", "value": 2},
        {"path": ["o", "x", "0"], "op": "eq", "value": 1}, {"path": ["o", "x", "1"], "op": "eq", "value": None}]
    assert compile_filter({"o": {"$ne": {"x": (1,)}}}) == [{"path": ["o"], "op": "ne", "value": {"x": [1]}}]


@pytest.mark.parametrize("bad", [
    {"n": {"$in": [1]}}, {"n": {"$gt": True}}, {"n": {"$lt": None}}, {"n": {"$gte": [1]}}, {"n": {"$eq": math.nan}},
    {"n": {"$eq": object()}}, {"": 1}, {"s": "a\x00"}, {"n": {"$gt": 1, "x": 2}}, ["n"],
])
def test_bad_filters_are_refused(bad):
    with pytest.raises(InvalidArguments):
        compile_filter(bad)
