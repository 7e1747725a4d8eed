"""`pymem db ...`: migrate, inspect and stop the database."""

from __future__ import annotations

import click

from .. import Settings, database_status, stop_embedded, upgrade_schema, upgrade_sql
from .common import echo_json, handle_errors, json_option


@click.group()
def db() -> None:
    """Manage the database: upgrade the schema, show its status, stop the embedded server."""


@db.command()
@click.option("--sql", "offline", is_flag=True,
              help="Print the migration SQL for review instead of applying it; connects to nothing.")
@click.option("--revision", default="head", show_default=True, help="Target schema revision.")
@handle_errors
def upgrade(offline: bool, revision: str) -> None:
    """Migrate the schema to the installed pymem's revision (a no-op when already there).

    Uses PYMEM_ADMIN_DSN (else PYMEM_DSN), or the embedded Postgres when neither is set. The
    embedding dimension comes from PYMEM_EMBEDDING_DIM when the schema is first created.

    Example: pymem db upgrade --sql > pymem.sql
    """
    settings = Settings.from_env()
    if offline:
        click.echo(upgrade_sql(embedding_dim=settings.embedding_dim, revision=revision), nl=False)
        return
    reached, location = upgrade_schema(settings, revision)
    click.echo(f"schema at revision {reached} ({location})")


@db.command()
@json_option
@handle_errors
def status(as_json: bool) -> None:
    """Show the server and pgvector versions, the schema revision, and where the data lives.

    Example: pymem db status --json
    """
    st = database_status(Settings.from_env())
    if as_json:
        echo_json(st.to_json())
        return
    click.echo(f"location:        {st.location}")
    if st.data_directory:
        click.echo(f"data directory:  {st.data_directory}")
    click.echo(f"server:          PostgreSQL {st.server_version}")
    click.echo(f"pgvector:        {st.pgvector_version or 'not available'}"
               + ("" if st.pgvector_ok else "  (pymem needs >= 0.8.3)"))
    schema = st.schema_revision or "none (run `pymem db upgrade`)"
    note = "current" if st.schema_current else f"behind, this pymem needs {st.head_revision}"
    click.echo(f"schema revision: {schema}" + (f"  ({note})" if st.schema_revision else ""))
    if st.embedding_dim:
        click.echo(f"embedding dim:   {st.embedding_dim}")


@db.command()
@handle_errors
def stop() -> None:
    """Stop the embedded Postgres (it otherwise keeps running between commands).

    Example: pymem db stop
    """
    settings = Settings.from_env()
    if not settings.embedded:
        raise click.UsageError("PYMEM_DSN is set: there is no embedded server to stop")
    if stop_embedded(settings):
        click.echo(f"stopped the embedded Postgres in {settings.home}")
    else:
        click.echo(f"no embedded Postgres is running in {settings.home}")


def register(main: click.Group) -> None:
    main.add_command(db)
