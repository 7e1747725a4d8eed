"""`pymem db ...`: migrate, inspect and stop the database."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from .. import Settings, get_embedder, reembed
from ..admin import (
    admin_connection,
    bind_login,
    database_status,
    distribute,
    distribution_sql,
    list_bindings,
    register_signing_key,
    stop_embedded,
    unbind_login,
    upgrade_schema,
    upgrade_sql,
)
from ..context import parse_scope_pairs
from ..integrity import load_or_create_key
from .common import PymemCommandError, echo_json, handle_errors, json_option, open_store, stderr

if TYPE_CHECKING:
    from ..admin import LoginBinding


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


@db.command("distribute")
@click.option("--sql", "offline", is_flag=True,
              help="Print the statements for a DBA to review instead of running them "
                   "(reads the catalog, changes nothing).")
@json_option
@handle_errors
def distribute_command(offline: bool, as_json: bool) -> None:
    """Distribute the store over a Citus cluster, sharded by tenant (run once, after `pymem db upgrade`).

    Uses the administrative connection to the coordinator (PYMEM_ADMIN_DSN). Tenant tables are
    sharded by tenant_id and colocated, global tables become reference tables, the login bindings
    stay on each node, every function reaches the workers. A second run does nothing. Refused,
    with nothing changed, on a server without the citus extension.

    Example: pymem db distribute --sql > distribute.sql
    """
    with admin_connection(Settings.from_env()) as conn:
        conn.autocommit = True
        if offline:
            click.echo(distribution_sql(conn), nl=False)
            return
        report = distribute(conn)
    if as_json:
        echo_json(report.to_json())
        return
    click.echo(f"distributed on Citus {report.citus_version} with {report.workers} worker(s): "
               f"{len(report.statements)} statement(s) run" + ("" if report.statements else " (already distributed)"))


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


@db.command("register-key")
@click.option("--public-key", default=None, metavar="HEX",
              help="Register this public key (64 hex digits) instead of the installation key file's.")
@handle_errors
def register_key_command(public_key: str | None) -> None:
    """Register the installation's signing key, which every convention receipt must be signed with.

    Only the administrative connection (PYMEM_ADMIN_DSN) may: the app and agent logins cannot, so
    none of them can register a key of its own first. The key is the public half of
    PYMEM_SIGNING_KEY (created when absent) unless --public-key names one. Confirms a key that is
    registered already; refuses another one (replacing it is an administrator's act on
    pymem.signing_keys).

    Example: pymem db register-key --public-key 3b6a27bcceb6a42d62a3a8d02a6f0d73653215771de243a63ac048a18b59da29
    """
    settings = Settings.from_env()
    key = public_key if public_key is not None else load_or_create_key(settings.signing_key_path).public_hex
    with admin_connection(settings) as conn:
        registered = register_signing_key(conn, key)
    click.echo(f"signing key registered: {registered}")


def _print_binding(b: LoginBinding) -> None:
    tenants = "every tenant" if b.all_tenants else ", ".join(b.tenants or ()) or "no tenant"
    scope = ", ".join(f"{k}={v}" for k, v in b.scope.items()) or "whole tenant"
    click.echo(f"{b.role}: adapter {b.adapter}; tenants: {tenants}; scope: {scope}")


@db.command("bind-login")
@click.argument("role")
@click.option("--adapter", required=True, help="The adapter every write of the login is tagged with.")
@click.option("--tenant", "tenants", multiple=True, metavar="T",
              help="A tenant the login may act in (repeatable; at least one unless --all-tenants).")
@click.option("--all-tenants", is_flag=True, help="Let the login act in every tenant (an explicit opt-in).")
@click.option("--scope", "scope_pairs", multiple=True, metavar="AXIS=VALUE",
              help="Confine the login to this scope axis (repeatable).")
@json_option
@handle_errors
def bind_login_command(role: str, adapter: str, tenants: tuple[str, ...], all_tenants: bool,
                       scope_pairs: tuple[str, ...], as_json: bool) -> None:
    """Bind a database login (or a group role: every member) to an adapter, tenants and a scope.

    The login then always writes as ADAPTER, can act only in the named tenants and only inside
    the scope; nothing its connection sets can widen that. Replaces an existing binding of ROLE.
    Uses the administrative connection; the change is recorded in pymem.binding_log.

    Example: pymem db bind-login agent_codex --adapter codex --tenant acme --scope project=billing
    """
    with admin_connection(Settings.from_env()) as conn:
        binding = bind_login(conn, role, adapter=adapter, tenants=list(tenants) or None,
                             all_tenants=all_tenants, scope=parse_scope_pairs(scope_pairs))
    if as_json:
        echo_json(binding.to_json())
    else:
        _print_binding(binding)


@db.command("unbind-login")
@click.argument("role")
@handle_errors
def unbind_login_command(role: str) -> None:
    """Remove a login's binding: it is an operator (untagged writes, any tenant) again.

    Exit 1 when ROLE had no binding. The change is recorded in pymem.binding_log.

    Example: pymem db unbind-login agent_codex
    """
    with admin_connection(Settings.from_env()) as conn:
        removed = unbind_login(conn, role)
    if not removed:
        raise PymemCommandError(f"{role} has no binding", exit_code=1)
    click.echo(f"unbound {role}")


@db.command("bindings")
@json_option
@handle_errors
def bindings_command(as_json: bool) -> None:
    """List the login bindings: role, adapter, tenants and scope.

    Example: pymem db bindings --json
    """
    with admin_connection(Settings.from_env()) as conn:
        rows = list_bindings(conn)
    if as_json:
        echo_json([b.to_json() for b in rows])
    elif not rows:
        click.echo("(no bindings: every login is an operator)")
    else:
        for b in rows:
            _print_binding(b)


@click.command("reembed")
@click.option("--embedder", "embedder_name", default=None, metavar="NAME",
              help="The embedder to move to: e5 (default), lexical or minilm.")
@click.option("--batch", type=int, default=128, show_default=True, help="Rows per transaction.")
@json_option
@handle_errors
def reembed_command(embedder_name: str | None, batch: int, as_json: bool) -> None:
    """Re-embed the store's memories with another embedder, in place, and record it.

    Every row whose vector pymem computed from its content is embedded again and updated (one
    memory.update event each, so `pymem verify` stays clean); vectors callers supplied are left
    alone. Each batch is its own transaction: an interrupted run is resumed by running it again.
    Progress goes to standard error. Needs the administrative connection (PYMEM_ADMIN_DSN).

    Example: pymem reembed --embedder e5
    """
    embedder = get_embedder(embedder_name if embedder_name is not None else "e5")
    with open_store() as store:
        report = reembed(store, embedder, batch=batch,
                         progress=lambda done, total: stderr(f"re-embedded {done:,} of {total:,} rows"))
    if as_json:
        echo_json(report.to_json())
        return
    click.echo(f"re-embedded {report.rows:,} rows with {report.embedder} "
               f"({report.pending_before:,} needed it when the run began)")
    click.echo(f"store embedder: {report.recorded}" + ("" if report.complete else " (not complete: run it again)"))


def register(main: click.Group) -> None:
    main.add_command(db)
    main.add_command(reembed_command)
