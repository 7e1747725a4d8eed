"""`reembed`: move a store to another embedder, in place, resumable, chained, with progress.

Every live row whose vector an embedder computed from its content (memories.embedder set, or NULL
with a vector-free record: the write gate's rows from before migration 0011) and whose embedder is
not the target is embedded again with the target and written back by an ordinary UPDATE, so each
change is a memory.update event in its tenant's chain and `pymem verify` stays clean. Rows whose
vector the caller supplied (the storage contract's) are left alone: pymem cannot recompute them.

Work goes tenant by tenant and, within a tenant, per source adapter (an update must carry the
row's adapter), in batches of `batch` rows, each its own transaction: an interrupted run keeps
what it committed and the next run picks up the rest. When no row is left, the target is recorded
as the store's embedder (pymem.record_reembedded); until then the store keeps its old record, so
writers and readers of the old embedder keep working (queries meanwhile compare against a mix).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from pgvector import Vector

from .. import db, queries
from ..context import Context
from ..embedder import Embedder, check_dimension
from ..errors import InvalidArguments

__all__ = ["ReembedReport", "reembed", "REEMBED_ACTOR"]

REEMBED_ACTOR = "pymem-reembed"


@dataclass(frozen=True)
class ReembedReport:
    """What `reembed` did: the embedder used, the rows re-embedded, how many needed it when the run began, and the
    store's recorded embedder afterwards."""

    embedder: str
    rows: int  # rows re-embedded by this run
    pending_before: int  # rows that needed it when the run began
    recorded: str | None  # the store's embedder afterwards

    @property
    def complete(self) -> bool:
        return self.recorded == self.embedder

    def to_json(self) -> dict[str, Any]:
        return asdict(self) | {"complete": self.complete}


def reembed(store: Any, embedder: Embedder, *, batch: int = 128,
            progress: Callable[[int, int], None] | None = None) -> ReembedReport:
    """Re-embed the store's content-embedded rows with `embedder` (see the module docstring);
    `progress(done, total)` after each batch. Needs the administrative connection to list the
    tenants; writes go through the app pool under each tenant's context."""
    if isinstance(batch, bool) or not isinstance(batch, int) or not 1 <= batch <= 10_000:
        raise InvalidArguments("batch must be an integer between 1 and 10000")
    if not callable(getattr(embedder, "embed", None)) or not isinstance(getattr(embedder, "name", None), str):
        raise InvalidArguments("embedder must have a name and an embed(texts) method")
    check_dimension(embedder, store.embedding_dim)
    name = embedder.name
    with store.admin_connection() as admin, db.translate_errors():
        total = admin.execute(queries.query("reembed_pending"), (name,)).fetchone()[0]
        groups = admin.execute(queries.query("reembed_tenants"), (name,)).fetchall()
    done = 0
    for tenant, adapter in groups:
        ctx = Context(tenant=tenant, actor=REEMBED_ACTOR, adapter=adapter)
        while True:
            with store.transaction(ctx) as c, db.translate_errors():
                rows = c.execute(queries.query("reembed_batch"), (tenant, adapter, name, batch)).fetchall()
                if not rows:
                    break
                vectors = embedder.embed([content for _, content in rows])
                c.execute(queries.query("reembed_rows"),
                          (name, [memory_id for memory_id, _ in rows], [Vector(v) for v in vectors], tenant))
            done += len(rows)
            if progress is not None:
                progress(done, max(total, done))
    with store.pool.connection() as c, db.translate_errors():
        recorded = c.execute(queries.query("record_reembedded"), (name,)).fetchone()[0]
    store.embedder.recorded = recorded
    return ReembedReport(embedder=name, rows=done, pending_before=total, recorded=recorded)
