"""The memories pages: the list with its search and filters, and one memory in full (content,
record, provenance, tier, supersession chain, ledger history, the turns it entered, and an
operator's actions)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..admission.quarantine import QuarantinedNote, list_quarantined
from ..delivery.injections import memory_injections
from ..delivery.inspector import InspectedMemory, inspect_memories, inspect_memory
from ..delivery.tiers import Tier, tier_of
from ..errors import InvalidArguments, NotFound
from ..integrity.audit import history
from ..storage.memories import Memories
from ..vocabulary import HOT_TAG, ORIGINS
from .html import Html, definition, esc, field, form, href, link, pre, select, table, when
from .identity import Viewer
from .site import Site, memories_of, one, require_operator, short, state_mark

__all__ = ["memories_page", "memory_page", "MEMORY_STATES"]

#: What the memories page lists: live ones, live and superseded, superseded only, the held notes.
MEMORY_STATES = ("live", "with superseded", "superseded only", "quarantined")
#: Most memories one listing reads before filtering.
LIST_LIMIT = 1000


def _matches(m: InspectedMemory, q: Mapping[str, str]) -> bool:
    text = one(q, "text").casefold()
    adapter = one(q, "adapter")
    return ((not text or text in (m.text or "").casefold())
            and (not one(q, "kind") or m.kind == one(q, "kind"))
            and (not one(q, "tier") or m.tier == one(q, "tier"))
            and (not one(q, "origin") or m.origin == one(q, "origin"))
            and (not adapter or (m.source_adapter or "(operator)") == adapter)
            and (one(q, "state") != "superseded only" or m.superseded_by is not None))


def memories_page(site: Site, viewer: Viewer, path: Mapping[str, str], q: Mapping[str, str]) -> tuple[str, str]:
    require_operator(viewer, "the memories list")
    state = one(q, "state") or "live"
    for name, allowed in (("state", MEMORY_STATES), ("tier", [t.value for t in Tier]), ("origin", ORIGINS)):
        if one(q, name) and one(q, name) not in allowed:
            raise InvalidArguments(f"{name} must be one of {', '.join(allowed)}")
    if state == "quarantined":
        rows = [_as_inspected(n) for n in list_quarantined(memories_of(site, viewer), limit=1000)]
        rows = [m for m in rows if not one(q, "session") or m.session_id == one(q, "session")]
        rows = [m for m in rows if not one(q, "hot") or m.hot]
    else:
        rows = inspect_memories(memories_of(site, viewer), session_id=one(q, "session") or None,
                                hot_only=bool(one(q, "hot")), include_superseded=state != "live", limit=LIST_LIMIT)
    found = [m for m in rows if _matches(m, q)]
    filters = form(f"{site.base}/memories", [
        field("text", "Text contains", value=one(q, "text")),
        field("kind", "Kind", value=one(q, "kind")),
        select("tier", "Tier", [t.value for t in Tier], one(q, "tier")),
        select("origin", "Origin", ORIGINS, one(q, "origin")),
        field("adapter", "Adapter", value=one(q, "adapter")),
        field("session", "Session", value=one(q, "session")),
        field("hot", "Hot only", value=one(q, "hot"), kind="checkbox"),
        select("state", "Show", MEMORY_STATES, state, blank=None),
    ], "Filter", viewer, method="get", name="filters", cls="filters")
    held = state == "quarantined"
    listed = table(([link(href(site.base, "quarantine") if held else href(site.base, "memories", m.id), m.id),
                     m.kind, m.tier, m.origin, m.source_adapter or "(operator)", m.session_id, "hot" if m.hot else "",
                     "held" if held else state_mark(m.superseded_by, False), when(m.created_at), short(m.text)]
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
    mem = memories_of(site, viewer)
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
        body = (definition([("state", state_mark(None, True)), ("erased at", events[-1].erased_at),
                            ("kind", events[-1].kind), ("origin", events[-1].origin)])
                + "<p>Its content, record and embedding are gone; its hash stays in the chain.</p>"
                + _history_table(events))
        return f"Memory {memory_id}", body
    record = mem.get(memory_id)
    facts = definition([("state", state_mark(m.superseded_by, False)), ("kind", m.kind), ("tier", m.tier),
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

    turns = m.injections if m is not None else memory_injections(mem, memory_id)
    return table(([i.seq, link(href(site.base, "sessions", i.session_id), i.session_id),
                   link(href(site.base, "turn", session=i.session_id, turn=i.turn), f"turn {i.turn}"), i.section,
                   i.occurred_at] for i in turns),
                 ["seq", "session", "turn", "section", "at"], caption="Turns it entered", empty="it entered no turn")
