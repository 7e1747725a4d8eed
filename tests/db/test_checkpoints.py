"""A ledger something outside the database vouches for: signed checkpoints and the independent
verifier, against the superuser attacks that pass the database's own verification.

Each attack is made by the superuser (who can disable triggers and replace functions), leaves
`pymem.verify_chain` reporting clean, and must be caught by `verify --checkpoints` (a chain that
no longer extends a signed head) or by `verify --independent` (hashes recomputed in Python).
"""

from __future__ import annotations

import json
import os
import stat

import psycopg
import pytest
from click.testing import CliRunner

from pymem.context import Context
from pymem.errors import InvalidArguments
from pymem.integrity.checkpoints import Checkpoint, FileSink, anchor, check_checkpoints, open_sink
from pymem.integrity.independent import verify_independently
from pymem.integrity.signing import load_key, load_or_create_key


@pytest.fixture
def key(tmp_path):
    return load_or_create_key(tmp_path / "keys" / "signing-ed25519.pem")


@pytest.fixture
def history(store):
    """acme: five memories and a refusal; globex: two memories."""
    from pymem import Provenance, admit
    from pymem.errors import MemoryAdmissionError

    acme = store.bind(Context(tenant="acme", actor="ops"))
    for i in range(1, 6):
        acme.add([{"id": f"m{i}", "content": f"fact {i}"}])
    with pytest.raises(MemoryAdmissionError):
        admit(acme, "a blog says so", Provenance("retrieved_content"))
    store.bind(Context(tenant="globex")).add([{"id": "g1", "content": "x"}, {"id": "g2", "content": "y"}])
    return store


def sql_verify(database) -> dict[str, str | None]:
    with database.admin() as conn:
        return {t: p for t, p in conn.execute("select tenant_id, problem from pymem.verify_chain()").fetchall()}


def independent(database) -> dict[str, str | None]:
    with psycopg.connect(database.admin_dsn) as conn:
        return {t.tenant: t.problem for t in verify_independently(conn).tenants}


def checkpoint_findings(database, path, key, tenant=None):
    with psycopg.connect(database.admin_dsn) as conn:
        return check_checkpoints(conn, FileSink(path).read(), trusted_key=key.public_hex, tenant=tenant).findings


def take(database, path, key):
    with psycopg.connect(database.admin_dsn) as conn:
        made, earlier = anchor(conn, FileSink(path), key)
    assert earlier.clean, earlier
    return made


def rehash_from(conn, tenant: str, seq: int) -> None:
    """What a superuser does to make an edited chain consistent again: recompute every chain hash
    from `seq` on with the database's own functions, and point the head at the result."""
    rows = conn.execute("select seq from pymem.ledger where tenant_id = %s and seq >= %s order by seq",
                        (tenant, seq)).fetchall()
    for (s,) in rows:
        conn.execute(
            "update pymem.ledger l set prev_hash = coalesce((select p.chain_hash from pymem.ledger p"
            " where p.tenant_id = l.tenant_id and p.seq = l.seq - 1), pymem._genesis_hash(l.tenant_id))"
            " where tenant_id = %s and seq = %s", (tenant, s))
        conn.execute("update pymem.ledger l set chain_hash = sha256(l.prev_hash || pymem._event_bytes(l))"
                     " where tenant_id = %s and seq = %s", (tenant, s))
    conn.execute("update pymem.chain_heads h set seq = l.seq, chain_hash = l.chain_hash from"
                 " (select seq, chain_hash from pymem.ledger where tenant_id = %s order by seq desc limit 1) l"
                 " where h.tenant_id = %s", (tenant, tenant))


def superuser(database):
    conn = psycopg.connect(database.admin_dsn, autocommit=True)
    conn.execute("alter table pymem.ledger disable trigger ledger_no_update_delete")
    conn.execute("set session_replication_role = replica")
    return conn


def test_anchor_signs_each_head_and_a_clean_chain_extends_it(database, history, key, tmp_path):
    path = tmp_path / "checkpoints.jsonl"
    made = take(database, path, key)
    assert {(c.tenant, c.seq) for c in made} == {("acme", 6), ("globex", 2)}
    assert all(c.signature_ok() and c.public_key == key.public_hex for c in made)
    lines = path.read_text().splitlines()
    assert len(lines) == 2 and stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert all("fact" not in line for line in lines)  # heads and hashes, never content
    history.bind(Context(tenant="acme")).add([{"id": "m6", "content": "later"}])
    assert checkpoint_findings(database, path, key) == []
    take(database, path, key)
    assert len(path.read_text().splitlines()) == 4


