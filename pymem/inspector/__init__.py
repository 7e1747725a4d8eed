"""The memory inspector as web pages: what a tenant remembers, where each memory came from, what
each turn received, the quarantine to review, the refusals and the chain's integrity.

Server-rendered HTML, mounted at /inspector by the service's app (pymem.server.app) and served
alone by `pymem inspect --web`. Every request carries a signed token, verified as the service
verifies it (pymem.service.auth): in the Authorization header, or in the HttpOnly, SameSite=Strict
cookie the login form sets. The token's context is the transaction's, so row-level security
decides what every page shows; an operator token (no adapter) sees the tenant's memories and acts
on them, an auditor token (the claim `role: auditor`) sees the audit views and no content, and an
agent token (one naming an adapter) is refused. Every action is one of the library's verbs, each a
ledger event (pymem.inspector.actions).
"""

from __future__ import annotations

from .routes import build_inspector, inspector_app

__all__ = ["build_inspector", "inspector_app"]
