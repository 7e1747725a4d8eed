"""Verification since the newest signed checkpoint (pymem.integrity.incremental).

Tampering after the checkpoint is caught, with the full verification's own messages; tampering
with a row whose memory has no event after the checkpoint is, by design, not caught here (the full
verification finds it); a checkpoint whose signature fails, or that another key signed, is refused;
the independent verifier gets the same option and agrees. Each attack is the superuser's (triggers
disabled, replica mode), as in tests/db/test_checkpoints.py.
"""

from __future__ import annotations

import json

import psycopg
import pytest
from click.testing import CliRunner
from test_checkpoints import rehash_from, superuser, take

from pymem.context import Context
from pymem.errors import InvalidArguments
from pymem.integrity import audit_chain
from pymem.integrity.checkpoints import Checkpoint, FileSink
from pymem.integrity.incremental import IncrementalReport, verify_since
from pymem.integrity.independent import PythonBytes
from pymem.integrity.signing import load_or_create_key
from pymem.integrity.streamed import CONTENT, DELETED, HEAD, LEDGER_HASH, MISSING, NO_EVENT, DatabaseBytes


@pytest.fixture
def key(tmp_path):
    return load_or_create_key(tmp_path / "keys" / "signing-ed25519.pem")


@pytest.fixture
def anchored(store, database, key, tmp_path):
    """acme: m1..m5 anchored at seq 5, then m6..m8 written and m2 updated after the checkpoint
    (seq 6..9); globex: g1, g2 anchored at seq 2 and untouched since. Returns the checkpoint path."""
    acme = store.bind(Context(tenant="acme", actor="ops"))
    acme.add([{"id": f"m{i}", "content": f"fact {i}"} for i in range(1, 6)])
    store.bind(Context(tenant="globex", actor="ops")).add([{"id": "g1", "content": "x"}, {"id": "g2", "content": "y"}])
    path = tmp_path / "checkpoints.jsonl"
    take(database, path, key)
    for i in range(6, 9):
        acme.add([{"id": f"m{i}", "content": f"later fact {i}"}])
    acme.upsert_many([{"id": "m2", "content": "fact 2, corrected"}], idempotency_key="correct-m2")
    return path


def since(database, path, key, tenant=None, encoder=None) -> IncrementalReport:
    def connect():
        return psycopg.connect(database.admin_dsn)

    return verify_since(connect, tenant, encoder or DatabaseBytes(), FileSink(path).read(), trusted_key=key.public_hex)


def full(database) -> dict[str, str | None]:
    with database.admin() as conn:
        return {t: p for t, p in conn.execute("select tenant_id, problem from pymem.verify_chain()").fetchall()}


def problems(report) -> dict[str, str | None]:
    return {t.tenant: t.problem for t in report.tenants}


def test_a_clean_store_verifies_only_what_was_written_since(database, anchored, key):
    report = since(database, anchored, key)
    assert report.clean and report.since == {"acme": 5, "globex": 2}
    acme, globex = report.tenants
    # acme: seq 6..9 walked, the rows of m6, m7, m8 and m2 re-hashed, never m1, m3, m4, m5
    assert (acme.entries, acme.rows_checked, acme.head_seq) == (4, 4, 9)
    assert (globex.entries, globex.rows_checked, globex.head_seq) == (0, 0, 2)
    with database.admin() as conn:
        heads = dict(conn.execute("select tenant_id, encode(chain_hash, 'hex') from pymem.chain_heads").fetchall())
    assert {t.tenant: t.head_hash for t in report.tenants} == heads
    independent = since(database, anchored, key, encoder=PythonBytes())
    assert independent.clean and [(t.entries, t.rows_checked) for t in independent.tenants] == [(4, 4), (0, 0)]


def test_one_tenant_on_the_app_login(store, anchored, key, database):
    def connect():
        return store.pool.connection()

    report = verify_since(connect, "acme", DatabaseBytes(), FileSink(anchored).read(), trusted_key=key.public_hex)
    assert report.clean and [t.tenant for t in report.tenants] == ["acme"] and report.since == {"acme": 5}


