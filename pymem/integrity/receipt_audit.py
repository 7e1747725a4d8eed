"""Convention receipts: their signed form, and the check that each one is what was signed and
anchored in the chain.

A receipt version (a row of pymem.convention_receipts) is signed with the installation's Ed25519
key over its canonical form: the canonical JSON (pymem.vocabulary.canonical_json) of the format
name, the tenant, the receipt id and version, the scope and source adapter it was filed under,
the subject and symbol, the sha256 of the rule text, the base commit, the assertion, the lesson
filed with it, and the public key. The sha256 of that form is the content_hash of the receipt's
anchoring ledger event (convention.filed for version 1, convention.confirmed after), which the
database chains when the row is inserted.

`audit_receipts` checks, for every receipt version it can read: the rule text against its hash,
the key against the installation's (the key file outside the database, which the key registered
in the database must equal too), the signature, and exactly one anchoring event whose digest,
key and signature match; every convention event in the ledger must anchor or end a receipt that
exists, and every ending must match its event. The chain itself (that those events were not
edited) is pymem.verify_chain's job, which `pymem verify` runs first.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import psycopg
from psycopg.rows import dict_row

from .. import db, queries
from ..context import Context
from ..vocabulary import canonical_json
from .signing import verify_signature

__all__ = ["FORMAT", "ReceiptForm", "rule_sha256", "ReceiptFinding", "ReceiptAudit", "audit_receipts"]

FORMAT = "pymem.convention-receipt.v1"
ANCHORS = ("convention.filed", "convention.confirmed")
ENDINGS = ("convention.retired", "convention.expired")


def rule_sha256(rule_text: str) -> bytes:
    """The sha256 of a rule's text as stored (UTF-8)."""
    return hashlib.sha256(rule_text.encode("utf-8")).digest()


@dataclass(frozen=True)
class ReceiptForm:
    """What a receipt version's signature covers."""

    tenant: str
    id: str
    version: int
    scope: Mapping[str, str]
    source_adapter: str | None
    subject: str
    subject_symbol: str | None
    rule_sha256: str  # hex
    base_commit: str
    assertion: str
    lesson_id: str
    public_key: str  # hex

    def signed_bytes(self) -> bytes:
        body = {**asdict(self), "scope": dict(self.scope), "format": FORMAT}
        return canonical_json(body).encode("utf-8")

    def digest(self) -> bytes:
        return hashlib.sha256(self.signed_bytes()).digest()

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> ReceiptForm:
        """From a pymem.convention_receipts row, by column name."""
        return cls(tenant=row["tenant_id"], id=row["id"], version=row["version"], scope=dict(row["scope"]),
                   source_adapter=row["source_adapter"], subject=row["subject"], subject_symbol=row["subject_symbol"],
                   rule_sha256=bytes(row["rule_sha256"]).hex(), base_commit=row["base_commit"],
                   assertion=row["assertion"], lesson_id=row["lesson_id"], public_key=row["public_key"])


@dataclass(frozen=True)
class ReceiptFinding:
    """One thing wrong: with the tenant, receipt, version and ledger seq it concerns, when known."""

    problem: str
    tenant: str | None = None
    receipt_id: str | None = None
    version: int | None = None
    seq: int | None = None


@dataclass(frozen=True)
class ReceiptAudit:
    """What checking the receipts found. `checked` counts receipt versions, `endings` endings."""

    checked: int = 0
    endings: int = 0
    trusted_key: str | None = None
    registered_key: str | None = None
    findings: list[ReceiptFinding] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not self.findings

    @property
    def first_problem(self) -> ReceiptFinding | None:
        return self.findings[0] if self.findings else None

    def to_json(self) -> dict[str, Any]:
        return {"clean": self.clean, "checked": self.checked, "endings": self.endings,
                "trusted_key": self.trusted_key, "registered_key": self.registered_key,
                "findings": [asdict(f) for f in self.findings]}


def _short(key: str | None) -> str:
    return f"{key[:16]}…" if key else "none"


def _check_version(row: Mapping[str, Any], trusted: str | None, anchors: list[Mapping[str, Any]]) -> str | None:
    """The first problem with one receipt version, or None."""
    if bytes(row["rule_sha256"]) != rule_sha256(row["rule_text"]):
        return "rule text rewritten: it no longer matches the hash the receipt was signed over"
    if trusted is not None and row["public_key"] != trusted:
        return f"signed by another key ({_short(row['public_key'])}), not the installation key ({_short(trusted)})"
    form = ReceiptForm.from_row(row)
    if not verify_signature(row["public_key"], bytes(row["signature"]), form.signed_bytes()):
        return "signature does not verify: the receipt was changed after it was signed, or forged"
    if bytes(row["receipt_sha256"]) != form.digest():
        return "its stored digest is not the digest of what was signed"
    if not anchors:
        return "no anchoring ledger entry: the receipt was written outside the chain"
    if len(anchors) > 1:
        seqs = ", ".join(str(a["seq"]) for a in anchors)
        return f"anchored by {len(anchors)} ledger entries (seq {seqs}): an anchor was appended by hand"
    anchor = anchors[0]
    details = anchor["details"]
    expected_event = ANCHORS[0] if row["version"] == 1 else ANCHORS[1]
    if (anchor["event"] != expected_event or bytes(anchor["content_hash"] or b"") != form.digest()
            or details.get("public_key") != row["public_key"]
            or details.get("signature") != bytes(row["signature"]).hex()):
        return f"its anchoring ledger entry (seq {anchor['seq']}) does not match the signed receipt"
    return None


