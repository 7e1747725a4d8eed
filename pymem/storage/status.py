"""What the store says about itself: `pymem db status` (database_status), the health verb and
describe_store. One pgvector minimum and one version parser serve all three."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from psycopg_pool import ConnectionPool

from .. import db, migrate, queries
from ..config import Settings
from ..vocabulary import MAX_TOP_K
from . import idempotency
from .endpoints import resolve
from .search import INCLUDE_KEYS

__all__ = ["DatabaseStatus", "database_status", "health", "health_on", "unreachable", "describe_store", "MIN_PGVECTOR",
           "pgvector_supported"]

#: Iterative index scans (pymem.search) need pgvector 0.8.3 or later (pymem.migrate's minimum).
MIN_PGVECTOR = migrate.MIN_PGVECTOR
_version_tuple = migrate.version_tuple


def pgvector_supported(version: str | None) -> bool:
    return bool(version) and _version_tuple(version) >= MIN_PGVECTOR


@dataclass(frozen=True)
class DatabaseStatus:
    """What `database_status` reports: where the database is, its server and pgvector versions, and whether its
    schema is at the library's revision."""

    location: str
    server_version: str
    pgvector_version: str | None
    pgvector_ok: bool
    schema_revision: str | None
    head_revision: str
    embedding_dim: int | None
    data_directory: str | None

    @property
    def schema_current(self) -> bool:
        return self.schema_revision == self.head_revision

    def to_json(self) -> dict[str, Any]:
        return dict(asdict(self), schema_current=self.schema_current)


def database_status(settings: Settings) -> DatabaseStatus:
    """Inspect the configured database without changing it (the embedded server is started)."""
    ends = resolve(settings, migrate_embedded=False)
    with db.connect(ends.admin, role=None, autocommit=True) as conn:
        server = db.one(conn.execute(queries.query("server_version")).fetchone())[0]
        ext = conn.execute(queries.query("pgvector_version")).fetchone()
        available = None
        if ext is None:
            row = conn.execute(queries.query("pgvector_available_version")).fetchone()
            available = row[0] if row else None
        revision = migrate.current_revision(conn)
        dim = None
        if revision is not None:
            dim = db.one(conn.execute(queries.query("store_embedding_dim")).fetchone())[0]
    vector = ext[0] if ext else available
    return DatabaseStatus(
        location=ends.location,
        server_version=server,
        pgvector_version=vector,
        pgvector_ok=pgvector_supported(vector),
        schema_revision=revision,
        head_revision=migrate.head_revision(),
        embedding_dim=dim,
        data_directory=str(ends.embedded.data_dir) if ends.embedded else None,
    )


def health(pool: ConnectionPool, embedding_dim: int) -> dict[str, Any]:
    """Database reachable, its version, pgvector >= 0.8.3 (iterative scans), schema at head."""
    try:
        with db.pooled(pool) as c:
            return health_on(c, embedding_dim)
    except Exception as exc:  # noqa: BLE001 - health reports, it does not raise
        return unreachable(embedding_dim, exc)


def unreachable(embedding_dim: int, exc: BaseException | None = None) -> dict[str, Any]:
    """The health report of a database that could not be asked (the error's type only)."""
    report = _empty_report(embedding_dim)
    if exc is not None:
        report["database"]["error"] = type(exc).__name__
    return report


def _empty_report(embedding_dim: int) -> dict[str, Any]:
    return {
        "ok": False,
        "database": {"reachable": False},
        "pgvector": {"required": ".".join(map(str, MIN_PGVECTOR))},
        "schema": {"head": migrate.head_revision()},
        "embedding_dim": embedding_dim,
    }


def health_on(c: Any, embedding_dim: int) -> dict[str, Any]:
    """The health report, asked on connection `c` (left idle); raises when the database fails."""
    report = _empty_report(embedding_dim)
    head = report["schema"]["head"]
    server = c.info.server_version
    ext = c.execute(queries.query("pgvector_version")).fetchone()
    current = migrate.current_revision(c)
    c.rollback()
    report["database"] = {"reachable": True, "server_version": f"{server // 10000}.{server % 10000}"}
    version = ext[0] if ext else None
    report["pgvector"].update(version=version, ok=pgvector_supported(version))
    report["schema"].update(revision=current, current=current == head)
    report["ok"] = report["pgvector"]["ok"] and report["schema"]["current"]
    return report


def describe_store(embedding_dim: int, *, max_batch: int) -> dict[str, Any]:
    """What this store implements, and nothing more (the client gates verbs on it)."""
    return {
        "store": "pymem",
        "verbs": ["upsert_many", "search", "get", "get_many", "delete_many", "list_chunks", "describe_store",
                  "health"],
        "optimistic_locking_supported": True,
        "filterable_metadata_fields": [],
        "relational_edges_supported": False,
        "atomic_supersede_supported": False,
        "transaction_supported": False,
        "embedding_dim": embedding_dim,
        "distance": "cosine",
        "max_top_k": MAX_TOP_K,
        "max_batch": max_batch,
        "include_keys": sorted(INCLUDE_KEYS),
        "idempotency_classes": {name: int(t.total_seconds()) for name, t in idempotency.CLASSES.items()},
    }
