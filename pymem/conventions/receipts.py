"""Convention receipts: a reviewer's correction as a signed, commit-pinned, chained rule.

`file_review_correction` files, in one transaction:

1. a feedback lesson (pymem.lessons: through the write gate, merged into its near-duplicate if
   there is one), tagged `convention` and with the subject, so the next task touching the subject
   is shown it;
2. a receipt version binding the rule text's hash, the subject (a path or glob), the optional
   symbol, the base commit and the assertion, signed with the installation's Ed25519 key (the
   one that signs ledger checkpoints), whose public key the database must have registered: only
   the administrative connection registers it (pymem.conventions.signing_key; the first filing
   does it through the store's administrative connection when it has one, as the embedded
   server's store does; otherwise `pymem db register-key`).
   The database chains it as convention.filed, or convention.confirmed when the same correction
   (same scope, filer, subject, symbol and rule text) was filed before: then the receipt keeps
   its id and goes up one version, pinned to the newer commit and assertion.

A correction that contradicts a rule in force (pymem.conventions.rules) is refused with
ConventionConflict naming both receipt ids, and nothing is filed. Concurrent filers serialize on
the tenant's conventions filing row (pymem.lock_for_filing: a row only the tenant's own context
can lock, with a timeout that ends in LockTimeout), so two contradicting corrections cannot both
get in.

A rule is in force only while its latest receipt version's signature verifies against the key registered in
the database (checked here, on every read: Postgres has no Ed25519). A receipt a login inserted around this
module, unsigned or signed with a key of its own, is never listed as active and never blocks a genuine
correction; `pymem verify` names it. Rules end by appended rows and events, never by deletes:
`retire_convention` by hand (convention.retired), `check_conventions` when a rule's symbol no longer resolves
at HEAD of a git repository (convention.expired). `active_conventions` returns the rules in force and their
ruleset hash.
"""

from __future__ import annotations

import datetime as _dt
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from .. import queries
from ..admission.policy import AdmissionPolicy
from ..embedder import Embedder
from ..errors import AccessDenied, ConventionConflict, InvalidArguments, NotFound
from ..integrity.receipt_audit import ReceiptForm, rule_sha256
from ..integrity.signing import load_or_create_key, verify_signature
from ..lessons.filing import FiledLesson, check_lesson, check_lesson_tags, lock_for_filing, screen_lesson, write_lesson
from ..storage.validate import check_id
from ..vocabulary import MAX_REFUSAL_REASON, is_plain_text
from .repository import head_commit, symbol_resolves
from .rules import (
    check_assertion,
    check_commit,
    check_rule_text,
    check_subject,
    check_symbol,
    contradicts,
    demand,
    ruleset_hash,
)
from .signing_key import ensure_registered

if TYPE_CHECKING:  # pragma: no cover
    from ..storage.memories import Memories

__all__ = ["Convention", "FiledCorrection", "ActiveConventions", "ConventionCheck", "file_review_correction",
           "active_conventions", "retire_convention", "check_conventions", "CONVENTION_TAG", "DEFAULT_ORIGIN",
           "RETIRE_REASON"]

#: Every feedback lesson filed with a receipt carries this tag (and the subject as another).
CONVENTION_TAG = "convention"
#: A reviewer's correction is the user's word.
DEFAULT_ORIGIN = "user_asserted"
#: What the chain records as the reason when a rule is retired without one.
RETIRE_REASON = "retired by hand"


