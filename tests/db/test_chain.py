"""The per-tenant hash chain: concurrency, per-tenant serialization, tamper detection, revisions.

Writers are the app login (a non-superuser member of pymem_app). Tampering is done by the
superuser, the only one who can switch the guards off; verification runs as the superuser
(every tenant), through a tenant context, and through the `pymem verify` CLI.
"""

from __future__ import annotations

import re
import threading
import time

import psycopg
import pytest
from click.testing import CliRunner
from psycopg import errors as pgerr
from psycopg.types.json import Jsonb

THREADS = 8
PER_THREAD = 100


def set_ctx(conn, tenant, actor=None, adapter=None, scope=None):
    conn.execute("select pymem.set_context(%s, %s, %s, %s, null)", (tenant, actor, adapter, Jsonb(scope or {})))


def insert(conn, tenant, mid, content="x", embedding=None):
    conn.execute(
        "insert into pymem.memories (tenant_id, id, content, embedding) values (%s, %s, %s, %s::vector)",
        (tenant, mid, content, None if embedding is None else str(embedding)),
    )


def write_rows(database, tenant, ids):
    with database.app() as conn:
        for mid in ids:
            set_ctx(conn, tenant, actor="writer")
            insert(conn, tenant, mid, content=f"content of {mid}")
            conn.commit()


def verify(database, tenant=None) -> dict[str, dict]:
    """pymem.verify_chain as the superuser: {tenant: row}. The independent (Python) verifier and
    the streamed verification `pymem verify` runs must agree with it on every tenant, clean or
    tampered: same counts, head, bad seq, memory, problem. The streamed one runs twice: in ranges
    of two entries and two rows on three connections (so every fault also lands at the edge of a
    range), and with the default ranges."""
    from pymem.integrity import streamed
    from pymem.integrity.independent import verify_independently

    with database.admin() as conn:
        cur = conn.execute("select * from pymem.verify_chain(%s)", (tenant,))
        names = [d.name for d in cur.description]
        rows = {r[0]: dict(zip(names, r, strict=False)) for r in cur.fetchall()}
    with psycopg.connect(database.admin_dsn) as conn:
        reports = {"independent": verify_independently(conn, tenant)}
    connect = lambda: psycopg.connect(database.admin_dsn)  # noqa: E731
    reports["streamed"] = streamed.verify_streamed(connect, tenant, streamed.DatabaseBytes(), jobs=2)
    default_range = streamed.RANGE
    streamed.RANGE = 2
    try:
        reports["streamed in small ranges"] = streamed.verify_streamed(connect, tenant, streamed.DatabaseBytes(), jobs=3)
    finally:
        streamed.RANGE = default_range
    for label, report in reports.items():
        found = {t.tenant: t for t in report.tenants}
        assert list(found) == sorted(rows), label
        for name, row in rows.items():
            mine = found[name]
            assert (mine.entries, mine.rows_checked, mine.head_seq, mine.head_hash, mine.bad_seq, mine.bad_memory_id,
                    mine.problem) == (row["entries"], row["rows_checked"], row["head_seq"],
                                      bytes(row["head_hash"]).hex() if row["head_hash"] is not None else None,
                                      row["bad_seq"], row["bad_memory_id"], row["problem"]), (label, name)
    return rows


def verify_as_tenant(database, tenant) -> dict:
    with database.app() as conn:
        set_ctx(conn, tenant)
        cur = conn.execute("select * from pymem.verify_chain()")
        names = [d.name for d in cur.description]
        rows = [dict(zip(names, r, strict=False)) for r in cur.fetchall()]
        conn.rollback()
    assert len(rows) == 1 and rows[0]["tenant_id"] == tenant
    return rows[0]


def ledger(database, tenant):
    with database.admin() as conn:
        return conn.execute(
            "select seq, event, memory_id, revision, prev_hash, chain_hash from pymem.ledger"
            " where tenant_id = %s order by seq", (tenant,)).fetchall()


def run_cli(database, *args):
    from pymem.cli import main

    env = {"PYMEM_DSN": database.app_dsn, "PYMEM_ADMIN_DSN": database.admin_dsn,
           "PYMEM_TENANT": None, "PYMEM_SCOPE": None, "PYMEM_ADAPTER": None, "PYMEM_ACTOR": None}
    return CliRunner().invoke(main, ["verify", *args], env=env, catch_exceptions=False)


