"""Schema migrations: a thin layer over Alembic whose revisions apply SQL from sql/.

Alembic (and SQLAlchemy under it) is imported when a migration function runs, never with
`import pymem`: an application that only uses the store does not load them at import.
"""

from __future__ import annotations

import functools
import io
from contextlib import redirect_stdout
from typing import TYPE_CHECKING, Any, TextIO

from . import queries
from .errors import PymemError, SchemaError, ServerError
from .resources import migrations_dir, render_sql

if TYPE_CHECKING:  # pragma: no cover
    import psycopg
    from alembic.config import Config


def _config(embedding_dim: int, url: str | None = None, connection: Any = None, output: TextIO | None = None) -> Config:
    from alembic.config import Config

    cfg = Config(output_buffer=output) if output is not None else Config()
    cfg.set_main_option("script_location", str(migrations_dir()))
    if url:
        cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    cfg.attributes["embedding_dim"] = int(embedding_dim)
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


def apply_sql(name: str) -> None:
    """Run sql/NAME inside the current Alembic migration (called from revision files)."""
    from alembic import context, op

    dim = context.config.attributes.get("embedding_dim")
    if dim is None:
        raise SchemaError("the migration needs the embedding dimension (PYMEM_EMBEDDING_DIM)")
    sql = render_sql(name, embedding_dim=dim)
    if context.is_offline_mode():
        op.get_context().impl.static_output(sql.rstrip() + "\n")
    else:
        # The raw driver connection runs the whole file as one simple-protocol script, so $$ bodies,
        # %-signs and :casts reach Postgres exactly as written.
        driver = op.get_bind().connection.driver_connection
        assert driver is not None  # a live connection always has its driver's
        # On a Citus coordinator whose store is not distributed yet, the schema is made there
        # alone, as on a single Postgres; `pymem db distribute` then places it on the workers.
        driver.execute(queries.query("migrate_before_distribution"))
        driver.execute(sql)


def sqlalchemy_url(dsn: str) -> str:
    """A libpq DSN (postgresql://...) as a SQLAlchemy URL on the psycopg 3 driver."""
    if dsn.startswith("postgresql+psycopg://"):
        return dsn
    for prefix in ("postgresql://", "postgres://"):
        if dsn.startswith(prefix):
            return "postgresql+psycopg://" + dsn[len(prefix):]
    raise SchemaError("PYMEM_DSN must be a postgresql:// URL for migrations")


#: The oldest PostgreSQL the schema runs on (it uses 16's features), and the oldest pgvector
#: (iterative index scans, pymem.search, need 0.8.3).
MIN_POSTGRES = 16
MIN_PGVECTOR = (0, 8, 3)


def version_tuple(text: str | None) -> tuple[int, ...]:
    """"0.8.5" -> (0, 8, 5); a suffix such as "1.0.0-rc1" keeps its digits (1, 0, 0)."""
    parts = []
    for piece in (text or "").split("."):
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def preflight_problems(facts: dict[str, Any]) -> list[str]:
    """What stops a migration on a server, from the facts `upgrade_preflight` reads: too old a
    PostgreSQL, pgvector absent or too old, a login that may not create or change the schema."""
    problems = []
    version = facts["server_version_num"]
    if version < MIN_POSTGRES * 10000:
        problems.append(f"PostgreSQL {facts['server_version']} is too old: pymem needs PostgreSQL {MIN_POSTGRES} "
                        "or later")
    vector = facts["vector_installed"] or facts["vector_available"]
    need = ".".join(map(str, MIN_PGVECTOR))
    if vector is None:
        problems.append(f"pgvector is not installed on the server: pymem needs pgvector {need} or later "
                        "(the `vector` extension)")
    elif version_tuple(vector) < MIN_PGVECTOR:
        problems.append(f"pgvector {vector} is too old: pymem needs {need} or later")
    login = facts["login"]
    if not facts["superuser"]:
        if facts["schema_owner"] is not None and not facts["owns_schema"]:
            problems.append(f"the login {login!r} may not migrate: it does not own the pymem schema (owner "
                            f"{facts['schema_owner']!r}); run `pymem db upgrade` with PYMEM_ADMIN_DSN set to the "
                            "owner's login, not the app login")
        elif facts["schema_owner"] is None and not facts["can_create"]:
            problems.append(f"the login {login!r} may not create the pymem schema in this database; run "
                            "`pymem db upgrade` with PYMEM_ADMIN_DSN set to an owner login")
    return problems


