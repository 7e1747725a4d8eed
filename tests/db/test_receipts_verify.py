"""`pymem verify` covers lessons and convention receipts: the chain, each receipt's signature and
its anchoring ledger entry. Each attack here is made with a superuser's or an app login's powers,
and each must fail verification (exit 1) with the receipt named."""

from __future__ import annotations

import hashlib
import json

import pytest
from helpers.cli import cli_runner
from helpers.lessons import GATE, ctx, lesson
from psycopg.types.json import Jsonb

from pymem import Context
from pymem.conventions import file_review_correction
from pymem.db import connect
from pymem.integrity import audit_chain
from pymem.integrity.receipt_audit import ReceiptForm, rule_sha256
from pymem.integrity.signing import load_or_create_key

C1 = "a" * 40


@pytest.fixture
def filed(kstore):
    """acme: a lesson and a receipt; returns the receipt."""
    acme = kstore.bind(ctx())
    lesson(acme, "Retry webhooks at most three times", ["webhooks"])
    return file_review_correction(acme, "Indent Makefile recipes with tabs", "Makefile", C1, "make lint-tabs",
                                  **GATE).receipt


@pytest.fixture
def run(database, monkeypatch, kstore):
    return cli_runner(database, monkeypatch, PYMEM_SIGNING_KEY=str(kstore.settings.signing_key_path))


def as_superuser(database, *statements, params=()):
    with database.admin() as conn:
        for sql in statements:
            conn.execute(sql, params if "%s" in sql else None)


def hand_anchor(database, tenant: str, event: str, digest: bytes, details: dict) -> None:
    """Append an event to the tenant's chain with the chain's own function: the chain stays valid."""
    with connect(database.admin_dsn, role=None) as conn:
        conn.execute("select pymem.set_context(%s)", (tenant,))
        conn.execute("select pymem._append_events(array[row(%s, %s, null, null, %s, 0, %s)::pymem._pending_event])",
                     (tenant, event, digest, Jsonb(details)))
        conn.commit()


def verify(run, *args):
    result = run("verify", *args)
    return result.exit_code, result.output


def test_a_clean_store_verifies_with_its_receipts(run, filed):
    code, out = verify(run)
    assert code == 0, out
    assert "receipts: 1 checked" in out and "tampering: none detected" in out
    code, out = verify(run, "--json")
    report = json.loads(out)
    assert report["clean"] and report["receipts"]["checked"] == 1 and report["receipts"]["findings"] == []
    # the chain with lessons, receipts and their events recomputes in Python too
    code, out = verify(run, "--independent")
    assert code == 0 and "independent: tampering: none detected" in out, out


def test_a_rewritten_rule_text_fails_and_is_named(run, filed, database):
    as_superuser(database,
                 "alter table pymem.convention_receipts disable trigger convention_receipts_no_update_delete",
                 "update pymem.convention_receipts set rule_text = 'Indent Makefile recipes with spaces'",
                 "alter table pymem.convention_receipts enable always trigger convention_receipts_no_update_delete")
    code, out = verify(run)
    assert code == 1, out
    assert f"RECEIPT PROBLEM in tenant acme: receipt {filed.id} version 1" in out and "rule text rewritten" in out


def test_a_rewritten_rule_and_its_hash_fail_on_the_signature(run, filed, database):
    text = "Indent Makefile recipes with spaces"
    as_superuser(database,
                 "alter table pymem.convention_receipts disable trigger convention_receipts_no_update_delete",
                 "update pymem.convention_receipts set rule_text = %s, rule_sha256 = %s",
                 "alter table pymem.convention_receipts enable always trigger convention_receipts_no_update_delete",
                 params=(text, rule_sha256(text)))
    code, out = verify(run)
    assert code == 1 and filed.id in out and "signature does not verify" in out, out


def test_a_hand_appended_anchor_fails_and_is_named(run, filed, database):
    hand_anchor(database, "acme", "convention.filed", bytes.fromhex(filed.receipt_sha256),
                {"receipt": filed.id, "version": 1, "public_key": filed.public_key, "signature": filed.signature})
    code, out = verify(run)
    assert code == 1, out
    assert filed.id in out and "anchored by 2 ledger entries" in out and "appended by hand" in out
    assert "tampering: none detected" in out  # the chain itself is intact: only the receipts check sees it


def test_a_hand_inserted_receipt_with_its_anchor_fails(run, filed, database, tmp_path):
    """A superuser writes a receipt row past the triggers and anchors it by hand; without the
    installation's private key its signature cannot be right."""
    form = ReceiptForm(tenant="acme", id="cv-forged", version=1, scope={}, source_adapter=None, subject="Makefile",
                       subject_symbol=None, rule_sha256=rule_sha256("Deploy on Fridays").hex(), base_commit=C1,
                       assertion="true", lesson_id=filed.lesson_id, public_key=filed.public_key)
    as_superuser(database, "set session_replication_role = replica",
                 "insert into pymem.convention_receipts (tenant_id, id, version, scope, subject, rule_text, rule_sha256,"
                 " base_commit, assertion, lesson_id, public_key, signature, receipt_sha256) values"
                 " ('acme', 'cv-forged', 1, '{}', 'Makefile', 'Deploy on Fridays', %s, %s, 'true', %s, %s, %s, %s)",
                 params=(rule_sha256("Deploy on Fridays"), C1, filed.lesson_id, filed.public_key, b"\x01" * 64,
                         form.digest()))
    hand_anchor(database, "acme", "convention.filed", form.digest(),
                {"receipt": "cv-forged", "version": 1, "public_key": filed.public_key, "signature": "01" * 64})
    code, out = verify(run)
    assert code == 1 and "receipt cv-forged version 1" in out and "signature does not verify" in out, out


