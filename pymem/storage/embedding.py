"""Which embedder a store's vectors come from: resolved once per store, checked on every use.

pymem.store_info.embedder names the embedder whose vectors the store holds. The first write
that embeds text claims it (pymem.claim_embedder); from then on an embedder of another name (or
dimension) is refused with EmbedderMismatch, which names both and `pymem reembed`, instead of
comparing vectors from two spaces. A call that passes no embedder gets the store's: the
recorded one, else pymem.embedder.default_embedder_name() (e5 when installed). Vectors a caller
supplies itself (the storage contract) are the caller's business and are not checked.
"""

from __future__ import annotations

import threading
from typing import Any

import psycopg

from .. import db, queries
from ..embedder import Embedder, check_dimension, default_embedder_name, get_embedder
from ..errors import EmbedderMismatch

__all__ = ["StoreEmbedder", "mismatch"]


def mismatch(recorded: str, embedder: Embedder) -> EmbedderMismatch:
    return EmbedderMismatch(
        f"this store's vectors were written by the embedder {recorded!r}, not {embedder.name!r}: use "
        f"{recorded!r} (the settings' PYMEM_EMBEDDER unset, or that name), or re-embed the store with "
        f"{embedder.name!r} (pymem.reembed)")


class StoreEmbedder:
    """The store's embedder: `resolve(embedder)` for a read, `claim(embedder, conn)` before a
    write of vectors computed from text. One per Store; the loaded model is shared per process."""

    def __init__(self, recorded: str | None, dim: int, environ: Any = None):
        self.recorded = recorded
        self.environ = environ  # the store settings' PYMEM_* values (PYMEM_EMBEDDER)
        self.dim = dim
        self._default: Embedder | None = None
        self._lock = threading.Lock()

    def resolve(self, embedder: Embedder | None = None) -> Embedder:
        """`embedder`, checked against the store, or the store's own (see the module docstring)."""
        if embedder is None:
            with self._lock:
                if self._default is None or (self.recorded is not None and self._default.name != self.recorded):
                    self._default = get_embedder(self.recorded or default_embedder_name(self.environ))
                embedder = self._default
        check_dimension(embedder, self.dim)
        if self.recorded is not None and embedder.name != self.recorded:
            raise mismatch(self.recorded, embedder)
        return embedder

    def claim(self, embedder: Embedder, conn: psycopg.Connection | Any) -> None:
        """Record `embedder` as the store's if none is recorded; refuse it if another one is."""
        if self.recorded is None:
            with db.translate_errors():
                recorded = db.one(conn.execute(queries.query("claim_embedder"),
                                               (embedder.name, embedder.dim)).fetchone())[0]
            self.recorded = recorded
        if self.recorded != embedder.name:
            raise mismatch(self.recorded, embedder)

    def refresh(self, conn: psycopg.Connection | Any) -> str | None:
        """Re-read the recorded name (after `pymem reembed`, or a claim by another process)."""
        with db.translate_errors():
            self.recorded = db.one(conn.execute(queries.query("store_embedder")).fetchone())[0]
        return self.recorded