def preflight(dsn: str) -> None:
    """Refuse, in one line (ServerError), a server or a login a migration would fail on."""
    import psycopg
    from psycopg.rows import dict_row

    try:
        with psycopg.connect(dsn, autocommit=True, row_factory=dict_row) as conn:
            facts = conn.execute(queries.query("upgrade_preflight")).fetchone()
    except psycopg.OperationalError as exc:
        raise ServerError(f"cannot connect to the database: {str(exc).strip().splitlines()[0]}") from None
    if facts is None:
        raise ServerError("the upgrade preflight query returned nothing")
    problems = preflight_problems(facts)
    if problems:
        raise ServerError("; ".join(problems))


def upgrade(dsn: str, *, embedding_dim: int, revision: str = "head") -> None:
    """Migrate the database at `dsn` to `revision`; a no-op when it is already there. A server or
    login it cannot migrate is refused first (preflight), and a failure of the migration itself
    is one line (ServerError), never a driver's traceback."""
    from alembic import command

    preflight(dsn)
    try:
        command.upgrade(_config(embedding_dim, url=sqlalchemy_url(dsn)), revision)
    except PymemError:
        raise
    except Exception as exc:
        cause = getattr(exc, "orig", None) or exc
        first = (str(cause).strip().splitlines() or [type(cause).__name__])[0]
        raise ServerError(f"the migration failed ({type(cause).__name__}): {first}") from exc


def upgrade_sql(*, embedding_dim: int, revision: str = "head") -> str:
    """The migration SQL from an empty database to `revision`, without connecting anywhere."""
    from alembic import command

    buf = io.StringIO()
    with redirect_stdout(io.StringIO()):
        command.upgrade(_config(embedding_dim, output=buf), revision, sql=True)
    return buf.getvalue()


@functools.cache
def head_revision() -> str:
    """The newest revision this package ships. Read once per process: the revisions are files of
    the package, and loading them (Alembic imports every revision module) held the interpreter
    for tens of milliseconds at each readiness probe of a long-running service."""
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(_config(1)).get_current_head()
    if head is None:
        raise SchemaError("the installed package has no migrations")
    return head


def current_revision(conn: psycopg.Connection[Any]) -> str | None:
    """The revision recorded in pymem.alembic_version, or None when pymem was never migrated here.

    `conn` is a psycopg connection (any role that can see the pymem schema).
    """
    row = conn.execute(queries.query("schema_version_table_exists")).fetchone()
    if not (row and row[0]):
        return None
    row = conn.execute(queries.query("schema_revision")).fetchone()
    return row[0] if row else None


def check_current(conn: psycopg.Connection[Any]) -> None:
    """Raise SchemaError naming `pymem db upgrade` unless the schema is at the installed head."""
    current, head = current_revision(conn), head_revision()
    if current != head:
        state = "has no pymem schema" if current is None else f"is at schema revision {current}"
        raise SchemaError(
            f"the database {state}, this pymem needs {head}: run `pymem db upgrade` "
            "(or `pymem db upgrade --sql` to review the SQL and apply it yourself)"
        )


__all__ = ["apply_sql", "upgrade", "upgrade_sql", "head_revision", "current_revision", "check_current", "preflight",
           "preflight_problems", "MIN_POSTGRES", "MIN_PGVECTOR", "version_tuple"]