# Each attack touches a memory with an event after the checkpoint (m6, written at seq 6; m2,
# updated at seq 9) or the ledger after it: the incremental verification names the same fault as
# the full one.
AFTER = [
    ("edit_content", ["update pymem.memories set content = 'forged' where tenant_id = 'acme' and id = 'm6'"],
     CONTENT),
    ("edit_updated_row", ["update pymem.memories set content = 'forged' where tenant_id = 'acme' and id = 'm2'"],
     CONTENT),
    ("edit_content_and_hash",
     ["update pymem.memories set content = 'forged', content_hash = sha256('x') where tenant_id = 'acme' and id = 'm7'"],
     None),  # the row hashes to itself again: the ledger's hash differs (checked below by substring)
    ("delete_row", ["delete from pymem.memories where tenant_id = 'acme' and id = 'm8'"], MISSING),
    ("edit_ledger_field", ["update pymem.ledger set actor = 'someone else' where tenant_id = 'acme' and seq = 7"],
     "chain_hash does not match the entry's fields"),
    ("delete_last_entry", ["delete from pymem.ledger where tenant_id = 'acme' and seq = 9"], HEAD),
    ("delete_middle_entry", ["delete from pymem.ledger where tenant_id = 'acme' and seq = 7"], "seq gap"),
    ("edit_chain_hash", ["update pymem.ledger set chain_hash = sha256('x') where tenant_id = 'acme' and seq = 8"],
     "chain_hash does not match the entry's fields"),
]


@pytest.mark.parametrize(("name", "statements", "expected"), AFTER, ids=[a[0] for a in AFTER])
def test_tampering_after_the_checkpoint_is_caught(database, anchored, key, name, statements, expected):
    assert since(database, anchored, key).clean
    with superuser(database) as conn:
        for statement in statements:
            conn.execute(statement)
    found = problems(since(database, anchored, key))
    by_full = full(database)
    assert found["acme"] is not None and found["acme"] == by_full["acme"]  # the full verification's own words
    if expected is not None:
        assert expected in found["acme"]
    else:
        assert found["acme"] in (CONTENT, LEDGER_HASH)
    assert found["globex"] is None
    assert problems(since(database, anchored, key, encoder=PythonBytes()))["acme"] == found["acme"]


def test_a_row_put_back_outside_the_chain_after_its_delete_is_caught(database, anchored, key, store):
    """m6 deleted through the chain after the checkpoint, then planted again by the superuser."""
    store.bind(Context(tenant="acme", actor="ops")).delete_many(["m6"])
    with superuser(database) as conn:
        conn.execute("insert into pymem.memories (tenant_id, id, content, content_hash)"
                     " values ('acme', 'm6', 'trust me', '\\x00')")
        conn.execute("update pymem.memories m set content_hash = pymem._content_hash(m) where id = 'm6'")
    assert problems(since(database, anchored, key))["acme"] == DELETED == full(database)["acme"]


BEFORE = [
    ("edit_content", "update pymem.memories set content = 'forged' where tenant_id = 'acme' and id = 'm3'", CONTENT),
    ("delete_row", "delete from pymem.memories where tenant_id = 'acme' and id = 'm4'", MISSING),
    ("insert_row", "insert into pymem.memories (tenant_id, id, content, content_hash)"
                   " values ('acme', 'planted', 'trust me', '\\x00')", NO_EVENT),
]


@pytest.mark.parametrize(("name", "statement", "by_full"), BEFORE, ids=[b[0] for b in BEFORE])
def test_tampering_with_rows_untouched_since_the_checkpoint_is_by_design_not_caught(
        database, anchored, key, name, statement, by_full):
    """The incremental verification reads only the rows of memories with an event after the
    checkpoint: a row edited, deleted or planted outside the chain whose memory had none is left to
    the full verification, which catches it."""
    with superuser(database) as conn:
        conn.execute(statement)
    assert since(database, anchored, key).clean
    assert since(database, anchored, key, encoder=PythonBytes()).clean
    assert full(database)["acme"] == by_full


