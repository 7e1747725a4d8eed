"""What `pymem db status` reports: server, pgvector, schema revision, and where the data lives."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from .. import db, migrate
from ..config import Settings
from .store import resolve

MIN_PGVECTOR = (0, 8, 3)


@dataclass(frozen=True)
class DatabaseStatus:
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

    def to_json(self) -> dict:
        return dict(asdict(self), schema_current=self.schema_current)


def _version_tuple(v: str | None) -> tuple[int, ...]:
    try:
        return tuple(int(p) for p in (v or "").split("."))
    except ValueError:
        return ()


def database_status(settings: Settings) -> DatabaseStatus:
    """Inspect the configured database without changing it (the embedded server is started)."""
    ends = resolve(settings, migrate_embedded=False)
    with db.connect(ends.admin, role=None, autocommit=True) as conn:
        server = conn.execute("show server_version").fetchone()[0]
        ext = conn.execute("select extversion from pg_extension where extname = 'vector'").fetchone()
        available = None
        if ext is None:
            row = conn.execute("select default_version from pg_available_extensions where name = 'vector'").fetchone()
            available = row[0] if row else None
        revision = migrate.current_revision(conn)
        dim = None
        if revision is not None:
            dim = conn.execute("select embedding_dim from pymem.store_info").fetchone()[0]
    vector = ext[0] if ext else available
    return DatabaseStatus(
        location=ends.location,
        server_version=server,
        pgvector_version=vector,
        pgvector_ok=_version_tuple(vector) >= MIN_PGVECTOR,
        schema_revision=revision,
        head_revision=migrate.head_revision(),
        embedding_dim=dim,
        data_directory=str(ends.embedded.data_dir) if ends.embedded else None,
    )