@dataclass(frozen=True)
class Convention:
    """A receipt at its latest version, as pymem.conventions reads it (hashes and the signature
    as hex)."""

    tenant_id: str
    id: str
    version: int
    scope: dict[str, str]
    source_adapter: str | None
    subject: str
    subject_symbol: str | None
    rule_text: str
    rule_sha256: str
    base_commit: str
    assertion: str
    lesson_id: str
    public_key: str
    signature: str
    receipt_sha256: str
    filed_at: _dt.datetime
    status: str
    ended_reason: str | None
    ended_at_commit: str | None
    ended_at: _dt.datetime | None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Convention:
        values = dict(row)
        for name in ("rule_sha256", "signature", "receipt_sha256"):
            values[name] = bytes(values[name]).hex()
        return cls(**values)

    def demand(self) -> dict[str, Any]:
        """What the rule demands (the fields the ruleset hash covers)."""
        return demand(self.__dict__)

    def to_json(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        for name in ("filed_at", "ended_at"):
            out[name] = out[name].isoformat() if out[name] else None
        return out


@dataclass(frozen=True)
class FiledCorrection:
    """What filing a correction did: the receipt version it filed and the lesson it filed (or
    confirmed) with it."""

    receipt: Convention
    lesson: FiledLesson

    @property
    def confirmed(self) -> bool:
        """True when the same correction was on file already (the receipt went up a version)."""
        return self.receipt.version > 1

    def to_json(self) -> dict[str, Any]:
        return {"receipt": self.receipt.to_json(), "lesson": self.lesson.to_json(), "confirmed": self.confirmed}


@dataclass(frozen=True)
class ActiveConventions:
    """The rules in force in this context, and the hash of what they demand."""

    rules: list[Convention]
    ruleset_hash: str

    def to_json(self) -> dict[str, Any]:
        return {"ruleset_hash": self.ruleset_hash, "rules": [r.to_json() for r in self.rules]}


@dataclass(frozen=True)
class ConventionCheck:
    """A check against a repository: the rules with a symbol that were checked, those that expired,
    and those that no longer resolve but were filed by another adapter (only it or the operator
    may end them)."""

    repo: str
    head_commit: str
    checked: int
    expired: list[Convention] = field(default_factory=list)
    not_ended: list[Convention] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"repo": self.repo, "head_commit": self.head_commit, "checked": self.checked,
                "expired": [r.to_json() for r in self.expired], "not_ended": [r.to_json() for r in self.not_ended]}


def _signed(rule: Convention, registered: str | None) -> bool:
    """Whether the receipt version is what the registered installation key signed."""
    if registered is None or rule.public_key != registered or rule.rule_sha256 != rule_sha256(rule.rule_text).hex():
        return False
    form = ReceiptForm(tenant=rule.tenant_id, id=rule.id, version=rule.version, scope=rule.scope,
                       source_adapter=rule.source_adapter, subject=rule.subject, subject_symbol=rule.subject_symbol,
                       rule_sha256=rule.rule_sha256, base_commit=rule.base_commit, assertion=rule.assertion,
                       lesson_id=rule.lesson_id, public_key=rule.public_key)
    signed = form.signed_bytes()
    return (verify_signature(registered, bytes.fromhex(rule.signature), signed)
            and form.digest().hex() == rule.receipt_sha256)


def _rules_in_force(conn: psycopg.Connection, tenant: str) -> list[Convention]:
    """The rules in force: active at their latest version, and signed by the registered key."""
    with conn.cursor(row_factory=dict_row) as cur:
        found = cur.execute(queries.query("registered_signing_key")).fetchone()
        cur.execute(queries.query("conventions_in_force"), (tenant,))
        rules = [Convention.from_row(r) for r in cur.fetchall()]
    registered = found["public_key"] if found else None
    return [r for r in rules if _signed(r, registered)]


def _convention(conn: psycopg.Connection, tenant: str, receipt_id: str) -> Convention | None:
    with conn.cursor(row_factory=dict_row) as cur:
        cur.execute(queries.query("convention_by_id"), (tenant, receipt_id))
        row = cur.fetchone()
    return Convention.from_row(row) if row else None


def _same_correction(rule: Convention, scope: Mapping[str, str], adapter: str | None, subject: str,
                     symbol: str | None, rule_hash: str) -> bool:
    return (rule.scope == dict(scope) and rule.source_adapter == adapter and rule.subject == subject
            and rule.subject_symbol == symbol and rule.rule_sha256 == rule_hash)