def test_rewriting_history_before_the_checkpoint_is_caught_at_the_checkpoint(database, anchored, key):
    """Entries before the checkpoint are not re-walked, but rewriting one and recomputing every
    later hash changes the hash at the checkpoint's seq."""
    with superuser(database) as conn:
        conn.execute("update pymem.ledger set actor = 'someone else' where tenant_id = 'acme' and seq = 2")
        rehash_from(conn, "acme", 2)
    assert full(database)["acme"] is None  # the database vouches for itself
    acme = since(database, anchored, key).tenants[0]
    assert acme.bad_seq == 5 and "chain rewritten or forked" in acme.problem


def test_truncating_past_the_checkpoint_is_caught(database, anchored, key):
    with superuser(database) as conn:
        conn.execute("delete from pymem.ledger where tenant_id = 'acme' and seq >= 5")
        conn.execute("delete from pymem.memories where tenant_id = 'acme' and id in ('m5', 'm6', 'm7', 'm8')")
        conn.execute("update pymem.chain_heads h set seq = 4, live_rows = 4, chain_hash = l.chain_hash"
                     " from pymem.ledger l where l.tenant_id = 'acme' and l.seq = 4 and h.tenant_id = 'acme'")
    acme = since(database, anchored, key).tenants[0]
    assert "chain truncated" in acme.problem and "ends at seq 4" in acme.problem
    with superuser(database) as conn:  # a tenant whose whole chain is gone
        for table in ("ledger", "memories", "chain_heads", "scope_rows"):
            conn.execute(f"delete from pymem.{table} where tenant_id = 'globex'")
    assert problems(since(database, anchored, key))["globex"] == "the checkpointed tenant has no ledger any more " \
                                                                 "(chain removed)"


def _rewrite(path, edit) -> None:
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    path.write_text("".join(json.dumps(edit(x)) + "\n" for x in lines))


def test_a_checkpoint_whose_signature_fails_is_refused(database, anchored, key, tmp_path):
    # a forger moves acme's newest checkpoint to the head (past tampering he made) without the key
    with superuser(database) as conn:
        conn.execute("update pymem.memories set content = 'forged' where tenant_id = 'acme' and id = 'm6'")
        head = conn.execute("select seq, encode(chain_hash, 'hex') from pymem.chain_heads"
                            " where tenant_id = 'acme'").fetchone()
    _rewrite(anchored, lambda x: x | {"seq": head[0], "chain_hash": head[1]} if x["tenant"] == "acme" else x)
    report = since(database, anchored, key)
    acme = report.tenants[0]
    assert not report.clean and acme.entries == 0 and acme.rows_checked == 0
    assert acme.problem == "the newest checkpoint has a signature that does not verify: refused, nothing " \
                           "verified since it"
    assert problems(report)["globex"] is None
    # signed, correctly, by another key: refused too
    other = load_or_create_key(tmp_path / "other.pem")
    import base64

    def resign(x):
        cp = Checkpoint(**{k: v for k, v in x.items() if k != "signature"} | {"public_key": other.public_hex})
        return cp.__dict__ | {"signature": base64.b64encode(other.sign(cp.signed_bytes())).decode()}
    _rewrite(anchored, resign)
    assert set(problems(since(database, anchored, key)).values()) == {
        "the newest checkpoint is signed by an unknown key: refused, nothing verified since it"}


def test_the_newest_checkpoint_is_the_last_appended(database, anchored, key, store):
    take(database, anchored, key)  # acme now anchored at seq 9
    store.bind(Context(tenant="acme", actor="ops")).add([{"id": "m9", "content": "after the second"}])
    acme = since(database, anchored, key).tenants[0]
    assert acme.clean and (acme.entries, acme.rows_checked) == (1, 1)


