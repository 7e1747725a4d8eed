"""A caller's transaction is joined, never committed: every verb that takes `conn=`, given a
caller's connection (a fresh psycopg connection, one already in a transaction, a SQLAlchemy
Session), runs inside the caller's transaction, and the caller's rollback leaves nothing. An
autocommit connection runs the verb in a transaction of its own, committed; a failed transaction
is refused with a typed error. pgvector's types are registered by pymem, not by the caller."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from helpers.lessons import EMBEDDER, GATE, commit_files, ctx, new_repo
from helpers.public_api import public_names

import pymem
from pymem import (
    InvalidArguments,
    Provenance,
    Store,
    admit,
    deliver,
    end_session,
    erase,
    recall,
    start_session,
    supersede,
)
from pymem.admin import refresh_expiry, retention_policy, set_retention
from pymem.admission import (
    AdmissionPolicy,
    WriteGate,
    get_quarantined,
    list_quarantined,
    reject_quarantined,
    release_quarantined,
)
from pymem.admission.gate import screen
from pymem.conventions import active_conventions, check_conventions, file_review_correction, retire_convention
from pymem.delivery import (
    erase_session,
    inspect_memories,
    inspect_memory,
    list_sessions,
    memory_injections,
    recall_session,
    replace_summary,
    session_injections,
)
from pymem.facts import publish, subscribe
from pymem.integrity import erase_actor, history, refusals
from pymem.lessons import deliver_with_lessons, file_lesson, lessons_for_task, list_lessons
from pymem.storage.memories import Memories

C1 = "1" * 40
VECTOR = EMBEDDER.embed(["the deploy runs at noon"])[0]


def _verbs(repo) -> dict[str, Callable[[Memories, Any], Any]]:
    """Every verb that takes conn=, called once so that it writes when it can."""
    return {
        "Memories.add": lambda m, c: m.add([{"id": "new-add", "content": "added", "embedding": VECTOR}], conn=c),
        "Memories.upsert_many": lambda m, c: m.upsert_many(
            [{"id": "new-up", "content": "upserted", "embedding": VECTOR}], idempotency_key="k-1", conn=c),
        "Memories.get_row": lambda m, c: m.get_row("m-0", conn=c),
        "Memories.get": lambda m, c: m.get("m-0", conn=c),
        "Memories.get_many": lambda m, c: m.get_many(["m-0"], conn=c),
        "Memories.list_chunks": lambda m, c: m.list_chunks(conn=c),
        "Memories.search": lambda m, c: m.search(VECTOR, top_k=3, conn=c),
        "Memories.delete_many": lambda m, c: m.delete_many(["m-0"], conn=c),
        "admit": lambda m, c: admit(m, {"content": "The deploy moved to noon."}, Provenance("user_asserted"),
                                    conn=c, **GATE),
        "screen": lambda m, c: screen(m, {"content": "Screened only."}, Provenance("user_asserted"), conn=c, **GATE),
        "WriteGate.admit": lambda m, c: WriteGate(m, GATE["policy"], embedder=EMBEDDER).admit(
            {"content": "Gate admitted."}, Provenance("user_asserted"), conn=c),
        "recall": lambda m, c: recall(m, "deploy noon", conn=c, **GATE),
        "refusals": lambda m, c: refusals(m, conn=c),
        "history": lambda m, c: history(m, "m-0", conn=c),
        "start_session": lambda m, c: start_session(m, "s-new", "chat", first_message="hello", conn=c),
        "end_session": lambda m, c: end_session(m, "s-0", summary="Deploy moved to noon.", conn=c),
        "replace_summary": lambda m, c: replace_summary(m, "s-1", "A new summary.", conn=c),
        "list_sessions": lambda m, c: list_sessions(m, conn=c),
        "recall_session": lambda m, c: recall_session(m, "s-1", conn=c),
        "erase_session": lambda m, c: erase_session(m, "s-1", "asked to forget", conn=c),
        "deliver": lambda m, c: deliver(m, "s-0", "deploy noon", conn=c, embedder=EMBEDDER),
        "deliver_with_lessons": lambda m, c: deliver_with_lessons(m, "s-0", "deploy", ["ops"], conn=c,
                                                                  embedder=EMBEDDER),
        "session_injections": lambda m, c: session_injections(m, "s-0", conn=c),
        "memory_injections": lambda m, c: memory_injections(m, "m-0", conn=c),
        "supersede": lambda m, c: supersede(m, "m-0", "The deploy runs at one.", Provenance("user_asserted"),
                                            conn=c, **GATE),
        "erase": lambda m, c: erase(m, "m-0", "asked to forget", conn=c),
        "inspect_memories": lambda m, c: inspect_memories(m, conn=c),
        "inspect_memory": lambda m, c: inspect_memory(m, "m-0", conn=c),
        "file_lesson": lambda m, c: file_lesson(m, "Run the migrations before each deploy.", ["ops"], "project", 0.8,
                                                origin="operator", conn=c, **GATE),
        "list_lessons": lambda m, c: list_lessons(m, conn=c),
        "lessons_for_task": lambda m, c: lessons_for_task(m, ["ops"], conn=c),
        "file_review_correction": lambda m, c: file_review_correction(
            m, "Keep Makefile recipes tab-indented", "Makefile", C1, "make lint-tabs", conn=c, **GATE),
        "active_conventions": lambda m, c: active_conventions(m, conn=c),
        "retire_convention": lambda m, c: retire_convention(m, "__receipt__", conn=c),
        "check_conventions": lambda m, c: check_conventions(m, repo, conn=c),
        "publish": lambda m, c: publish(m, "build", "status", "green", "tenant", conn=c),
        "subscribe": lambda m, c: subscribe(m, "build", "tenant", conn=c),
        "set_retention": lambda m, c: set_retention(m, default_ttl=3600, conn=c),
        "retention_policy": lambda m, c: retention_policy(m, conn=c),
        "refresh_expiry": lambda m, c: refresh_expiry(m, ["m-0"], conn=c),
        "erase_actor": lambda m, c: erase_actor(m, "someone@example.com", "data subject request", conn=c),
        "list_quarantined": lambda m, c: list_quarantined(m, conn=c),
        "get_quarantined": lambda m, c: get_quarantined(m, "q-0", conn=c),
        "release_quarantined": lambda m, c: release_quarantined(m, "q-0", "checked with the customer", conn=c),
        "reject_quarantined": lambda m, c: reject_quarantined(m, "q-0", "not from the customer", conn=c),
    }


def _public_conn_verbs() -> set[str]:
    """The public functions and methods with a `conn=None` keyword (not those whose subject is a
    connection, such as verify_chain(conn) or bind_login(conn, ...))."""
    def takes(fn) -> bool:
        param = inspect.signature(fn).parameters.get("conn")
        return param is not None and param.default is None

    names = {n for _, n, value in public_names() if callable(value) and not isinstance(value, type) and takes(value)}
    names |= {f"Memories.{n}" for n, f in inspect.getmembers(Memories, inspect.isfunction)
              if not n.startswith("_") and takes(f)}
    names |= {f"WriteGate.{n}" for n, f in inspect.getmembers(WriteGate, inspect.isfunction) if takes(f)}
    return names | {"screen"}


def _state(database) -> dict[str, int]:
    """Rows per pymem table and the ledger's length: what any write would change."""
    with database.admin() as conn:
        tables = [r[0] for r in conn.execute("select tablename from pg_tables where schemaname = 'pymem'"
                                             " and tablename <> 'alembic_version' order by 1")]
        return {t: conn.execute(f'select count(*) from pymem."{t}"').fetchone()[0] for t in tables}