def file_review_correction(memories: Memories, rule_text: str, subject: str, base_commit: str, assertion: str,
                           subject_symbol: str | None = None, *, tags: Iterable[str] = (),
                           confidence: float | None = None, source_task: str | None = None,
                           origin: str = DEFAULT_ORIGIN, policy: AdmissionPolicy | None = None,
                           embedder: Embedder | None = None, conn: psycopg.Connection | None = None) -> FiledCorrection:
    """File a review correction as a feedback lesson and a signed receipt (see the module
    docstring). `rule_text`: the rule in one line; `subject`: the path or glob it applies to;
    `base_commit`: the full SHA it was stated against; `assertion`: the command that checks it
    (stored and signed, never run); `subject_symbol`: the symbol it is about (the rule expires
    when it no longer resolves). Raises InvalidArguments (nothing filed), MemoryAdmissionError
    (the lesson was refused, and audited), ConventionConflict (it contradicts a rule in force)."""
    rule_text = check_rule_text(rule_text)
    subject = check_subject(subject)
    base_commit = check_commit(base_commit)
    assertion = check_assertion(assertion)
    subject_symbol = check_symbol(subject_symbol)
    lesson_tags = check_lesson_tags([CONVENTION_TAG, subject, *check_lesson_tags(tags, required=False)])
    # the feedback lesson's own fields, checked as any lesson's are (nothing is filed otherwise)
    _, _, _, confidence, source_task = check_lesson(rule_text, lesson_tags, "feedback", confidence, source_task)
    ctx = memories.ctx
    key = load_or_create_key(memories.store.settings.signing_key_path)
    ensure_registered(memories.store, ctx, key.public_hex, conn=conn)
    screened = screen_lesson(
        memories, rule_text, lesson_tags, "feedback", confidence, source_task, origin=origin,
        extra={"convention": {"subject": subject, "subject_symbol": subject_symbol, "base_commit": base_commit,
                              "assertion": assertion}},
        policy=policy, embedder=embedder, conn=conn)
    rule_hash = rule_sha256(rule_text).hex()
    with memories.store.transaction(ctx, conn) as c:
        lock_for_filing(c, "conventions", memories.store.settings.filing_lock_timeout_ms)
        in_force = _rules_in_force(c, ctx.tenant)
        same = next((r for r in in_force if _same_correction(r, ctx.scope, ctx.adapter, subject, subject_symbol,
                                                             rule_hash)), None)
        receipt_id = same.id if same is not None else f"cv-{uuid.uuid4().hex}"
        for rule in in_force:
            if rule is not same and contradicts(rule.subject, rule.subject_symbol, rule.rule_text, subject,
                                                subject_symbol, rule_text):
                raise ConventionConflict(
                    f"correction {receipt_id} contradicts receipt {rule.id} (version {rule.version}), in force for "
                    f"{subject}{' ' + subject_symbol if subject_symbol else ''}; nothing was filed: retire "
                    f"{rule.id} first if it no longer holds", receipt_id=receipt_id, conflicting_id=rule.id)
        lesson = write_lesson(memories, c, screened)
        form = ReceiptForm(tenant=ctx.tenant, id=receipt_id, version=same.version + 1 if same else 1,
                           scope=dict(ctx.scope), source_adapter=ctx.adapter, subject=subject,
                           subject_symbol=subject_symbol, rule_sha256=rule_hash, base_commit=base_commit,
                           assertion=assertion, lesson_id=lesson.id, public_key=key.public_hex)
        signed = form.signed_bytes()
        c.execute(queries.query("insert_receipt"),
                  (ctx.tenant, form.id, form.version, Jsonb(dict(ctx.scope)), subject, subject_symbol, rule_text,
                   bytes.fromhex(rule_hash), base_commit, assertion, lesson.id, key.public_hex, key.sign(signed),
                   form.digest()))
        filed = _convention(c, ctx.tenant, receipt_id)
    assert filed is not None  # the row this transaction just wrote
    return FiledCorrection(receipt=filed, lesson=lesson)