def assert_cli_flags(database, tenant, bad_seq=None, memory_id=None):
    """`pymem verify` (every tenant, and --tenant) exits 1 and names the bad seq / memory."""
    for args in ((), ("--tenant", tenant), ("--independent",), ("--independent", "--tenant", tenant)):
        result = run_cli(database, *args)
        assert result.exit_code == 1, (args, result.output)
        assert "tampering: none detected" not in result.output
        lines = [x for x in result.output.splitlines() if "TAMPERING" in x.upper()]
        assert len(lines) == (2 if "--independent" in args else 1), result.output
        for line in lines:
            assert tenant in line
            if bad_seq is not None:
                assert re.search(rf"\bseq {bad_seq}\b", line), line
            if memory_id is not None:
                assert memory_id in line, line


def assert_clean(database, **expected_entries):
    report = verify(database)
    for tenant, entries in expected_entries.items():
        assert report[tenant]["problem"] is None, report[tenant]
        assert report[tenant]["entries"] == entries
    return report


# -- concurrency -------------------------------------------------------------------------------

def test_concurrent_writers_one_tenant_make_one_contiguous_chain(database):
    tenant = "acme"
    errors: list[BaseException] = []

    def writer(t: int, tenant: str, count: int) -> None:
        try:
            with database.app() as conn:
                barrier.wait(timeout=30)
                for i in range(count):
                    set_ctx(conn, tenant, actor=f"thread-{t}")
                    emb = [float(t + 1), float(i + 1), 1.0] + [0.0] * 381 if i % 25 == 0 else None
                    insert(conn, tenant, f"t{t}-{i}", content=f"thread {t} row {i}", embedding=emb)
                    conn.commit()
        except BaseException as exc:  # noqa: BLE001 - surfaced below
            errors.append(exc)

    # No chain head exists yet: the threads also race to create it.
    threads = [threading.Thread(target=writer, args=(t, tenant, PER_THREAD)) for t in range(THREADS)]
    # Another tenant writing at the same time keeps its own chain.
    threads.append(threading.Thread(target=writer, args=(99, "globex", 50)))
    barrier = threading.Barrier(len(threads))
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=120)
    assert not errors, errors[:3]

    n = THREADS * PER_THREAD
    entries = ledger(database, tenant)
    assert [e[0] for e in entries] == list(range(1, n + 1))  # contiguous 1..N
    with database.admin() as conn:
        genesis = conn.execute("select pymem._genesis_hash(%s)", (tenant,)).fetchone()[0]
        head = conn.execute("select seq, chain_hash, live_rows from pymem.chain_heads where tenant_id = %s",
                            (tenant,)).fetchone()
        rows = conn.execute("select count(*) from pymem.memories where tenant_id = %s", (tenant,)).fetchone()[0]
    prev = genesis
    for seq, event, _memory_id, revision, prev_hash, chain_hash in entries:
        assert prev_hash == prev, f"fork at seq {seq}"
        assert event == "memory.insert" and revision == 1
        prev = chain_hash
    assert len({e[2] for e in entries}) == n  # one event per row, none lost or doubled
    assert rows == n
    assert head == (n, prev, n)
    report = assert_clean(database, acme=n, globex=50)
    assert report["acme"]["head_seq"] == n and report["acme"]["rows_checked"] == n
    assert bytes(report["acme"]["head_hash"]) == prev


def test_writers_of_different_tenants_never_wait_on_each_other(database):
    write_rows(database, "acme", ["a0"])
    write_rows(database, "globex", ["g0"])
    holder = database.app()
    other = database.app()
    second_acme = database.app()
    try:
        # Tenant A: an open, uncommitted transaction that holds A's chain head.
        set_ctx(holder, "acme")
        insert(holder, "acme", "a1")

        # Tenant B (with a head already) and tenant C (whose head does not exist yet) go straight through.
        for tenant, mid in (("globex", "g1"), ("initech", "i1")):
            other.execute("set lock_timeout = '2s'")
            other.execute("set statement_timeout = '5s'")
            set_ctx(other, tenant)
            insert(other, tenant, mid)  # would raise LockNotAvailable after 2 s if it waited on A
            other.commit()

        # A second writer of tenant A waits for the head lock: with a lock_timeout it gives up.
        second_acme.execute("set lock_timeout = '300ms'")
        set_ctx(second_acme, "acme")
        started = time.perf_counter()
        with pytest.raises(pgerr.LockNotAvailable):
            insert(second_acme, "acme", "a2")
        assert time.perf_counter() - started >= 0.25
        second_acme.rollback()

        holder.commit()
        # Once A's transaction commits, the second writer goes through.
        set_ctx(second_acme, "acme")
        insert(second_acme, "acme", "a2")
        second_acme.commit()
    finally:
        for c in (holder, other, second_acme):
            c.close()
    assert [e[0] for e in ledger(database, "acme")] == [1, 2, 3]
    assert_clean(database, acme=3, globex=2, initech=1)