@pytest.fixture
def seeded(kstore, tmp_path):
    mem = kstore.bind(ctx())
    start_session(mem, "s-0", "chat", first_message="about the deploy")
    start_session(mem, "s-1", "chat", first_message="an older chat")
    admit(mem, {"id": "m-0", "content": "The deploy runs at noon.", "tags": ["hot"]},
          Provenance("user_asserted", session_id="s-0"), **GATE)
    file_lesson(mem, "Deploys need a change ticket.", ["ops"], "project", 0.8, origin="operator", **GATE)
    admit(mem, {"id": "q-0", "content": "The deploy account moved to another bank."}, Provenance("user_asserted"),
          **{**GATE, "policy": AdmissionPolicy().with_quarantine(0.000001)})  # held for review
    receipt = file_review_correction(mem, "Indent Makefile recipes with tabs", "Makefile", C1, "make lint-tabs",
                                     "lint", **GATE).receipt
    deliver(mem, "s-0", "deploy", embedder=EMBEDDER)
    repo = new_repo(tmp_path / "repo")
    commit_files(repo, {"Makefile": "all:\n\ttrue\n"}, "no lint symbol")
    verbs = _verbs(repo)
    retire = verbs["retire_convention"]
    verbs["retire_convention"] = lambda m, c: retire_convention(m, receipt.id, conn=c)
    del retire
    return mem, verbs


def test_the_table_names_every_verb_that_takes_conn(tmp_path):
    assert set(_verbs(tmp_path)) == _public_conn_verbs()


def _run_all(database, mem, verbs, connect: Callable[[], Any], rollback: Callable[[Any], None],
             driver: Callable[[Any], psycopg.Connection]) -> list[str]:
    before = _state(database)
    wrong = []
    for name, call in verbs.items():
        handle = connect()
        try:
            call(mem, driver(handle))
            rollback(handle)
        finally:
            handle.close()
        after = _state(database)
        if after != before:
            changed = {t: (before[t], after[t]) for t in before if before[t] != after[t]}
            wrong.append(f"{name}: {changed}")
            before = after
    return wrong


def test_a_callers_rollback_leaves_nothing_for_every_verb_on_a_fresh_psycopg_connection(database, seeded):
    mem, verbs = seeded
    # a plain connection that has run nothing yet, with no register_vector() call
    wrong = _run_all(database, mem, verbs, lambda: psycopg.connect(database.app_dsn), lambda c: c.rollback(),
                     lambda c: c)
    assert wrong == []