def test_attack_truncate_the_tail_and_rewind_the_head(database, history, key, tmp_path):
    path = tmp_path / "checkpoints.jsonl"
    take(database, path, key)
    with superuser(database) as conn:
        # Remove the last two events (m5's insert, the refusal) and everything that shows them.
        conn.execute("delete from pymem.ledger where tenant_id = 'acme' and seq >= 5")
        conn.execute("delete from pymem.memories where tenant_id = 'acme' and id = 'm5'")
        conn.execute("update pymem.chain_heads h set seq = 4, live_rows = 4, chain_hash = l.chain_hash"
                     " from pymem.ledger l where l.tenant_id = 'acme' and l.seq = 4 and h.tenant_id = 'acme'")
    assert sql_verify(database)["acme"] is None  # the database vouches for itself ...
    assert independent(database)["acme"] is None  # ... and the rows are consistent
    [finding] = checkpoint_findings(database, path, key)  # ... but the signed head is gone
    assert (finding.tenant, finding.seq) == ("acme", 6) and "truncated" in finding.problem
    # anchor refuses to sign the rewound chain
    with psycopg.connect(database.admin_dsn) as conn:
        made, earlier = anchor(conn, FileSink(path), key)
    assert made == [] and not earlier.clean and len(path.read_text().splitlines()) == 2


def test_attack_replace_checkpointed_events_with_correctly_hashed_ones(database, history, key, tmp_path):
    """Rewind past the checkpointed head, then append correctly hashed forged events up to (and
    beyond) it: every hash is right, the head matches, and the checkpoint still catches it."""
    path = tmp_path / "checkpoints.jsonl"
    take(database, path, key)
    with superuser(database) as conn:
        conn.execute("delete from pymem.ledger where tenant_id = 'acme' and seq = 6")  # the real refusal
        for seq, actor in ((6, "framed-user"), (7, "framed-user")):
            conn.execute(
                "insert into pymem.ledger (tenant_id, seq, event, actor, details, occurred_at, prev_hash, chain_hash)"
                " select 'acme', %s, 'admission.refused', %s, '{\"reason\": \"forged\"}', now(), l.chain_hash, '\\x00'"
                " from pymem.ledger l where l.tenant_id = 'acme' and l.seq = %s", (seq, actor, seq - 1))
        rehash_from(conn, "acme", 6)
    assert sql_verify(database)["acme"] is None
    assert independent(database)["acme"] is None
    [finding] = checkpoint_findings(database, path, key)
    assert (finding.tenant, finding.seq) == ("acme", 6) and "rewritten or forked" in finding.problem


def test_attack_rewrite_history_and_recompute_every_later_hash(database, history, key, tmp_path):
    path = tmp_path / "checkpoints.jsonl"
    take(database, path, key)
    with superuser(database) as conn:
        conn.execute("update pymem.ledger set actor = 'someone else' where tenant_id = 'acme' and seq = 2")
        rehash_from(conn, "acme", 2)
    assert sql_verify(database)["acme"] is None
    assert independent(database)["acme"] is None
    [finding] = checkpoint_findings(database, path, key)
    assert (finding.tenant, finding.seq) == ("acme", 6) and "rewritten or forked" in finding.problem
    assert checkpoint_findings(database, path, key, tenant="globex") == []


def test_attack_replace_the_verification_function(database, history, key, tmp_path):
    path = tmp_path / "checkpoints.jsonl"
    take(database, path, key)
    with superuser(database) as conn:
        conn.execute("update pymem.memories set content = 'forged' where tenant_id = 'acme' and id = 'm3'")
        conn.execute("delete from pymem.ledger where tenant_id = 'globex' and seq = 2")
        conn.execute("update pymem.chain_heads h set seq = 1, chain_hash = l.chain_hash from pymem.ledger l"
                     " where l.tenant_id = 'globex' and l.seq = 1 and h.tenant_id = 'globex'")
        conn.execute("""
            create or replace function pymem.verify_chain(p_tenant text default null)
            returns table (tenant_id text, entries bigint, rows_checked bigint, head_seq bigint, head_hash bytea,
                           bad_seq bigint, bad_memory_id text, problem text)
            language sql security definer set search_path = pg_catalog, pg_temp as $$
              select h.tenant_id, h.seq, h.live_rows, h.seq, h.chain_hash, null::bigint, null::text, null::text
                from pymem.chain_heads h where p_tenant is null or h.tenant_id = p_tenant $$""")
    assert set(sql_verify(database).values()) == {None}  # the replaced function reports clean
    found = independent(database)
    assert found["acme"] == "content does not match content_hash (row edited outside the chain)"
    assert found["globex"] == "memory has no ledger event (written with triggers disabled)"
    [finding] = checkpoint_findings(database, path, key)
    assert (finding.tenant, finding.seq) == ("globex", 2) and "truncated" in finding.problem


