"""The sessions pages: the sessions, one session and its turns, and one turn: its injection
record, its block rendered again and checked against the recorded sha256, its sections by id."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..delivery.injections import session_injections
from ..delivery.sessions import list_sessions, recall_session
from ..errors import InvalidArguments, NotFound
from ..storage.memories import Memories
from .blocks import Rerendered, rerender
from .html import Html, definition, esc, href, link, pre, table
from .identity import Viewer
from .site import Site, memories_of, one, state_mark

__all__ = ["sessions_page", "session_page", "turn_page"]


def sessions_page(site: Site, viewer: Viewer, path: Mapping[str, str], q: Mapping[str, str]) -> tuple[str, str]:
    rows = list_sessions(memories_of(site, viewer), limit=500)
    headers = ["session", "surface", "started", "ended", "summary"] + (["topic"] if viewer.operator else [])
    listed = table(([link(href(site.base, "sessions", s.id), s.id), s.surface, s.started_at, s.ended_at,
                     "yes" if s.has_summary else "", *([s.topic] if viewer.operator else [])] for s in rows),
                   headers, caption=f"{len(rows)} sessions", empty="no session")
    return "Sessions", listed


def session_page(site: Site, viewer: Viewer, path: Mapping[str, str], q: Mapping[str, str]) -> tuple[str, str]:
    session_id = path["session_id"]
    mem = memories_of(site, viewer)
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
    raw = one(q, "turn")
    if not raw.isdigit() or len(raw) > 9:
        raise InvalidArguments("turn must be a non-negative whole number")
    return int(raw)


def turn_page(site: Site, viewer: Viewer, path: Mapping[str, str], q: Mapping[str, str]) -> tuple[str, str]:
    session_id = one(q, "session")
    if not session_id:
        raise InvalidArguments("session is required")
    turn = _turn_number(q)
    mem = memories_of(site, viewer)
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
    mark = state_mark(row["superseded_by"], row["erased_at"] is not None)
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
