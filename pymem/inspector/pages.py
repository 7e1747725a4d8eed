"""The pages by name: each a function of the Site, the viewer, the path's and the query's
parameters, returning (title, body). They call the library's read verbs in the viewer's context,
so row-level security decides what they show; an auditor's pages are built from the audit views
alone (ids, events, hashes) and name no content. Nothing here writes."""

from __future__ import annotations

from .memory_pages import MEMORY_STATES, memories_page, memory_page
from .review_pages import integrity_page, quarantine_page, refusals_page
from .session_pages import session_page, sessions_page, turn_page
from .site import Page, Site

__all__ = ["Site", "Page", "PAGES", "MEMORY_STATES"]

PAGES: dict[str, Page] = {
    "memories": memories_page, "memory": memory_page, "sessions": sessions_page, "session": session_page,
    "turn": turn_page, "quarantine": quarantine_page, "refusals": refusals_page, "integrity": integrity_page,
}
