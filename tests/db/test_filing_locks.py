"""No lock a stranger can hold: lesson and convention filing serialise on a row only the tenant's
own context can lock, with a timeout that ends in LockTimeout.

Filing used to serialise on pg_advisory_xact_lock(hashtextextended(<json of tenant and type>)): a
key any login computes, and pg_advisory_lock is PUBLIC, so a login without a pymem role held it
and every tenant's filing waited for ever. Each attack runs as the login that would mount it.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path

import psycopg
import pytest
from helpers.database import AGENT_LOGIN, STRANGER_LOGIN, bind_login, login_dsn
from helpers.lessons import GATE, ctx, lesson
from psycopg import errors as pgerr

from pymem.conventions import active_conventions, file_review_correction
from pymem.errors import LockTimeout
from pymem.lessons import list_lessons
from pymem.vocabulary import LESSON_TYPES, canonical_json

ROOT = Path(__file__).resolve().parents[2]
C1 = "1" * 40
TENANTS = ("acme", "globex")
#: Generous: only a filing that hangs (waits on a lock nobody releases) runs this long.
HANG = 300


def _old_keys(tenant: str) -> list[str]:
    """The advisory-lock keys filing used to take, as any login could compute them."""
    return [canonical_json(["pymem", "lessons", tenant, t]) for t in LESSON_TYPES] + [
        canonical_json(["pymem", "conventions", tenant])]


def _file_everything(store, tenant: str) -> None:
    memories = store.bind(ctx(tenant))
    lesson(memories, f"Run the {tenant} migrations before the tests", ["migrations"])
    file_review_correction(memories, "Indent Makefile recipes with tabs", "Makefile", C1, "make lint-tabs", **GATE)


def _in_thread(fn, *args):
    """Run fn in a thread; (finished, error) after at most HANG seconds."""
    box: dict = {}

    def target():
        try:
            fn(*args)
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(HANG)
    return not thread.is_alive(), box.get("error")


def test_a_login_without_a_pymem_role_holding_any_advisory_lock_blocks_no_filing(kstore, database):
    with psycopg.connect(login_dsn(database, STRANGER_LOGIN), autocommit=True) as stranger:
        assert not stranger.execute("select pg_has_role(current_user, 'pymem_app', 'member')").fetchone()[0]
        # every key filing ever used, for every tenant, plus a few of its own choosing, held for ever
        for tenant in TENANTS:
            for key in _old_keys(tenant):
                stranger.execute("select pg_advisory_lock(hashtextextended(%s, 0))", (key,))
        stranger.execute("select pg_advisory_lock(1), pg_advisory_lock(0), pg_advisory_lock(-1)")
        held = stranger.execute("select count(*) from pg_locks where locktype = 'advisory' and pid = pg_backend_pid()"
                                ).fetchone()[0]
        assert held == len(TENANTS) * len(_old_keys("x")) + 3
        for tenant in TENANTS:
            finished, error = _in_thread(_file_everything, kstore, tenant)
            assert finished, f"{tenant}'s filing waited on a lock the stranger holds"
            assert error is None, error
    for tenant in TENANTS:
        memories = kstore.bind(ctx(tenant))
        assert len(list_lessons(memories)) == 2  # the project lesson and the correction's feedback lesson
        assert len(active_conventions(memories).rules) == 1


def _lessons(database) -> int:
    with database.admin() as conn:
        return conn.execute("select count(*) from pymem.memories where kind = 'lesson'").fetchone()[0]


def test_a_filing_held_up_in_its_own_tenant_fails_with_lock_timeout_and_writes_nothing(database, tmp_path):
    store = database.store(signing_key=tmp_path / "keys" / "k.pem", filing_lock_timeout_ms=300)
    try:
        # an agent of acme (a login bound to acme) holds acme's filing rows in an open transaction
        bind_login(database, AGENT_LOGIN, adapter="codex", tenants=["acme"])
        with psycopg.connect(login_dsn(database, AGENT_LOGIN)) as holder:
            holder.execute("select pymem.set_context('acme', 'agent', 'codex')")
            holder.execute("select pymem.lock_for_filing('lessons:project', 1000)")
            holder.execute("select pymem.lock_for_filing('conventions', 1000)")
            before = _lessons(database)
            acme = store.bind(ctx("acme"))
            for attempt in (lambda: lesson(acme, "Pin the base image digest", ["docker"]),
                            lambda: file_review_correction(acme, "Indent Makefile recipes with tabs", "Makefile", C1,
                                                           "make lint-tabs", **GATE)):
                finished, error = _in_thread(attempt)
                assert finished and isinstance(error, LockTimeout), error
                assert error.retry_after is not None and "lock" in str(error)
            assert _lessons(database) == before
            with database.admin() as conn:
                assert conn.execute("select count(*) from pymem.convention_receipts").fetchone()[0] == 0
            # another tenant's filings never wait for acme's
            _file_everything(store, "globex")
            # another lesson type of acme does not either
            lesson(acme, "Tag releases from main only", ["release"], memory_type="reference")
            holder.rollback()
        _file_everything(store, "acme")  # and once the holder is gone, acme files again
    finally:
        store.close()


def test_only_the_tenants_own_context_can_take_its_filing_row(database):
    statement = "select pymem.lock_for_filing('lessons:project', 1000)"
    with psycopg.connect(login_dsn(database, STRANGER_LOGIN)) as stranger:
        with pytest.raises(pgerr.InsufficientPrivilege):
            stranger.execute(statement)
        stranger.rollback()
        with pytest.raises(pgerr.InsufficientPrivilege):
            stranger.execute("lock table pymem.filing_locks in access exclusive mode")
    bind_login(database, AGENT_LOGIN, adapter="codex", tenants=["globex"])
    with psycopg.connect(login_dsn(database, AGENT_LOGIN)) as agent:
        with pytest.raises(pgerr.InsufficientPrivilege):  # acme is not its tenant
            agent.execute("select pymem.set_context('acme', 'agent', 'codex')")
        agent.rollback()
        with pytest.raises(pgerr.InvalidParameterValue, match="tenant context"):  # no tenant, no lock
            agent.execute(statement)
        agent.rollback()
        # the table itself: no privilege to read, lock rows of, or lock
        for sql in ("select * from pymem.filing_locks for update", "lock table pymem.filing_locks in share mode",
                    "insert into pymem.filing_locks values ('acme', 'lessons:project')"):
            with pytest.raises(pgerr.InsufficientPrivilege):
                agent.execute(sql)
            agent.rollback()
        agent.execute("select pymem.set_context('globex', 'agent', 'codex')")
        agent.execute(statement)  # its own tenant's row: yes
        agent.rollback()
    with database.admin() as conn:
        assert conn.execute("select tenant_id, name from pymem.filing_locks").fetchall() == []  # rolled back


def test_bad_lock_arguments_are_refused(database):
    with database.app() as conn:
        conn.execute("select pymem.set_context('acme')")
        for args in (("Lessons", 1000), ("lessons:project", 0), ("lessons:project", 600001), (None, 1000)):
            with pytest.raises(pgerr.InvalidParameterValue):
                conn.execute("select pymem.lock_for_filing(%s, %s)", args)
            conn.rollback()
            conn.execute("select pymem.set_context('acme')")


def test_no_advisory_lock_is_left_in_the_library_or_the_schema():
    """Every lock pymem takes is on a row under row-level security; the pool's reset may still
    release whatever advisory locks a caller took on a pooled connection."""
    found = []
    for path in [*ROOT.joinpath("sql").rglob("*.sql"), *ROOT.joinpath("pymem").rglob("*.py")]:
        if path.parent.name == "migrations" and path.name < "0009":
            continue  # history: migrations are never edited
        for line in path.read_text(encoding="utf-8").splitlines():
            code = line.split("--")[0] if path.suffix == ".sql" else line.split("#")[0]
            if re.search(r"pg_(try_)?advisory_(xact_)?lock(_shared)?\s*\(", code):
                found.append(f"{path.relative_to(ROOT)}: {line.strip()}")
    assert found == []