def test_rolled_back_writes_leave_no_gap(database):
    write_rows(database, "acme", ["a0"])
    with database.app() as conn:
        set_ctx(conn, "acme")
        insert(conn, "acme", "gone")
        conn.rollback()
        set_ctx(conn, "acme")
        insert(conn, "acme", "a1")
        conn.commit()
    assert [e[0] for e in ledger(database, "acme")] == [1, 2]
    assert_clean(database, acme=2)


# -- tamper detection --------------------------------------------------------------------------

@pytest.fixture
def chained(database):
    """acme: m1..m5 at seq 1..5; globex: g1, g2 (stays clean throughout)."""
    write_rows(database, "acme", [f"m{i}" for i in range(1, 6)])
    write_rows(database, "globex", ["g1", "g2"])
    assert_clean(database, acme=5, globex=2)
    return database


def _others_clean(report):
    assert report["globex"]["problem"] is None


def test_clean_store_cli_exits_0(chained):
    result = run_cli(chained)
    assert result.exit_code == 0, result.output
    assert "tampering: none detected" in result.output
    # It prints each tenant's head hash, to be anchored outside the database.
    for tenant, row in verify(chained).items():
        assert bytes(row["head_hash"]).hex() in result.output, tenant
    result = run_cli(chained, "--tenant", "acme")
    assert result.exit_code == 0, result.output
    assert "tampering: none detected" in result.output


def test_cli_exits_2_when_it_cannot_connect(database):
    from pymem.cli import main

    env = {"PYMEM_DSN": "postgresql://nobody@127.0.0.1:9/none", "PYMEM_ADMIN_DSN": None, "PYMEM_TENANT": None}
    result = CliRunner().invoke(main, ["verify"], env=env)
    assert result.exit_code == 2, result.output


def test_empty_store_cli_exits_0(database):
    result = run_cli(database)
    assert result.exit_code == 0, result.output
    assert "tampering: none detected" in result.output


def test_tamper_edit_memory_in_replica_mode(chained):
    with chained.admin() as conn:
        conn.execute("set session_replication_role = replica")
        n = conn.execute("update pymem.memories set content = 'forged' where tenant_id = 'acme' and id = 'm3'").rowcount
        assert n == 1
    report = verify(chained)
    bad = report["acme"]
    assert bad["problem"] is not None and "content" in bad["problem"]
    assert bad["bad_memory_id"] == "m3"
    assert bad["bad_seq"] == 3  # the memory's latest ledger event
    _others_clean(report)
    assert verify_as_tenant(chained, "acme")["bad_memory_id"] == "m3"
    assert verify_as_tenant(chained, "globex")["problem"] is None
    assert_cli_flags(chained, "acme", bad_seq=3, memory_id="m3")


def test_tamper_edit_memory_and_recompute_its_hash(chained):
    with chained.admin() as conn:
        conn.execute("set session_replication_role = replica")
        conn.execute("update pymem.memories set content = 'forged' where tenant_id = 'acme' and id = 'm2'")
        conn.execute("update pymem.memories m set content_hash = pymem._content_hash(m)"
                     " where tenant_id = 'acme' and id = 'm2'")
        # The row is self-consistent now ...
        assert conn.execute("select content_hash = pymem._content_hash(m) from pymem.memories m"
                            " where tenant_id = 'acme' and id = 'm2'").fetchone()[0]
    report = verify(chained)
    bad = report["acme"]
    # ... but no longer matches the ledger.
    assert bad["problem"] is not None and "ledger" in bad["problem"]
    assert bad["bad_memory_id"] == "m2" and bad["bad_seq"] == 2
    _others_clean(report)
    assert_cli_flags(chained, "acme", bad_seq=2, memory_id="m2")


