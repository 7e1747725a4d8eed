"""The context: Python validation (Context, parse_scope_pairs) and pymem.set_context in SQL."""

from __future__ import annotations

import dataclasses

import pytest
from psycopg import errors as pgerr
from psycopg.types.json import Jsonb

from pymem import db
from pymem.context import Context, check_scope, parse_scope_pairs
from pymem.errors import AccessDenied, ContextError, InvalidArguments


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


# -- pymem.set_context in SQL ------------------------------------------------------------------

SET = "select pymem.set_context(%s, %s, %s, %s, %s::text[])"


@pytest.mark.parametrize("args", [
    ("", None, None, Jsonb({}), None),
    (None, None, None, Jsonb({}), None),
    ("x" * 201, None, None, Jsonb({}), None),
    ("acme", None, None, Jsonb({"project": {"a": "b"}}), None),
    ("acme", None, None, Jsonb({"project": ["a"]}), None),
    ("acme", None, None, Jsonb({"project": ""}), None),
    ("acme", None, None, Jsonb({"": "a"}), None),
    ("acme", None, None, Jsonb({"project": 1}), None),
    ("acme", None, None, Jsonb({"project": None}), None),
    ("acme", None, None, Jsonb(["project", "a"]), None),
    ("acme", None, None, Jsonb("project=a"), None),
    ("acme", None, None, None, None),
], ids=["empty tenant", "null tenant", "long tenant", "nested scope", "list value", "empty value", "empty axis",
        "number value", "null value", "array scope", "string scope", "null scope"])
def test_set_context_refuses_in_sql(database, args):
    with database.app() as conn:
        with pytest.raises(pgerr.InvalidParameterValue) as info:
            conn.execute(SET, args)
        assert info.value.sqlstate == "22023"
        conn.rollback()
        # Nothing was set by the failed call.
        assert conn.execute("select pymem._ctx_tenant()").fetchone()[0] is None


def test_set_context_round_trip(database):
    ctx = Context(tenant="acme", actor="u1", adapter="codex", scope={"project": "a", "user": "u"},
                  read_adapters=["codex", "claude"])
    with database.app() as conn:
        db.set_context(conn, ctx)
        row = conn.execute(
            "select pymem._ctx_tenant(), pymem._ctx_actor(), pymem._ctx_adapter(), pymem._ctx_scope(),"
            " pymem._ctx_read_adapters()").fetchone()
        assert row == ("acme", "u1", "codex", {"project": "a", "user": "u"}, ["codex", "claude"])
        # All of it is transaction-local.
        conn.commit()
        row = conn.execute(
            "select pymem._ctx_tenant(), pymem._ctx_actor(), pymem._ctx_adapter(), pymem._ctx_scope(),"
            " pymem._ctx_read_adapters()").fetchone()
        assert row == (None, None, None, {}, None)
        conn.rollback()

        db.set_context(conn, Context(tenant="acme", read_adapters=[]))
        assert conn.execute("select pymem._ctx_read_adapters()").fetchone()[0] == []
        conn.rollback()


def test_set_context_is_not_session_level(database):
    with database.app(autocommit=True) as conn:
        # In autocommit each statement is its own transaction: the context is gone right after.
        conn.execute("select pymem.set_context('acme')")
        assert conn.execute("select pymem._ctx_tenant()").fetchone()[0] is None


def test_db_set_context_translates_sql_refusals(database):
    class Forged:
        """What a caller bypassing Context validation would send."""

        def __init__(self, *params):
            self._params = params

        def params(self):
            return self._params

    with database.app() as conn:
        with pytest.raises(ContextError):
            db.set_context(conn, Forged("", None, None, Jsonb({}), None))
        conn.rollback()
        with pytest.raises(ContextError):
            db.set_context(conn, Forged("acme", None, None, Jsonb({"a": {"b": "c"}}), None))
        conn.rollback()


def test_bound_login_context_refusal_is_access_denied(database):
    from helpers.database import APP_LOGIN

    with database.admin() as admin:
        admin.execute("insert into pymem.adapter_bindings (role_name, adapter) values (%s, 'codex')", (APP_LOGIN,))
    with database.app() as conn:
        with pytest.raises(AccessDenied):
            db.set_context(conn, Context(tenant="acme", adapter="claude"))
        conn.rollback()
        db.set_context(conn, Context(tenant="acme", adapter="codex"))
        assert conn.execute("select pymem._ctx_adapter()").fetchone()[0] == "codex"
        conn.rollback()
