"""The context's Python validation: Context, check_scope, parse_scope_pairs (pymem.set_context in
SQL is tests/db/test_set_context.py)."""

from __future__ import annotations

import dataclasses

import pytest

from pymem.context import Context, check_scope, parse_scope_pairs
from pymem.errors import ContextError, InvalidArguments

# -- Context -----------------------------------------------------------------------------------

@pytest.mark.parametrize("tenant", ["", None, " acme", "acme ", "a\x00b", "x" * 201, 42, b"acme"])
def test_bad_tenant(tenant):
    with pytest.raises(ContextError):
        Context(tenant=tenant)


def test_context_error_is_invalid_arguments():
    assert issubclass(ContextError, InvalidArguments)


def test_context_defaults_and_normalisation():
    ctx = Context(tenant="acme", actor="", adapter="")
    assert (ctx.tenant, ctx.actor, ctx.adapter, dict(ctx.scope), ctx.read_adapters) == ("acme", None, None, {}, None)
    assert Context(tenant="x" * 200).tenant == "x" * 200
    ctx = Context(tenant="acme", read_adapters=["codex", "claude"])
    assert ctx.read_adapters == ("codex", "claude")
    assert Context(tenant="acme", read_adapters=[]).read_adapters == ()


def test_context_is_immutable():
    ctx = Context(tenant="acme", scope={"project": "a"})
    with pytest.raises(dataclasses.FrozenInstanceError):
        ctx.tenant = "globex"  # type: ignore[misc]
    with pytest.raises(TypeError):
        ctx.scope["project"] = "b"  # type: ignore[index]


def test_context_copies_the_scope():
    scope = {"project": "a"}
    ctx = Context(tenant="acme", scope=scope)
    scope["project"] = "b"
    assert dict(ctx.scope) == {"project": "a"}


@pytest.mark.parametrize("field,value", [
    ("actor", "a\x00b"), ("actor", 5), ("adapter", "co\x00dex"), ("adapter", "x" * 201), ("adapter", ["codex"]),
    ("read_adapters", "codex"), ("read_adapters", 5), ("read_adapters", ["codex", ""]), ("read_adapters", [None]),
    ("scope", ["project", "a"]), ("scope", "project=a"), ("scope", {"project": {"a": "b"}}),
    ("scope", {"project": ""}), ("scope", {"": "a"}), ("scope", {"project": 1}), ("scope", {1: "a"}),
    ("scope", {"project": None}),
])
def test_bad_context_fields(field, value):
    with pytest.raises(ContextError):
        Context(tenant="acme", **{field: value})


def test_check_scope():
    assert check_scope(None) == {}
    assert check_scope({"a": "b", "c": "d"}) == {"a": "b", "c": "d"}
    with pytest.raises(ContextError):
        check_scope({"a": ["b"]})


# -- parse_scope_pairs -------------------------------------------------------------------------

@pytest.mark.parametrize("pairs,expected", [
    ([], {}),
    (["project=a"], {"project": "a"}),
    (["project=a", "user=u"], {"project": "a", "user": "u"}),
    (["project=a,user=u"], {"project": "a", "user": "u"}),
    ([" project = a , user=u ,"], {"project": "a", "user": "u"}),
    (["project=a", "project=b"], {"project": "b"}),  # the last one wins
    (["url=a=b"], {"url": "a=b"}),  # only the first '=' separates
    ([""], {}),
    ([",,"], {}),
])
def test_parse_scope_pairs(pairs, expected):
    assert parse_scope_pairs(pairs) == expected


@pytest.mark.parametrize("pairs", [["project"], ["=a"], ["project="], ["project= "], [" =a"], ["a=b,c"],
                                   ["a\x00=b"], ["a=b\x00"]])
def test_parse_scope_pairs_refuses(pairs):
    with pytest.raises(ContextError):
        parse_scope_pairs(pairs)