def test_tamper_delete_a_ledger_entry(chained):
    with chained.admin() as conn:
        conn.execute("alter table pymem.ledger disable trigger ledger_no_update_delete")
        assert conn.execute("delete from pymem.ledger where tenant_id = 'acme' and seq = 3").rowcount == 1
        conn.execute("alter table pymem.ledger enable always trigger ledger_no_update_delete")
    report = verify(chained)
    bad = report["acme"]
    assert bad["problem"] is not None and "gap" in bad["problem"]
    assert bad["bad_seq"] == 3, bad  # the first missing seq
    _others_clean(report)
    assert_cli_flags(chained, "acme", bad_seq=3)


def test_tamper_delete_the_last_ledger_entry(chained):
    with chained.admin() as conn:
        conn.execute("alter table pymem.ledger disable trigger ledger_no_update_delete")
        conn.execute("delete from pymem.ledger where tenant_id = 'acme' and seq = 5")
        conn.execute("alter table pymem.ledger enable always trigger ledger_no_update_delete")
    bad = verify(chained)["acme"]
    assert bad["problem"] is not None and "head" in bad["problem"]
    assert bad["bad_seq"] == 5
    assert_cli_flags(chained, "acme", bad_seq=5)


def test_tamper_edit_a_chain_hash(chained):
    with chained.admin() as conn:
        conn.execute("alter table pymem.ledger disable trigger ledger_no_update_delete")
        conn.execute("update pymem.ledger set chain_hash = sha256('forged'::bytea) where tenant_id = 'acme' and seq = 2")
        conn.execute("alter table pymem.ledger enable always trigger ledger_no_update_delete")
    report = verify(chained)
    bad = report["acme"]
    # Both entry 2 (its hash no longer matches its fields) and entry 3 (its prev_hash no longer
    # matches) are broken; the verifier names the first, the edited entry itself.
    assert bad["bad_seq"] == 2, bad
    assert "chain_hash" in bad["problem"]
    _others_clean(report)
    assert_cli_flags(chained, "acme", bad_seq=2)


def test_tamper_edit_a_ledger_field(chained):
    with chained.admin() as conn:
        conn.execute("alter table pymem.ledger disable trigger ledger_no_update_delete")
        conn.execute("update pymem.ledger set actor = 'someone else' where tenant_id = 'acme' and seq = 4")
        conn.execute("alter table pymem.ledger enable always trigger ledger_no_update_delete")
    bad = verify(chained)["acme"]
    assert bad["bad_seq"] == 4 and "chain_hash" in bad["problem"]
    assert_cli_flags(chained, "acme", bad_seq=4)


@pytest.mark.parametrize("tenant", ["acme", "newco"])
def test_tamper_insert_memory_with_triggers_disabled(chained, tenant):
    with chained.admin() as conn:
        conn.execute("set session_replication_role = replica")
        conn.execute("insert into pymem.memories (tenant_id, id, content, content_hash)"
                     " values (%s, 'planted', 'trust me', '\\x00')", (tenant,))
        # Give it a correct content hash so the only fault is the missing ledger event.
        conn.execute("update pymem.memories m set content_hash = pymem._content_hash(m) where id = 'planted'")
    report = verify(chained)
    bad = report[tenant]
    assert bad["problem"] is not None and "no ledger event" in bad["problem"]
    assert bad["bad_memory_id"] == "planted"
    assert bad["bad_seq"] is None
    _others_clean(report)
    assert_cli_flags(chained, tenant, memory_id="planted")


def test_tamper_delete_memory_with_triggers_disabled(chained):
    """A live row removed outside the chain: its latest ledger event is not a delete."""
    with chained.admin() as conn:
        conn.execute("set session_replication_role = replica")
        assert conn.execute("delete from pymem.memories where tenant_id = 'acme' and id = 'm4'").rowcount == 1
    bad = verify(chained)["acme"]
    assert bad["problem"] is not None, "a memory deleted with triggers disabled goes unnoticed"
    assert bad["bad_memory_id"] == "m4"
    assert bad["bad_seq"] == 4  # the memory's latest ledger event, as for an edited row
    assert_cli_flags(chained, "acme", bad_seq=4, memory_id="m4")


def test_verify_with_tenant_context_cannot_look_at_other_tenants(chained):
    with chained.app() as conn:
        set_ctx(conn, "acme")
        with pytest.raises(pgerr.InsufficientPrivilege):
            conn.execute("select * from pymem.verify_chain('globex')")


