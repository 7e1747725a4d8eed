"""pymem.set_context in SQL, and db.set_context over it: refusals, round trips, transaction scope."""

from __future__ import annotations

import pytest
from psycopg import errors as pgerr
from psycopg.types.json import Jsonb

from pymem import db
from pymem.context import Context
from pymem.errors import AccessDenied, ContextError

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
    from helpers.database import APP_LOGIN, bind_login

    bind_login(database, APP_LOGIN, adapter="codex", tenants=["acme"])
    with database.app() as conn:
        with pytest.raises(AccessDenied):
            db.set_context(conn, Context(tenant="acme", adapter="claude"))
        conn.rollback()
        db.set_context(conn, Context(tenant="acme", adapter="codex"))
        assert conn.execute("select pymem._ctx_adapter()").fetchone()[0] == "codex"
        conn.rollback()