def test_a_receipt_signed_by_another_key_fails(run, filed, kstore, database, tmp_path):
    """An app login files a receipt naming the installation key but signed with its own."""
    other = load_or_create_key(tmp_path / "elsewhere" / "key.pem")
    form = ReceiptForm(tenant="acme", id="cv-other", version=1, scope={}, source_adapter=None, subject="Makefile",
                       subject_symbol=None, rule_sha256=rule_sha256("Tabs are optional").hex(), base_commit=C1,
                       assertion="true", lesson_id=filed.lesson_id, public_key=filed.public_key)
    with kstore.transaction(Context(tenant="acme")) as conn:
        conn.execute("insert into pymem.convention_receipts (tenant_id, id, version, scope, subject, rule_text,"
                     " rule_sha256, base_commit, assertion, lesson_id, public_key, signature, receipt_sha256)"
                     " values ('acme', 'cv-other', 1, '{}', 'Makefile', 'Tabs are optional', %s, %s, 'true', %s, %s,"
                     " %s, %s)", (rule_sha256("Tabs are optional"), C1, filed.lesson_id, filed.public_key,
                                  other.sign(form.signed_bytes()), form.digest()))
    code, out = verify(run)
    assert code == 1 and "receipt cv-other version 1" in out and "signature does not verify" in out, out


def test_a_receipt_under_another_key_fails_and_names_it(run, filed, database, tmp_path):
    """A superuser writes a receipt properly signed by a key that is not the installation's."""
    other = load_or_create_key(tmp_path / "elsewhere" / "key.pem")
    form = ReceiptForm(tenant="acme", id="cv-alien", version=1, scope={}, source_adapter=None, subject="Makefile",
                       subject_symbol=None, rule_sha256=rule_sha256("Tabs are optional").hex(), base_commit=C1,
                       assertion="true", lesson_id=filed.lesson_id, public_key=other.public_hex)
    signature = other.sign(form.signed_bytes())
    as_superuser(database, "set session_replication_role = replica",
                 "insert into pymem.convention_receipts (tenant_id, id, version, scope, subject, rule_text, rule_sha256,"
                 " base_commit, assertion, lesson_id, public_key, signature, receipt_sha256) values"
                 " ('acme', 'cv-alien', 1, '{}', 'Makefile', 'Tabs are optional', %s, %s, 'true', %s, %s, %s, %s)",
                 params=(rule_sha256("Tabs are optional"), C1, filed.lesson_id, other.public_hex, signature,
                         form.digest()))
    hand_anchor(database, "acme", "convention.filed", form.digest(),
                {"receipt": "cv-alien", "version": 1, "public_key": other.public_hex, "signature": signature.hex()})
    code, out = verify(run)
    assert code == 1 and "receipt cv-alien version 1" in out and "signed by another key" in out, out


def test_a_key_swapped_in_the_database_is_caught(run, filed, database, tmp_path):
    other = load_or_create_key(tmp_path / "elsewhere" / "key.pem")
    as_superuser(database, "update pymem.signing_keys set public_key = %s", params=(other.public_hex,))
    code, out = verify(run)
    assert code == 1 and "registered in the database" in out and "replaced in the database" in out, out


def test_an_anchor_for_a_receipt_that_does_not_exist_fails(run, filed, database):
    hand_anchor(database, "acme", "convention.confirmed", hashlib.sha256(b"x").digest(),
                {"receipt": filed.id, "version": 2})
    code, out = verify(run)
    assert code == 1 and f"receipt {filed.id} version 2" in out and "does not exist" in out, out


def test_an_ending_written_around_the_chain_fails(run, filed, database):
    as_superuser(database, "set session_replication_role = replica",
                 "insert into pymem.convention_endings (tenant_id, receipt_id, status, reason) values"
                 " ('acme', %s, 'retired', 'quietly')", params=(filed.id,))
    code, out = verify(run)
    assert code == 1 and filed.id in out and "written outside the chain" in out, out


def test_a_rewritten_lesson_is_caught_by_the_chain(run, filed, database):
    as_superuser(database, "alter table pymem.memories disable trigger user",
                 "update pymem.memories set content = 'Never indent anything' where kind = 'lesson'"
                 " and content like 'Indent%%'",
                 "alter table pymem.memories enable trigger user")
    code, out = verify(run)
    assert code == 1 and "TAMPERING DETECTED in tenant acme" in out and filed.lesson_id in out, out


def test_every_tenant_from_the_administrative_login(filed, kstore, database):
    """Without a tenant, the administrative connection checks every tenant's receipts."""
    result = audit_chain(kstore)
    assert result.clean and result.receipts.checked == 1
    hand_anchor(database, "acme", "convention.filed", bytes.fromhex(filed.receipt_sha256),
                {"receipt": filed.id, "version": 1})
    result = audit_chain(kstore)
    assert not result.clean and result.receipts.first_problem.receipt_id == filed.id


def test_no_receipts_needs_no_key(database, monkeypatch, tmp_path):
    """A store without receipts verifies without any key file."""
    store = database.store(signing_key=tmp_path / "absent.pem")
    try:
        lesson(store.bind(ctx()), "A lesson only", ["x"])
        result = audit_chain(store, "acme")
    finally:
        store.close()
    assert result.clean and result.receipts.checked == 0 and not (tmp_path / "absent.pem").exists()