def active_conventions(memories: Memories, *, conn: psycopg.Connection | None = None) -> ActiveConventions:
    """The rules in force in this context (by subject, then id) and their ruleset hash."""
    with memories.store.transaction(memories.ctx, conn) as c:
        rules = _rules_in_force(c, memories.ctx.tenant)
    return ActiveConventions(rules=rules, ruleset_hash=ruleset_hash(r.__dict__ for r in rules))


def _check_reason(reason: Any) -> str:
    if not isinstance(reason, str) or not reason.strip() or len(reason) > MAX_REFUSAL_REASON \
            or not is_plain_text(reason):
        raise InvalidArguments(f"a reason must be 1 to {MAX_REFUSAL_REASON} characters without control or format "
                               "characters")
    return reason.strip()


def _end(c: psycopg.Connection, tenant: str, receipt_id: str, status: str, reason: str,
         commit: str | None) -> None:
    c.execute(queries.query("end_convention"), (tenant, receipt_id, status, reason, commit))


def retire_convention(memories: Memories, receipt_id: str, reason: str = RETIRE_REASON, *,
                      conn: psycopg.Connection | None = None) -> Convention:
    """Take a rule out of force (a convention.retired event; the receipt stays). Only the adapter
    that filed it, or the operator, may. NotFound when no such rule is in force here."""
    receipt_id = check_id(receipt_id, "receipt id")
    reason = _check_reason(reason)
    ctx = memories.ctx
    with memories.store.transaction(ctx, conn) as c:
        lock_for_filing(c, "conventions", memories.store.settings.filing_lock_timeout_ms)
        rule = _convention(c, ctx.tenant, receipt_id)
        if rule is None or rule.status != "active":
            state = "no such receipt" if rule is None else f"it is already {rule.status}"
            raise NotFound(f"receipt {receipt_id[:100]!r} is not in force in this context ({state})")
        _end(c, ctx.tenant, receipt_id, "retired", reason, None)
        ended = _convention(c, ctx.tenant, receipt_id)
    assert ended is not None
    return ended


def check_conventions(memories: Memories, repo: Path | str, *,
                      conn: psycopg.Connection | None = None) -> ConventionCheck:
    """Expire every rule in force whose symbol no longer resolves at HEAD of the git repository
    `repo` (pymem.conventions.repository), each with a convention.expired event naming the
    commit. Rules without a symbol are not checked."""
    repo_path = Path(repo).expanduser()
    head = head_commit(repo_path)
    ctx = memories.ctx
    expired: list[Convention] = []
    not_ended: list[Convention] = []
    with memories.store.transaction(ctx, conn) as c:
        lock_for_filing(c, "conventions", memories.store.settings.filing_lock_timeout_ms)
        rules = [r for r in _rules_in_force(c, ctx.tenant) if r.subject_symbol is not None]
        for rule in rules:
            if rule.subject_symbol is not None and symbol_resolves(repo_path, head, rule.subject, rule.subject_symbol):
                continue
            reason = f"symbol {rule.subject_symbol} no longer resolves in {rule.subject} at HEAD {head[:12]}"
            try:
                with memories.store.transaction(ctx, c, savepoint=True) as inner:
                    _end(inner, ctx.tenant, rule.id, "expired", reason[:MAX_REFUSAL_REASON], head)
            except AccessDenied:
                not_ended.append(rule)
                continue
            ended = _convention(c, ctx.tenant, rule.id)
            assert ended is not None
            expired.append(ended)
    return ConventionCheck(repo=str(repo_path), head_commit=head, checked=len(rules), expired=expired,
                           not_ended=not_ended)