def _ending_problem(ending: Mapping[str, Any], events: list[Mapping[str, Any]]) -> str | None:
    if not events:
        return f"{ending['status']} without a ledger entry: the ending was written outside the chain"
    if len(events) > 1:
        seqs = ", ".join(str(e["seq"]) for e in events)
        return f"ended by {len(events)} ledger entries (seq {seqs}): one was appended by hand"
    details = events[0]["details"]
    if (events[0]["event"] != f"convention.{ending['status']}" or details.get("reason") != ending["reason"]
            or details.get("head_commit") != ending["head_commit"]):
        return f"its ending does not match its ledger entry (seq {events[0]['seq']})"
    return None


def _findings(trusted: str | None, registered: str | None, receipts: list[dict[str, Any]],
              events: list[dict[str, Any]], endings: list[dict[str, Any]]) -> list[ReceiptFinding]:
    found: list[ReceiptFinding] = []
    if registered is not None and trusted is not None and registered != trusted:
        found.append(ReceiptFinding(f"the signing key registered in the database ({_short(registered)}) is not this "
                                    f"installation's key ({_short(trusted)}): it was replaced in the database"))
    if receipts and trusted is None:
        found.append(ReceiptFinding("no trusted key to check receipt signatures against: no installation key file "
                                    "(PYMEM_SIGNING_KEY) and no public key given"))
    anchors: dict[tuple[Any, ...], list[Mapping[str, Any]]] = {}
    ends: dict[tuple[Any, ...], list[Mapping[str, Any]]] = {}
    for event in events:
        details = event["details"]
        receipt_key = (event["tenant_id"], details.get("receipt"))
        if event["event"] in ANCHORS:
            anchors.setdefault((*receipt_key, details.get("version")), []).append(event)
        else:
            ends.setdefault(receipt_key, []).append(event)
    versions = {(r["tenant_id"], r["id"], r["version"]) for r in receipts}
    for row in receipts:
        key = (row["tenant_id"], row["id"], row["version"])
        problem = _check_version(row, trusted, anchors.get(key, []))
        if problem is not None:
            seq = next((a["seq"] for a in anchors.get(key, [])), None)
            found.append(ReceiptFinding(problem, row["tenant_id"], row["id"], row["version"], seq))
    for key, listed in sorted(anchors.items(), key=lambda kv: kv[1][0]["seq"]):
        if key not in versions:
            tenant, receipt, version = key
            found.append(ReceiptFinding(
                f"ledger entry seq {listed[0]['seq']} anchors a receipt version that does not exist "
                "(deleted, or the anchor was appended by hand)", tenant, receipt, version, listed[0]["seq"]))
    ended = {(e["tenant_id"], e["receipt_id"]) for e in endings}
    for ending in endings:
        ending_key = (ending["tenant_id"], ending["receipt_id"])
        problem = _ending_problem(ending, ends.get(ending_key, []))
        if problem is not None:
            found.append(ReceiptFinding(problem, ending["tenant_id"], ending["receipt_id"]))
    for ends_key, listed in sorted(ends.items(), key=lambda kv: kv[1][0]["seq"]):
        if ends_key not in ended:
            found.append(ReceiptFinding(f"ledger entry seq {listed[0]['seq']} ends a rule that has no ending row "
                                        "(deleted, or appended by hand)", ends_key[0], ends_key[1], None,
                                        listed[0]["seq"]))
    return found


def audit_receipts(conn: psycopg.Connection, tenant: str | None = None,
                   trusted_key: str | Callable[[], str | None] | None = None) -> ReceiptAudit:
    """Check every receipt version and ending of `tenant` (with a tenant context, on an app
    connection) or of every tenant (on an administrative connection). `trusted_key` is the
    installation's public key (hex), or a callable that returns it, asked only when there is a
    receipt or a registered key to compare it with."""
    with db.own_transaction(conn, Context(tenant=tenant) if tenant else None), conn.cursor(row_factory=dict_row) as cur:
        cur.execute(queries.query("registered_signing_key"))
        found = cur.fetchone()
        registered = found["public_key"] if found else None
        receipts = cur.execute(queries.query("receipts_to_audit"), (tenant, tenant)).fetchall()
        events = cur.execute(queries.query("convention_events_to_audit"), (tenant, tenant)).fetchall()
        endings = cur.execute(queries.query("convention_endings_to_audit"), (tenant, tenant)).fetchall()
    if not (receipts or endings or events or registered):
        return ReceiptAudit()
    trusted = trusted_key() if callable(trusted_key) else trusted_key
    return ReceiptAudit(checked=len(receipts), endings=len(endings), trusted_key=trusted, registered_key=registered,
                        findings=_findings(trusted, registered, receipts, events, endings))