def test_a_callers_rollback_leaves_nothing_for_every_verb_inside_an_open_transaction(database, seeded):
    mem, verbs = seeded

    def connect():
        conn = psycopg.connect(database.app_dsn)
        conn.execute("select 1")
        return conn

    assert _run_all(database, mem, verbs, connect, lambda c: c.rollback(), lambda c: c) == []


def test_a_callers_rollback_leaves_nothing_for_every_verb_in_a_sqlalchemy_session(database, seeded):
    sqlalchemy = pytest.importorskip("sqlalchemy")
    from sqlalchemy.orm import Session

    from pymem.sqlalchemy import connection

    mem, verbs = seeded
    engine = sqlalchemy.create_engine(database.app_dsn.replace("postgresql://", "postgresql+psycopg://"),
                                      poolclass=sqlalchemy.pool.NullPool)
    try:
        assert _run_all(database, mem, verbs, lambda: Session(engine), lambda s: s.rollback(), connection) == []
    finally:
        engine.dispose()


def test_a_business_row_and_a_memory_commit_or_roll_back_together_in_a_sqlalchemy_session(database, store):
    sqlalchemy = pytest.importorskip("sqlalchemy")
    from sqlalchemy import text
    from sqlalchemy.orm import Session

    from pymem.sqlalchemy import connection

    with database.admin() as admin:
        admin.execute("create table public.orders (id int primary key, customer text)")
        admin.execute("grant select, insert on public.orders to pymem_app")
    mem = store.bind(ctx())
    engine = sqlalchemy.create_engine(database.app_dsn.replace("postgresql://", "postgresql+psycopg://"))
    try:
        with pytest.raises(RuntimeError), Session(engine) as session, session.begin():
            session.execute(text("insert into public.orders values (1, 'acme')"))
            admit(mem, {"id": "order-1", "content": "Acme orders by the pallet."}, Provenance("user_asserted"),
                  conn=connection(session), **GATE)
            raise RuntimeError("the order failed after the memory was written")
        with Session(engine) as session, session.begin():
            session.execute(text("insert into public.orders values (2, 'acme')"))
            admit(mem, {"id": "order-2", "content": "Acme pays in EUR."}, Provenance("user_asserted"),
                  conn=connection(session), **GATE)
    finally:
        engine.dispose()
    with database.admin() as admin:
        assert [r[0] for r in admin.execute("select id from public.orders order by id")] == [2]
    assert mem.get("order-1") is None and mem.get("order-2") is not None


def test_an_autocommit_connection_runs_the_verb_in_a_transaction_of_its_own(database, store):
    mem = store.bind(ctx())
    with psycopg.connect(database.app_dsn, autocommit=True) as conn:
        admit(mem, {"id": "auto-1", "content": "Committed by autocommit."}, Provenance("user_asserted"), conn=conn,
              **GATE)
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    assert mem.get("auto-1") is not None


def test_a_failed_transaction_is_refused_with_a_typed_error_and_nothing_is_written(database, store):
    mem = store.bind(ctx())
    before = _state(database)
    with psycopg.connect(database.app_dsn) as conn:
        with pytest.raises(psycopg.errors.DivisionByZero):
            conn.execute("select 1 / 0")
        with pytest.raises(InvalidArguments, match="already failed"):
            admit(mem, {"content": "Never written."}, Provenance("user_asserted"), conn=conn, **GATE)
        conn.rollback()
    assert _state(database) == before


def test_the_caller_can_go_on_after_a_verb_failed_inside_its_transaction(database, store):
    mem = store.bind(ctx())
    with psycopg.connect(database.app_dsn) as conn:
        admit(mem, {"id": "keep-1", "content": "Kept."}, Provenance("user_asserted"), conn=conn, **GATE)
        with pytest.raises(InvalidArguments):  # the id is taken: the verb's savepoint is rolled back
            admit(mem, {"id": "keep-1", "content": "Again."}, Provenance("user_asserted"), conn=conn, **GATE)
        admit(mem, {"id": "keep-2", "content": "Also kept."}, Provenance("user_asserted"), conn=conn, **GATE)
        conn.commit()
    assert mem.get("keep-1") is not None and mem.get("keep-2") is not None


def test_a_nested_verb_with_another_context_puts_the_outer_context_back(store):
    # publish reads back with the read allow-list lifted; the caller's transaction keeps its own
    mem = store.bind(ctx(adapter="agent-x", read_adapters=("agent-x",)))
    with store.pool.connection() as conn:
        with store.transaction(mem.ctx, conn) as c:
            publish(mem, "build", "status", "green", "tenant", conn=c)
            assert c.execute("select current_setting('pymem.read_adapters', true)").fetchone()[0] == '["agent-x"]'
            assert c.execute("select current_setting('pymem.adapter', true)").fetchone()[0] == "agent-x"


def test_store_is_importable_without_sqlalchemy_or_alembic():
    import subprocess
    import sys

    code = ("import sys, pymem; bad = [m for m in ('sqlalchemy', 'alembic', 'pymem.sqlalchemy') if m in sys.modules];"
            " print(bad); sys.exit(1 if bad else 0)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert Store is pymem.Store