def test_checkpoints_with_a_bad_signature_or_another_key(database, history, key, tmp_path):
    path = tmp_path / "checkpoints.jsonl"
    take(database, path, key)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    lines[0]["seq"] = 1  # a checkpoint edited after signing
    other = load_or_create_key(tmp_path / "other.pem")
    forged = Checkpoint(**{k: v for k, v in lines[1].items() if k != "signature"} | {"public_key": other.public_hex})
    import base64

    forged = Checkpoint(**(forged.__dict__ | {"signature": base64.b64encode(other.sign(forged.signed_bytes())).decode()}))
    path.write_text(json.dumps(lines[0]) + "\n" + forged.to_line() + "\n")
    problems = sorted(f.problem for f in checkpoint_findings(database, path, key))
    assert problems == ["checkpoint signature does not verify", "checkpoint signed by an unknown key"]


def test_the_signing_key_stays_private(tmp_path):
    path = tmp_path / "k" / "key.pem"
    key = load_or_create_key(path)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600 and stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
    assert load_or_create_key(path).public_hex == key.public_hex  # generated once
    os.chmod(path, 0o644)
    with pytest.raises(InvalidArguments, match="chmod 600"):
        load_key(path)
    with pytest.raises(InvalidArguments, match="no signing key"):
        load_key(tmp_path / "missing.pem")


def test_sinks_are_pluggable():
    assert isinstance(open_sink("/tmp/x.jsonl"), FileSink)
    assert isinstance(open_sink("file:/tmp/x.jsonl"), FileSink)
    with pytest.raises(InvalidArguments, match="no checkpoint sink named 's3'"):
        open_sink("s3:bucket/key")


def test_the_commands(database, history, tmp_path):
    from pymem.cli import main

    path = tmp_path / "cp.jsonl"
    env = {"PYMEM_DSN": database.app_dsn, "PYMEM_ADMIN_DSN": database.admin_dsn, "PYMEM_TENANT": None,
           "PYMEM_SIGNING_KEY": str(tmp_path / "keys" / "k.pem")}
    run = CliRunner().invoke
    result = run(main, ["anchor", "--checkpoints", str(path)], env=env)
    assert result.exit_code == 0, result.output
    assert "anchored 2 tenant head(s)" in result.output
    result = run(main, ["verify", "--checkpoints", str(path), "--independent"], env=env)
    assert result.exit_code == 0, result.output
    assert "checkpoints: 2 checked, the chain extends every one" in result.output
    assert "independent: tampering: none detected" in result.output
    result = run(main, ["verify", "--checkpoints", str(path), "--json", "--tenant", "acme"], env=env)
    assert result.exit_code == 0 and json.loads(result.output)["checkpoints"]["checked"] == 1
    with superuser(database) as conn:
        conn.execute("update pymem.ledger set actor = 'x' where tenant_id = 'acme' and seq = 1")
        rehash_from(conn, "acme", 1)
    result = run(main, ["verify", "--checkpoints", str(path)], env=env)
    assert result.exit_code == 1, result.output
    assert "tampering: none detected" in result.output  # the database's own view ...
    assert "CHECKPOINT MISMATCH in tenant acme at seq 6" in result.output  # ... and the signed one
    result = run(main, ["anchor", "--checkpoints", str(path)], env=env)
    assert result.exit_code == 1 and "nothing anchored" in result.output
    # no key to check against: a usage error, not a finding
    env["PYMEM_SIGNING_KEY"] = str(tmp_path / "nope.pem")
    assert run(main, ["verify", "--checkpoints", str(path)], env=env).exit_code == 2
