"""What every inspector page shares: the Site (the store, the base path, what the process keeps),
the page's signature, and the small helpers of the page modules."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..embedder import Embedder
from ..errors import AccessDenied
from ..integrity.reports import VerifyReport
from ..storage.memories import Memories
from .html import Html, esc
from .identity import Viewer

if TYPE_CHECKING:  # pragma: no cover
    from ..storage.store import Store

__all__ = ["Site", "Page", "memories_of", "require_operator", "one", "state_mark", "short"]


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


def memories_of(site: Site, viewer: Viewer) -> Memories:
    return site.store.bind(viewer.ctx)


def require_operator(viewer: Viewer, what: str) -> None:
    if not viewer.operator:
        raise AccessDenied(f"{what} shows memory content: an operator's token only (an auditor reads the audit views)")


def one(query: Mapping[str, str], name: str) -> str:
    return (query.get(name) or "").strip()


def state_mark(superseded_by: str | None, erased: bool) -> Html:
    if erased:
        return Html('<span class="mark erased">erased</span>')
    if superseded_by:
        return Html(f'<span class="mark superseded">superseded by {esc(superseded_by)}</span>')
    return Html("live")


def short(text: str | None, width: int = 80) -> str | None:
    if text is None:
        return None
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"
