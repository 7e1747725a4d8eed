"""Incognito: nothing from the session is stored, Postgres refuses it even to raw SQL as the app
role, and the session appears nowhere: not in a list, a digest, a recall, a delivery or an export."""

from __future__ import annotations

import io

import psycopg
import pytest
from helpers.database import AGENT_LOGIN, bind_login, login_dsn
from helpers.delivery import DEFAULTS, remember
from psycopg import errors as pgerr

from pymem import Context, NotFound, deliver, end_session, recall, start_session
from pymem.admin import export_records
from pymem.delivery import inspect_memories, list_sessions, recall_session, replace_summary
from pymem.errors import IncognitoSession
from pymem.integrity import refusals

SECRET = "The user is planning a surprise party for Dana on the 14th"


@pytest.fixture
def acme(store):
    return store.bind(Context(tenant="acme", actor="u-1"))


def test_nothing_from_an_incognito_session_is_stored(acme, database):
    session = start_session(acme, "private-1", "chat", incognito=True, first_message=SECRET)
    assert session.incognito and session.topic is None
    with pytest.raises(IncognitoSession):
        remember(acme, SECRET, session="private-1")
    assert refusals(acme) == []  # not even a refusal's digest is kept
    ended = end_session(acme, "private-1", summary=SECRET)
    assert ended.ended_at is not None and not ended.has_summary
    with pytest.raises(IncognitoSession):
        replace_summary(acme, "private-1", SECRET)
    with database.admin() as conn:
        assert conn.execute("select topic, summary from pymem.sessions").fetchall() == [(None, None)]
        assert conn.execute("select count(*) from pymem.memories").fetchone()[0] == 0
        details = [str(d) for (d,) in conn.execute("select details from pymem.ledger").fetchall()]
    assert not any("Dana" in d or "party" in d for d in details)


@pytest.mark.parametrize("login", ["operator", "agent"])
def test_postgres_refuses_raw_sql_as_the_app_role(store, database, login):
    """The database enforces incognito: the app role's own SQL cannot store a memory, a summary,
    a topic or an injection record for an incognito session."""
    if login == "agent":
        bind_login(database, AGENT_LOGIN, adapter="codex", tenants=["acme"])
        dsn, adapter = login_dsn(database, AGENT_LOGIN), "codex"
    else:
        dsn, adapter = database.app_dsn, None
    start_session(store.bind(Context(tenant="acme", adapter=adapter)), "private-1", "chat", incognito=True)
    attempts = [
        (pgerr.InsufficientPrivilege,
         "insert into pymem.memories (tenant_id, id, content, source_adapter, provenance) values ('acme', 'm', %s, %s,"
         " jsonb_build_object('origin', 'user_asserted', 'session_id', 'private-1'))", (SECRET, adapter)),
        (pgerr.CheckViolation, "update pymem.sessions set summary = %s where id = 'private-1'", (SECRET,)),
        (pgerr.CheckViolation,
         "insert into pymem.sessions (tenant_id, id, surface, incognito, topic) values ('acme', 'p2', 'chat', true, %s)",
         (SECRET,)),
        (pgerr.InsufficientPrivilege,
         "select pymem.record_injection('private-1', 0, '{}', '{}', '{}', repeat('0', 64), 1, 10, 0, 'c', null, null)",
         ()),
    ]
    with psycopg.connect(dsn) as conn:
        assert not conn.execute("select rolsuper or rolbypassrls from pg_roles where rolname = current_user").fetchone()[0]
        for error, sql, args in attempts:
            conn.execute("select pymem.set_context('acme', null, %s)", (adapter,))
            with pytest.raises(error):
                conn.execute(sql, args)
            conn.rollback()
        # a memory that names no session is not incognito's business: the boundary is the session id
        conn.execute("select pymem.set_context('acme', null, %s)", (adapter,))
        conn.execute("insert into pymem.memories (tenant_id, id, content, source_adapter) values ('acme', 'x', 'ok', %s)",
                     (adapter,))
        conn.commit()
    with database.admin() as conn:
        assert conn.execute("select id from pymem.memories").fetchall() == [("x",)]
        assert conn.execute("select count(*) from pymem.sessions where summary is not null or topic is not null"
                            ).fetchone()[0] == 0
        assert conn.execute("select count(*) from pymem.ledger where event = 'delivery.injected'").fetchone()[0] == 0


def test_an_incognito_session_appears_nowhere(acme, database):
    start_session(acme, "work-1", "chat", first_message="Quarterly invoices for Initech")
    remember(acme, "Initech is invoiced quarterly.", session="work-1")
    start_session(acme, "private-1", "chat", incognito=True, first_message=SECRET)
    start_session(acme, "work-2", "chat")

    assert [s.id for s in list_sessions(acme)] == ["work-2", "work-1"]
    with pytest.raises(NotFound):
        recall_session(acme, "private-1")
    delivered = deliver(acme, "work-2", "party for Dana", **DEFAULTS)
    assert "private-1" not in delivered.text and [d.session_id for d in delivered.digest] == ["work-1"]
    assert all(m.session_id != "private-1" for m in inspect_memories(acme))
    assert all("private-1" not in str(k.provenance) for k in recall(acme, "party", top_k=10, **DEFAULTS).kept)
    out = io.StringIO()
    export_records(acme, out)
    assert "private-1" not in out.getvalue() and "Dana" not in out.getvalue()

    # the incognito session itself receives nothing and leaves no injection record
    own = deliver(acme, "private-1", "Initech invoices", **DEFAULTS)
    assert own.incognito and own.text == "" and own.items == [] and own.injection_seq is None
    with database.admin() as conn:
        sessions = [r[0] for r in conn.execute(
            "select distinct details ->> 'session' from pymem.ledger where event = 'delivery.injected'").fetchall()]
        listed = conn.execute("select count(*) from pymem.audit_injections where 'private-1' = any (digest_sessions)"
                              ).fetchone()[0]
    assert sessions == ["work-2"] and listed == 0