# -- revisions ---------------------------------------------------------------------------------

FORGING_UPDATES = [
    "update pymem.memories set content = 'v2' where id = 'r'",
    "update pymem.memories set content = 'v3', revision = 99 where id = 'r'",
    "update pymem.memories set content = 'v4', revision = 1, created_at = now() where id = 'r'",
    "update pymem.memories set importance = 0.5 where id = 'r'",
    "update pymem.memories set content_hash = '\\x00' where id = 'r'",
]
FORGING_INSERT = ("insert into pymem.memories (tenant_id, id, content, revision, created_at, content_hash)"
                  " values ('acme', 'r', 'v1', 42, '2000-01-01', '\\xdeadbeef')")


def test_the_app_login_cannot_name_bookkeeping_columns(database):
    """revision, created_at, updated_at and content_hash are the database's: the app login holds no
    INSERT or UPDATE privilege on them, so a statement that names one is refused outright."""
    with database.app() as conn:
        for sql in [FORGING_INSERT] + [u for u in FORGING_UPDATES if "revision" in u or "content_hash" in u
                                       or "created_at" in u]:
            set_ctx(conn, "acme")
            with pytest.raises(pgerr.InsufficientPrivilege):
                conn.execute(sql)
            conn.rollback()
    with database.admin() as conn:
        assert conn.execute("select count(*) from pymem.memories").fetchone()[0] == 0
        assert conn.execute("select count(*) from pymem.ledger").fetchone()[0] == 0


def test_revisions_count_up_and_cannot_be_forged(database):
    """Whoever may name them (a superuser here), the triggers set them: the revision counts up,
    created_at is the database's time, and the hash is recomputed."""
    with database.admin() as conn:
        with conn.transaction():
            set_ctx(conn, "acme")
            conn.execute(FORGING_INSERT)
            started = conn.execute("select now()").fetchone()[0]
        with conn.transaction():
            set_ctx(conn, "acme")
            first = conn.execute("select revision, created_at, updated_at, content_hash = pymem._content_hash(m)"
                                 " from pymem.memories m where id = 'r'").fetchone()
        # Neither a backdated created_at nor a revision or hash is taken from the statement.
        assert first[0] == 1 and first[3] is True
        assert first[1] == started

        seen = [1]
        for sql in FORGING_UPDATES:
            with conn.transaction():
                set_ctx(conn, "acme")
                conn.execute(sql)
            with conn.transaction():
                set_ctx(conn, "acme")
                rev, created, updated, hash_ok = conn.execute(
                    "select revision, created_at, updated_at, content_hash = pymem._content_hash(m)"
                    " from pymem.memories m where id = 'r'").fetchone()
            seen.append(rev)
            assert created == first[1], "created_at must be kept across updates"
            assert updated >= first[2]
            assert hash_ok
    assert seen == [1, 2, 3, 4, 5, 6]
    events = [(e[0], e[1], e[3]) for e in ledger(database, "acme")]
    assert events == [(1, "memory.insert", 1)] + [(i, "memory.update", i) for i in range(2, 7)]
    assert_clean(database, acme=6)


def test_revisions_through_the_python_path(store, database):
    from pymem.context import Context

    mem = store.bind(Context(tenant="acme", actor="u1"))
    (mid,) = mem.add([{"content": "hello"}])
    assert mem.get_row(mid)["revision"] == 1
    with store.transaction(mem.ctx) as conn:
        conn.execute("update pymem.memories set content = 'hello again' where id = %s", (mid,))
    with store.transaction(mem.ctx) as conn:
        conn.execute("update pymem.memories set tags = '{a}' where id = %s", (mid,))
    row = mem.get_row(mid)
    assert row["revision"] == 3 and row["content"] == "hello again" and row["tags"] == ["a"]
    with database.admin() as conn:
        actors = conn.execute("select distinct actor from pymem.ledger").fetchall()
        named = conn.execute("select a.actor from pymem.actor_pseudonyms a join pymem.ledger l"
                             " on 'p:' || a.token = l.actor and a.tenant_id = l.tenant_id group by 1").fetchall()
    # the ledger records the actor under its pseudonym; the link table names them
    assert len(actors) == 1 and actors[0][0].startswith("p:") and named == [("u1",)]