def test_a_tenant_without_a_checkpoint_is_verified_in_full(database, anchored, key, store):
    store.bind(Context(tenant="newco", actor="ops")).add([{"id": "n1", "content": "new"}, {"id": "n2", "content": "x"}])
    report = since(database, anchored, key)
    newco = next(t for t in report.tenants if t.tenant == "newco")
    assert report.clean and report.since["newco"] is None and (newco.entries, newco.rows_checked) == (2, 2)
    with superuser(database) as conn:  # planted outside the chain, in a tenant never anchored
        conn.execute("update pymem.memories set content = 'forged' where tenant_id = 'newco' and id = 'n1'")
    assert problems(since(database, anchored, key))["newco"] == CONTENT


def test_the_library_call_and_its_errors(store, anchored, key, tmp_path):
    settings_key = store.settings.signing_key_path
    with pytest.raises(InvalidArguments, match="needs the checkpoints"):
        audit_chain(store, since_checkpoint=True)
    # the store's own key file is not this test's key: name the public key
    public = tmp_path / "public.hex"
    public.write_text(key.public_hex)
    result = audit_chain(store, checkpoints=str(anchored), public_key=public, since_checkpoint=True, independent=True)
    assert result.clean and result.receipts is None and result.checkpoints.checked == 2
    assert isinstance(result.database, IncrementalReport) and result.independent.clean
    assert result.to_json()["since_checkpoint"] == {"acme": 5, "globex": 2}
    assert settings_key == store.settings.signing_key_path


def test_the_command(database, anchored, key, tmp_path):
    from pymem.cli import main

    env = {"PYMEM_DSN": database.app_dsn, "PYMEM_ADMIN_DSN": database.admin_dsn, "PYMEM_TENANT": None,
           "PYMEM_SIGNING_KEY": str(key.path)}
    run = CliRunner().invoke
    result = run(main, ["verify", "--since-checkpoint"], env=env)
    assert result.exit_code == 2 and "--since-checkpoint needs --checkpoints" in result.output
    result = run(main, ["verify", "--since-checkpoint", "--checkpoints", str(anchored), "--independent"], env=env)
    assert result.exit_code == 0, result.output
    assert "tenant acme since checkpoint seq 5: 4 entries, 4 live rows, head seq 9" in result.output
    assert "independent: tampering: none detected" in result.output
    assert "checkpoints: 2 checked, the chain extends every one" in result.output
    result = run(main, ["verify", "--since-checkpoint", "--checkpoints", str(anchored), "--json", "--tenant", "acme"],
                 env=env)
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["since_checkpoint"] == {"acme": 5} and out["entries"] == 4 and "receipts" not in out
    with superuser(database) as conn:
        conn.execute("update pymem.memories set content = 'forged' where tenant_id = 'acme' and id = 'm7'")
    result = run(main, ["verify", "--since-checkpoint", "--checkpoints", str(anchored)], env=env)
    assert result.exit_code == 1
    assert "TAMPERING DETECTED in tenant acme at seq 7, memory m7: " + CONTENT in result.output


def test_tenants_are_found_without_a_head_row_or_a_checkpoint(database, anchored, key, store):
    """A tenant never anchored whose head row was removed, and one planted with rows only: both are
    found (by skipping along the primary keys) and verified in full."""
    store.bind(Context(tenant="newco", actor="ops")).add([{"id": "n1", "content": "new"}])
    with superuser(database) as conn:
        conn.execute("delete from pymem.chain_heads where tenant_id = 'newco'")
        conn.execute("insert into pymem.memories (tenant_id, id, content, content_hash)"
                     " values ('planted', 'p1', 'trust me', '\\x00')")
    found = problems(since(database, anchored, key))
    by_full = full(database)
    assert found["newco"] == HEAD == by_full["newco"]
    assert found["planted"] == NO_EVENT == by_full["planted"]
    assert found["acme"] is None and found["globex"] is None
