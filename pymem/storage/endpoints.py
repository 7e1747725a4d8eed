"""Where the store connects: the configured server, or the embedded one (started, and migrated
on first use, when PYMEM_DSN is unset); and the schema chores on it (upgrade, stop)."""

from __future__ import annotations

from dataclasses import dataclass

import psycopg

from .. import db, embedded, migrate
from ..config import Settings

__all__ = ["Endpoints", "resolve", "upgrade_schema", "stop_embedded", "admin_connection"]


@dataclass(frozen=True)
class Endpoints:
    """Where the store connects: the app's DSN and the administrative one (DDL, audits, bench)."""

    app: str
    admin: str
    embedded: embedded.EmbeddedServer | None = None

    @property
    def location(self) -> str:
        if self.embedded is not None:
            return f"embedded Postgres in {self.embedded.home}"
        return "PYMEM_DSN"


def resolve(settings: Settings, *, migrate_embedded: bool = True) -> Endpoints:
    """Start the embedded server when no DSN is set (migrating it on first use)."""
    if settings.dsn:  # not embedded
        return Endpoints(app=settings.dsn, admin=settings.admin_dsn or settings.dsn)
    server = embedded.start(settings.home)
    ends = Endpoints(app=server.dsn("pymem_app"), admin=server.dsn("postgres"), embedded=server)
    if migrate_embedded:
        with db.connect(ends.admin, role=None, autocommit=True) as conn:
            current = migrate.current_revision(conn)
        if current != migrate.head_revision():
            migrate.upgrade(ends.admin, embedding_dim=settings.embedding_dim)
            embedded.enable_local_logins(server)
    return ends


def upgrade_schema(settings: Settings, revision: str = "head") -> tuple[str, str]:
    """Migrate the configured database (PYMEM_ADMIN_DSN, else PYMEM_DSN, else the embedded
    server) to `revision`; a no-op when it is there. Returns (the revision reached, where)."""
    ends = resolve(settings, migrate_embedded=False)
    migrate.upgrade(ends.admin, embedding_dim=settings.embedding_dim, revision=revision)
    if ends.embedded is not None:
        embedded.enable_local_logins(ends.embedded)
    return (revision if revision != "head" else migrate.head_revision()), ends.location


def stop_embedded(settings: Settings) -> bool:
    """Stop the embedded server in PYMEM_HOME if it runs; True if one was stopped."""
    return embedded.stop(settings.home)


def admin_connection(settings: Settings) -> psycopg.Connection:
    """A connection with the administrative login (PYMEM_ADMIN_DSN, else PYMEM_DSN, else the
    embedded server's superuser): bindings, cross-tenant audits. The caller closes it."""
    return db.connect(resolve(settings).admin, role=None)
