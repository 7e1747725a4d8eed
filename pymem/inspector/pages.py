"""The pages: each a function of the open store, the viewer and the query, returning (title, body).

They call the library's read verbs in the viewer's context, so row-level security decides what
they show; an auditor's pages are built from the audit views alone (ids, events, hashes) and
name no content. Nothing here writes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..admission.quarantine import STATUSES, QuarantinedNote, list_quarantined
from ..delivery.injections import session_injections
from ..delivery.inspector import InspectedMemory, inspect_memories, inspect_memory
from ..delivery.sessions import list_sessions, recall_session
from ..delivery.tiers import Tier, tier_of
from ..embedder import Embedder
from ..errors import AccessDenied, InvalidArguments, NotFound
from ..integrity.audit import history, refusals
from ..integrity.checkpoints import Checkpoint, open_sink
from ..integrity.reports import VerifyReport
from ..storage.memories import Memories
from ..vocabulary import HOT_TAG, ORIGINS
from .blocks import Rerendered, rerender
from .html import Html, definition, esc, field, form, href, link, pre, select, table, when
from .identity import Viewer

if TYPE_CHECKING:  # pragma: no cover
    from ..storage.store import Store

__all__ = ["Site", "Page", "PAGES", "MEMORY_STATES"]

#: What the memories page lists: live ones, live and superseded, superseded only, the held notes.
MEMORY_STATES = ("live", "with superseded", "superseded only", "quarantined")
#: Most memories one listing reads before filtering.
LIST_LIMIT = 1000


@dataclass
class Site:
    """What every page needs: the store, the base path, the checkpoints file, the last verification
    of each tenant (kept by this process), the embedder of superseding texts (None: the store's)."""

    store: Store
    base: str
    checkpoints: str | None = None
    last_verify: dict[str, tuple[str, VerifyReport]] = dataclasses.field(default_factory=dict)
    embedder: Embedder | None = None


Page = Callable[[Site, Viewer, Mapping[str, str], Mapping[str, str]], tuple[str, str]]


def _memories(site: Site, viewer: Viewer) -> Memories:
    return site.store.bind(viewer.ctx)


def _operator(viewer: Viewer, what: str) -> None:
    if not viewer.operator:
        raise AccessDenied(f"{what} shows memory content: an operator's token only (an auditor reads the audit views)")


def _one(query: Mapping[str, str], name: str) -> str:
    return (query.get(name) or "").strip()


def _state_mark(superseded_by: str | None, erased: bool) -> Html:
    if erased:
        return Html('<span class="mark erased">erased</span>')
    if superseded_by:
        return Html(f'<span class="mark superseded">superseded by {esc(superseded_by)}</span>')
    return Html("live")


# -- memories ---------------------------------------------------------------------------------------

def _matches(m: InspectedMemory, q: Mapping[str, str]) -> bool:
    text = _one(q, "text").casefold()
    adapter = _one(q, "adapter")
    return ((not text or text in (m.text or "").casefold())
            and (not _one(q, "kind") or m.kind == _one(q, "kind"))
            and (not _one(q, "tier") or m.tier == _one(q, "tier"))
            and (not _one(q, "origin") or m.origin == _one(q, "origin"))
            and (not adapter or (m.source_adapter or "(operator)") == adapter)
            and (_one(q, "state") != "superseded only" or m.superseded_by is not None))


def memories_page(site: Site, viewer: Viewer, path: Mapping[str, str], q: Mapping[str, str]) -> tuple[str, str]:
    _operator(viewer, "the memories list")
    state = _one(q, "state") or "live"
    for name, allowed in (("state", MEMORY_STATES), ("tier", [t.value for t in Tier]), ("origin", ORIGINS)):
        if _one(q, name) and _one(q, name) not in allowed:
            raise InvalidArguments(f"{name} must be one of {', '.join(allowed)}")
    if state == "quarantined":
        rows = [_as_inspected(n) for n in list_quarantined(_memories(site, viewer), limit=1000)]
        rows = [m for m in rows if not _one(q, "session") or m.session_id == _one(q, "session")]
        rows = [m for m in rows if not _one(q, "hot") or m.hot]
    else:
        rows = inspect_memories(_memories(site, viewer), session_id=_one(q, "session") or None,
                                hot_only=bool(_one(q, "hot")), include_superseded=state != "live", limit=LIST_LIMIT)
    found = [m for m in rows if _matches(m, q)]
    filters = form(f"{site.base}/memories", [
        field("text", "Text contains", value=_one(q, "text")),
        field("kind", "Kind", value=_one(q, "kind")),
        select("tier", "Tier", [t.value for t in Tier], _one(q, "tier")),
        select("origin", "Origin", ORIGINS, _one(q, "origin")),
        field("adapter", "Adapter", value=_one(q, "adapter")),
        field("session", "Session", value=_one(q, "session")),
        field("hot", "Hot only", value=_one(q, "hot"), kind="checkbox"),
        select("state", "Show", MEMORY_STATES, state, blank=None),
    ], "Filter", viewer, method="get", name="filters", cls="filters")
    held = state == "quarantined"
    listed = table(([link(href(site.base, "quarantine") if held else href(site.base, "memories", m.id), m.id),
                     m.kind, m.tier, m.origin, m.source_adapter or "(operator)", m.session_id, "hot" if m.hot else "",
                     "held" if held else _state_mark(m.superseded_by, False), when(m.created_at), _short(m.text)]
                    for m in found),
                   ["id", "kind", "tier", "origin", "adapter", "session", "hot", "state", "created", "text"],
                   caption=f"{len(found)} memories", empty="no memory matches")
    other = (f"<p>Held notes are decided on the {link(site.base + '/quarantine', 'quarantine')} page; an erased "
             "memory's ledger history stays on its own page (its content is gone).</p>")
    return "Memories", filters + listed + other


def _as_inspected(n: QuarantinedNote) -> InspectedMemory:
    """A held note in the shape of the memories list (it is not a memory until released)."""
    session = n.provenance.get("session_id") if isinstance(n.provenance, dict) else None
    return InspectedMemory(id=n.id, kind=n.kind, text=n.content, origin=n.origin,
                           tier=tier_of(n.origin, n.provenance, source_adapter=n.source_adapter).value,
                           session_id=session if isinstance(session, str) else None, hot=HOT_TAG in n.tags,
                           source_adapter=n.source_adapter, confidence=n.confidence, created_at=n.held_at,
                           valid_from=n.held_at, invalidated_at=None, superseded_by=None, revision=0,
                           provenance=n.provenance)


def _short(text: str | None, width: int = 80) -> str | None:
    if text is None:
        return None
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _chain(mem: Memories, memory_id: str) -> list[tuple[str, Any, Any]]:
    """(id, superseded_by, invalidated_at) from the first predecessor to the last successor."""
    back: list[str] = []
    seen = {memory_id}
    current = mem.get(memory_id)
    while current is not None and isinstance(current.get("supersedes"), str) and len(back) < 50:
        prev = current["supersedes"]
        if prev in seen:
            break
        seen.add(prev)
        back.insert(0, prev)
        current = mem.get(prev)
    chain: list[tuple[str, Any, Any]] = []
    ids = [*back, memory_id]
    while len(chain) < 100:
        mid = ids[len(chain)] if len(chain) < len(ids) else None
        if mid is None:
            break
        row = mem.get_row(mid)
        if row is None:
            chain.append((mid, None, None))
            break
        chain.append((mid, row["superseded_by"], row["invalidated_at"]))
        nxt = row["superseded_by"]
        if nxt and nxt not in ids:
            ids.append(nxt)
    return chain


def memory_page(site: Site, viewer: Viewer, path: Mapping[str, str], q: Mapping[str, str]) -> tuple[str, str]:
    memory_id = path["memory_id"]
    mem = _memories(site, viewer)
    events = history(mem, memory_id)
    if not viewer.operator:
        if not events:
            raise NotFound(f"no memory {memory_id[:100]!r} in this context")
        return f"Memory {memory_id}", _history_table(events) + _injections_of(site, mem, memory_id)
    try:
        m = inspect_memory(mem, memory_id)
    except NotFound:
        if not events or events[-1].erased_at is None:
            raise
        body = (definition([("state", _state_mark(None, True)), ("erased at", events[-1].erased_at),
                            ("kind", events[-1].kind), ("origin", events[-1].origin)])
                + "<p>Its content, record and embedding are gone; its hash stays in the chain.</p>"
                + _history_table(events))
        return f"Memory {memory_id}", body
    record = mem.get(memory_id)
    facts = definition([("state", _state_mark(m.superseded_by, False)), ("kind", m.kind), ("tier", m.tier),
                        ("origin", m.origin), ("adapter", m.source_adapter or "(operator)"),
                        ("session", link(href(site.base, "sessions", m.session_id), m.session_id)
                         if m.session_id else None),
                        ("hot", "yes" if m.hot else "no"), ("confidence", m.confidence), ("revision", m.revision),
                        ("created", m.created_at), ("valid from", m.valid_from),
                        ("superseded at", m.invalidated_at)])
    here = Html(f"<b>{esc(memory_id)}</b>")
    chain: str = table(([link(href(site.base, "memories", cid), cid) if cid != memory_id else here, by, at]
                        for cid, by, at in _chain(mem, memory_id)),
                       ["memory", "superseded by", "superseded at"], caption="Supersession chain")
    chain += Html("<p>A recall <code>as_of</code> a time before a memory was superseded still finds it.</p>")
    body = (facts + "<h2>Content</h2>" + pre(m.text or "") + "<h2>Record</h2>" + pre(record)
            + "<h2>Provenance</h2>" + pre(m.provenance or {}) + chain + _history_table(events)
            + _injections_of(site, mem, memory_id, m))
    if m.superseded_by is None:
        body += "<h2>Actions</h2>" + _memory_actions(site, viewer, m)
    return f"Memory {memory_id}", body


def _memory_actions(site: Site, viewer: Viewer, m: InspectedMemory) -> str:
    memory_id = m.id
    # Marking a memory hot (or no longer hot) is a supersession too: the operator writes the
    # successor, with the origin they vouch for, rather than re-tagging an agent's row as their own.
    supersede = form(f"{site.base}/actions/supersede", [
        field("content", "New text", value=m.text or "", textarea=True, required=True, ident="supersede-content"),
        select("origin", "Its origin", ORIGINS, "operator", blank=None, ident="supersede-origin"),
        field("hot", "Hot (delivered on every turn)", value="1" if m.hot else "", kind="checkbox",
              ident="supersede-hot"),
    ], "Supersede", viewer, hidden={"id": memory_id, "was_hot": "1" if m.hot else ""}, name="supersede")
    erase = form(f"{site.base}/actions/erase", [
        field("reason", "Reason (kept in the ledger)", required=True, ident="erase-reason"),
    ], "Erase", viewer, hidden={"id": memory_id}, name="erase")
    return supersede + " " + erase


def _history_table(events: list[Any]) -> str:
    return table(([e.seq, e.event, e.occurred_at, e.actor, e.adapter, e.revision, e.content_hash] for e in events),
                 ["seq", "event", "at", "actor", "adapter", "revision", "content sha256"], caption="Ledger history")


def _injections_of(site: Site, mem: Memories, memory_id: str, m: InspectedMemory | None = None) -> str:
    from ..delivery.injections import memory_injections

    turns = m.injections if m is not None else memory_injections(mem, memory_id)
    return table(([i.seq, link(href(site.base, "sessions", i.session_id), i.session_id),
                   link(href(site.base, "turn", session=i.session_id, turn=i.turn), f"turn {i.turn}"), i.section,
                   i.occurred_at] for i in turns),
                 ["seq", "session", "turn", "section", "at"], caption="Turns it entered", empty="it entered no turn")


# -- sessions and turns -----------------------------------------------------------------------------

def sessions_page(site: Site, viewer: Viewer, path: Mapping[str, str], q: Mapping[str, str]) -> tuple[str, str]:
    rows = list_sessions(_memories(site, viewer), limit=500)
    headers = ["session", "surface", "started", "ended", "summary"] + (["topic"] if viewer.operator else [])
    listed = table(([link(href(site.base, "sessions", s.id), s.id), s.surface, s.started_at, s.ended_at,
                     "yes" if s.has_summary else "", *([s.topic] if viewer.operator else [])] for s in rows),
                   headers, caption=f"{len(rows)} sessions", empty="no session")
    return "Sessions", listed


def session_page(site: Site, viewer: Viewer, path: Mapping[str, str], q: Mapping[str, str]) -> tuple[str, str]:
    session_id = path["session_id"]
    mem = _memories(site, viewer)
    turns = session_injections(mem, session_id, all_turns=True)
    body = ""
    if viewer.operator:
        try:
            s = recall_session(mem, session_id)
        except NotFound:
            if not turns:
                raise
        else:
            body += definition([("surface", s.surface), ("started", s.started_at), ("ended", s.ended_at),
                                ("topic", s.topic), ("withheld", s.withheld)])
            body += "<h2>The digest line others see, and the summary on demand</h2>" + pre(s.summary or "(none)")
    elif not turns:
        raise NotFound(f"no injection record for session {session_id[:100]!r} in this context")
    body += table(([link(href(site.base, "turn", session=session_id, turn=i.turn), f"turn {i.turn}"), i.seq,
                    i.occurred_at, len(i.memory_ids), i.tokens, i.budget, i.block_sha256] for i in turns),
                  ["turn", "seq", "at", "memories", "tokens", "budget", "block sha256"], caption="Turns delivered",
                  empty="no turn was delivered")
    return f"Session {session_id}", body


def _turn_number(q: Mapping[str, str]) -> int:
    raw = _one(q, "turn")
    if not raw.isdigit() or len(raw) > 9:
        raise InvalidArguments("turn must be a non-negative whole number")
    return int(raw)


def turn_page(site: Site, viewer: Viewer, path: Mapping[str, str], q: Mapping[str, str]) -> tuple[str, str]:
    session_id = _one(q, "session")
    if not session_id:
        raise InvalidArguments("session is required")
    turn = _turn_number(q)
    mem = _memories(site, viewer)
    records = session_injections(mem, session_id, turn=turn)
    if not records:
        raise NotFound(f"no injection record for turn {turn} of session {session_id[:100]!r} in this context")
    body = ""
    for r in records:
        body += definition([("ledger seq", r.seq), ("at", r.occurred_at), ("actor", r.actor), ("adapter", r.adapter),
                            ("tokens", f"{r.tokens} of {r.budget} ({r.counter})"), ("left out", r.truncated),
                            ("block sha256", Html(f"<code>{esc(r.block_sha256)}</code>")),
                            ("policy fingerprint", r.policy_fingerprint), ("tiers fingerprint", r.tiers_fingerprint)])
        again = rerender(mem, r)
        body += _exact(viewer, again)
        # the texts are in the block shown above when it matched; else each entry shows its own
        body += "<h2>The block's sections, from the recorded ids</h2>" + _block(site, viewer, mem, r,
                                                                                 texts=not again.matches)
    return f"Session {session_id}, turn {turn}", body


def _exact(viewer: Viewer, again: Rerendered) -> str:
    if again.matches:
        out = ('<p class=ok>Rendered again from the recorded ids, the block\'s sha256 is the recorded one: this is '
               "byte for byte the block the turn received.</p>")
    else:
        out = (f"<p class=warn>Rendered again from the recorded ids, the block does not match the recorded sha256: "
               f"{esc(again.why_not)}. The sections below are the recorded ids, each marked as it is now.</p>")
    if viewer.operator and again.text is not None:
        shown = "The block" if again.matches else "The block as it renders now"
        out += f"<h2>{shown}</h2>" + pre(again.text)
    return out


def _entry(site: Site, viewer: Viewer, mem: Memories, memory_id: str, texts: bool) -> str:
    row = mem.get_row(memory_id)
    ref = link(href(site.base, "memories", memory_id), memory_id)
    if row is None:
        return f"<li>{ref} <span class=none>(not visible in this context)</span></li>"
    mark = _state_mark(row["superseded_by"], row["erased_at"] is not None)
    head = f"<li>{ref} · {esc(row['origin'])} · {mark}"
    if texts and viewer.operator and row["erased_at"] is None:
        return head + pre(row["content"] or "") + "</li>"
    return head + "</li>"


def _block(site: Site, viewer: Viewer, mem: Memories, r: Any, *, texts: bool) -> str:
    hot = set(r.hot_ids)
    lessons = set(r.lesson_ids)
    recalled = [i for i in r.memory_ids if i not in hot and i not in lessons]
    digest = "".join(f"<li>{link(href(site.base, 'sessions', s), s)}</li>" for s in r.digest_sessions)
    parts = [("Other sessions (digest)", digest),
             ("Hot memories", "".join(_entry(site, viewer, mem, i, texts) for i in r.hot_ids)),
             ("Lessons", "".join(f"<li>lesson {esc(i)}</li>" for i in r.lesson_ids)),
             ("Recalled memories", "".join(_entry(site, viewer, mem, i, texts) for i in recalled))]
    return "".join(f"<h3>{esc(t)}</h3>" + (f"<ul>{items}</ul>" if items else "<p class=empty>(none)</p>")
                   for t, items in parts)


# -- quarantine, refusals, integrity ----------------------------------------------------------------

def quarantine_page(site: Site, viewer: Viewer, path: Mapping[str, str], q: Mapping[str, str]) -> tuple[str, str]:
    status = _one(q, "status") or "held"
    if status not in (*STATUSES, "all"):
        raise InvalidArguments(f"status must be one of {', '.join((*STATUSES, 'all'))}")
    notes = list_quarantined(_memories(site, viewer), status=None if status == "all" else status, limit=1000)
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
    rows = refusals(_memories(site, viewer), limit=500)
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


PAGES: dict[str, Page] = {
    "memories": memories_page, "memory": memory_page, "sessions": sessions_page, "session": session_page,
    "turn": turn_page, "quarantine": quarantine_page, "refusals": refusals_page, "integrity": integrity_page,
}
