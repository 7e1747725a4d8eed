"""The actions: each one library verb in the viewer's context, each a ledger event.

supersede (memory.insert + memory.supersede), erase (memory.erase + erasure.recorded), release
and reject a held note (quarantine.released / quarantine.rejected) are the verbs of
pymem.delivery.supersession and pymem.admission.quarantine; their arguments are checked before
anything is written, so bad input changes nothing. "Verify now" reads the chain and writes nothing.
An action returns the page to go to and the notice to show there; an operator's token only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..admission.provenance import Provenance, parse_origin
from ..admission.quarantine import get_quarantined, reject_quarantined, release_quarantined
from ..delivery.supersession import erase, supersede
from ..errors import AccessDenied, InvalidArguments
from ..integrity.verify import verify_store
from ..vocabulary import HOT_TAG
from .html import href
from .identity import Viewer
from .site import Site

__all__ = ["ACTIONS", "Action"]

Action = Callable[[Site, Viewer, Mapping[str, Any]], tuple[str, str]]


def _text(form: Mapping[str, Any], name: str) -> str:
    value = form.get(name)
    if not isinstance(value, str) or not value.strip():
        raise InvalidArguments(f"{name} is required")
    return value


def _operator(viewer: Viewer) -> None:
    if not viewer.operator:
        raise AccessDenied("only an operator's token may act; an auditor's reads")


def do_supersede(site: Site, viewer: Viewer, form: Mapping[str, Any]) -> tuple[str, str]:
    _operator(viewer)
    old_id, content = _text(form, "id"), _text(form, "content")
    provenance = Provenance(origin=parse_origin(form.get("origin") or "operator"),
                            source=f"inspector:{viewer.ctx.actor}")
    mem = site.store.bind(viewer.ctx)
    record: dict[str, Any] = {"content": content}
    hot, was_hot = bool(form.get("hot")), bool(form.get("was_hot"))
    if hot != was_hot:  # the successor keeps the old tags unless the hot box changed
        old = mem.get_row(old_id)
        tags = [t for t in (old["tags"] or []) if t != HOT_TAG] if old is not None else []
        record["tags"] = [*tags, HOT_TAG] if hot else tags
    out = supersede(mem, old_id, record, provenance, embedder=site.store.text_embedder(site.embedder))
    marked = {True: ", marked hot", False: ", no longer hot"}.get(hot) if hot != was_hot else ""
    return href(site.base, "memories", str(out["id"])), f"{out['id']} now supersedes {old_id}{marked}"


def do_erase(site: Site, viewer: Viewer, form: Mapping[str, Any]) -> tuple[str, str]:
    _operator(viewer)
    memory_id, reason = _text(form, "id"), _text(form, "reason")
    seq = erase(site.store.bind(viewer.ctx), memory_id, reason)
    return href(site.base, "memories", memory_id), f"erased {memory_id}; the reason is at ledger seq {seq}"


def _decide(how: str) -> Action:
    def decide(site: Site, viewer: Viewer, form: Mapping[str, Any]) -> tuple[str, str]:
        _operator(viewer)
        note_id, reason = _text(form, "id"), _text(form, "reason")
        mem = site.store.bind(viewer.ctx)
        note = get_quarantined(mem, note_id)
        # The database refuses a context acting as an adapter (every agent's); the inspector also
        # refuses the note's own writer, whatever token they hold: nobody vouches for themselves.
        if how == "release" and note is not None and note.held_by == viewer.ctx.actor:
            raise AccessDenied("a note's writer cannot release it: another operator must")
        seq = (release_quarantined if how == "release" else reject_quarantined)(mem, note_id, reason)
        done = "released" if how == "release" else "rejected"
        return href(site.base, "quarantine"), f"{done} {note_id} (ledger seq {seq})"
    return decide


def do_verify(site: Site, viewer: Viewer, form: Mapping[str, Any]) -> tuple[str, str]:
    _operator(viewer)
    if viewer.ctx.scope or viewer.ctx.read_adapters is not None:
        raise AccessDenied("verifying the tenant's chain needs a whole-tenant token (no scope, no read allow-list)")
    tenant = viewer.ctx.tenant
    report = verify_store(site.store, tenant)
    site.last_verify[tenant] = (viewer.ctx.actor or "?", report)
    clean = all(t.problem is None for t in report.tenants)
    return href(site.base, "integrity"), "the chain verifies" if clean else "the chain does NOT verify: see below"


ACTIONS: dict[str, Action] = {"supersede": do_supersede, "erase": do_erase, "release": _decide("release"),
                              "reject": _decide("reject"), "verify": do_verify}
