"""The review pages: the quarantine (held notes, and an operator's release or rejection), the
refusals (never content) and the chain's integrity (the last verification, the checkpoints)."""

from __future__ import annotations

from collections.abc import Mapping

from ..admission.quarantine import STATUSES, list_quarantined
from ..errors import InvalidArguments
from ..integrity.audit import refusals
from ..integrity.checkpoints import Checkpoint, open_sink
from .html import definition, esc, field, form, pre, select, table
from .identity import Viewer
from .site import Site, memories_of, one

__all__ = ["quarantine_page", "refusals_page", "integrity_page"]


def quarantine_page(site: Site, viewer: Viewer, path: Mapping[str, str], q: Mapping[str, str]) -> tuple[str, str]:
    status = one(q, "status") or "held"
    if status not in (*STATUSES, "all"):
        raise InvalidArguments(f"status must be one of {', '.join((*STATUSES, 'all'))}")
    notes = list_quarantined(memories_of(site, viewer), status=None if status == "all" else status, limit=1000)
    filters = form(f"{site.base}/quarantine", [select("status", "Status", [*STATUSES, "all"], status, blank=None)],
                   "Show", viewer, method="get", name="status", cls="filters")
    body: str = filters
    for n in notes:
        facts = definition([("status", n.status), ("held", n.held_at), ("held by", n.held_by),
                            ("adapter", n.source_adapter or "(operator)"), ("origin", n.origin), ("reason", n.reason),
                            ("signature", n.signature), ("score", f"{n.score:.3f}" if n.score is not None else None),
                            ("decided", n.decided_at), ("decided by", n.decided_by),
                            ("decision reason", n.decision_reason)])
        body += f'<section aria-label="note {esc(n.id)}"><h2>Note {esc(n.id)}</h2>{facts}'
        if viewer.operator:
            body += pre(n.content) if n.content is not None else "<p class=empty>(content gone)</p>"
            if n.status == "held" and n.held_by == viewer.ctx.actor:
                body += "<p>You wrote this note: another operator releases or rejects it.</p>"
            elif n.status == "held":
                for verb, label in (("release", "Release"), ("reject", "Reject")):
                    body += form(f"{site.base}/actions/{verb}", [
                        field("reason", "Reason (kept in the ledger)", required=True, ident=f"{verb}-{n.id}")],
                        label, viewer, hidden={"id": n.id}, name=f"{verb} {n.id}")
        body += "</section>"
    if not notes:
        body += "<p class=empty>no note</p>"
    return "Quarantine", body


def refusals_page(site: Site, viewer: Viewer, path: Mapping[str, str], q: Mapping[str, str]) -> tuple[str, str]:
    rows = refusals(memories_of(site, viewer), limit=500)
    return "Refusals", table(([r.seq, r.occurred_at, r.actor, r.adapter, r.origin, r.tool, r.reason, r.signature,
                               f"{r.score:.3f}" if r.score is not None else None, r.args_digest] for r in rows),
                             ["seq", "at", "actor", "adapter", "origin", "tool", "reason", "signature", "score",
                              "digest of the arguments"], caption="Refused writes (never their content)",
                             empty="no refusal")


def _checkpoints(site: Site, tenant: str) -> list[Checkpoint]:
    if not site.checkpoints:
        return []
    return [c for c in open_sink(site.checkpoints).read() if c.tenant == tenant][-20:]


def integrity_page(site: Site, viewer: Viewer, path: Mapping[str, str], q: Mapping[str, str]) -> tuple[str, str]:
    tenant = viewer.ctx.tenant
    last = site.last_verify.get(tenant)
    if last is None:
        body = "<p class=empty>not verified since this server started</p>"
    else:
        who, report = last
        rows = [(t.tenant, "clean" if t.problem is None else t.problem, t.entries, t.rows_checked, t.head_seq,
                 t.head_hash, t.bad_seq, t.bad_memory_id) for t in report.tenants]
        body = f"<p>Last verified by {esc(who)} in {report.seconds:.3f} s.</p>" + table(
            rows, ["tenant", "result", "ledger entries", "rows re-hashed", "head seq", "head hash", "bad seq",
                   "bad memory"], caption="Last verification")
    if viewer.operator:
        body += form(f"{site.base}/actions/verify", [], "Verify now", viewer, name="verify")
    if site.checkpoints:
        body += table(([c.seq, c.chain_hash, c.head_at, c.taken_at, "valid" if c.signature_ok() else "INVALID"]
                       for c in _checkpoints(site, tenant)),
                      ["seq", "chain hash", "head at", "taken at", "signature"], caption="Signed checkpoints",
                      empty="no checkpoint of this tenant")
    else:
        body += "<p class=empty>no checkpoints file configured (see <code>pymem anchor</code>)</p>"
    return "Integrity", body
