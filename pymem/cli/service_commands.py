"""`pymem serve`, `pymem mcp` and `pymem token`: the memory service over HTTP and MCP, and trial tokens.

They need the `server` extra (pip install 'pymem-pg[server]'); without it they say so and exit 2.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from .. import Context
from .common import PymemCommandError, command_settings, context_options, from_settings, handle_errors


def _service(name: str) -> Any:
    """A name of the server extra, looked up when a command runs (its import needs that extra)."""
    import pymem

    try:
        return getattr(pymem, name)
    except ImportError as exc:
        raise PymemCommandError(str(exc), exit_code=2) from exc


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=click.IntRange(1, 65535), default=8080, show_default=True, help="Port to listen on.")
@click.option("--pool-size", type=click.IntRange(1, 200), default=10, show_default=True,
              help="Database connections the service keeps.")
@click.option("--max-request-bytes", type=click.IntRange(1024, 1 << 30), default=16 * 1024 * 1024,
              show_default=True, help="Largest request body accepted (413 above it).")
@click.option("--tenant-calls", type=click.IntRange(0, 10_000), default=None,
              help="Most concurrent calls of one tenant; more get 429 tenant_busy at once "
                   "[default: a quarter of --pool-size; 0: no limit].")
@click.option("--heavy-calls", type=click.IntRange(0, 10_000), default=None,
              help="Most calls with many records or long texts run at once among all tenants; more wait "
                   "for a slot up to --pool-wait, then 503 pool_saturated [default: half the cores; 0: no bound].")
@click.option("--lock-timeout", "lock_timeout_ms", type=click.IntRange(1, 86_400_000), default=None,
              help="Milliseconds a call waits for a row lock before 503 lock_timeout "
                   "[env: PYMEM_LOCK_TIMEOUT_MS; default 5000].")
@click.option("--statement-timeout", "statement_timeout_ms", type=click.IntRange(1, 86_400_000), default=None,
              help="Milliseconds one statement of a call may run before 503 statement_timeout "
                   "[env: PYMEM_STATEMENT_TIMEOUT_MS; default 30000].")
@click.option("--pool-wait", type=click.FloatRange(0.1, 600), default=None,
              help="Seconds a call waits for a free connection before 503 pool_saturated "
                   "[env: PYMEM_POOL_WAIT; default 5].")
@click.option("--metrics/--no-metrics", default=False, envvar="PYMEM_METRICS", show_default=True,
              help="Serve GET /metrics (Prometheus text: requests, latency, pool, admissions, deliveries, "
                   "verifications); it takes no token, so expose it to the scraper only [env: PYMEM_METRICS].")
@click.option("--log-format", type=click.Choice(["text", "json"]), default="text", envvar="PYMEM_LOG_FORMAT",
              show_default=True, help="Log lines as text, or as one JSON object per line [env: PYMEM_LOG_FORMAT].")
@handle_errors
def serve_command(host: str, port: int, pool_size: int, max_request_bytes: int, tenant_calls: int | None,
                  heavy_calls: int | None, lock_timeout_ms: int | None, statement_timeout_ms: int | None,
                  pool_wait: float | None, metrics: bool, log_format: str) -> None:
    """Serve the memory service over HTTP, with MCP at /mcp; every call carries a signed token.

    Routes: POST /v1/handshake, POST /v1/call ({"verb", "args", "idempotency_key"}), GET /healthz,
    GET /readyz, GET /openapi.json, and the MCP endpoint /mcp (streamable HTTP). Tokens are
    verified with PYMEM_JWT_KEY (HS256, at least 32 bytes) or PYMEM_JWT_PUBLIC_KEY (RS256/EdDSA),
    with PYMEM_JWT_AUDIENCE and PYMEM_JWT_ISSUER checked when set; the service refuses to start
    without a key. The token's claims are the call's tenant, actor, adapter and scope.

    Under load it fails fast rather than queue: a tenant beyond --tenant-calls gets 429
    tenant_busy; calls with many records or long texts run at most --heavy-calls at once, so they
    leave CPU for every tenant's small calls; a call that finds no free connection (or no slot for a
    heavy call) within --pool-wait 503 pool_saturated, a
    row lock held past --lock-timeout 503 lock_timeout, all with Retry-After. /readyz answers
    at once from a background probe; with the embedded Postgres (no PYMEM_DSN) that probe also
    restarts the server if it dies.

    --metrics adds GET /metrics: requests by route, verb, status and error code, their latency,
    the pool's connections in use and calls waiting, admissions by decision, deliveries and
    verifications, never a tenant or content in a label. --log-format json writes one JSON object
    per line (time, level, logger, message and the access log's fields), never memory content.

    Example: pymem serve --host 127.0.0.1 --port 8080 --tenant-calls 2
    """
    import dataclasses

    settings = _service("Settings").from_env()
    overrides = {k: v for k, v in (("lock_timeout_ms", lock_timeout_ms), ("statement_timeout_ms", statement_timeout_ms),
                                   ("pool_wait", pool_wait)) if v is not None}
    _service("serve")(host, port, settings=dataclasses.replace(settings, **overrides), pool_size=pool_size,
                      max_body=max_request_bytes, per_tenant=tenant_calls, heavy_calls=heavy_calls, metrics=metrics,
                      log_format=log_format)


@click.command("mcp")
@context_options
@handle_errors
def mcp_command(ctx: Context) -> None:
    """Serve the MCP tools over stdio, acting in this command's context.

    For agent hosts that start pymem as a subprocess: tools remember, recall, deliver, get, list,
    forget (erase), supersede; add_memories, search_memory, list_memories, delete_memories; and
    file_lesson, list_lessons, lessons_for_task, file_review_correction, active_conventions,
    retire_convention, publish_fact, subscribe_facts. The tenant, actor, adapter and scope are
    the command's (--tenant ... or PYMEM_*); tool arguments cannot change them.

    Example: pymem mcp --tenant acme --actor agent-1 --adapter claude-code
    """
    _service("serve_mcp_stdio")(ctx)


@click.command("token")
@click.option("--ttl", type=click.IntRange(1, 366 * 86400), default=3600, show_default=True,
              help="Seconds the token is valid.")
@click.option("--audience", default=from_settings("PYMEM_JWT_AUDIENCE"), help="aud claim [env: PYMEM_JWT_AUDIENCE].")
@click.option("--issuer", default=from_settings("PYMEM_JWT_ISSUER"), help="iss claim [env: PYMEM_JWT_ISSUER].")
@click.option("--private-key", "private_key", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Sign with this PEM private key (RS256 or EdDSA) instead of PYMEM_JWT_KEY.")
@click.option("--role", type=click.Choice(["operator", "auditor"]), default=None,
              help="The memory inspector's role claim: an auditor reads the audit views and no content "
                   "[default: none, an operator's token when it names no adapter].")
@context_options
@handle_errors
def token_command(ttl: int, audience: str | None, issuer: str | None, private_key: Path | None, role: str | None,
                  ctx: Context) -> None:
    """Print a signed token for a trial: the context options become its claims.

    Signs with PYMEM_JWT_KEY (HS256), the service's own key, or with --private-key. For production,
    let your identity provider issue tokens with the same claims (tenant, actor, adapter, scope).

    Example: pymem token --tenant acme --actor alice --ttl 600
    """
    if not ctx.actor:
        raise click.UsageError("an actor is required: pass --actor or set PYMEM_ACTOR")
    if private_key is not None:
        key: Any = private_key.read_bytes()
    else:
        key = command_settings().jwt_key
        if not key:
            raise click.UsageError("set PYMEM_JWT_KEY (the service's HS256 key) or pass --private-key")
    token = _service("mint_token")(key, tenant=ctx.tenant, actor=ctx.actor, adapter=ctx.adapter,
                                   scope=dict(ctx.scope) or None, ttl=ttl, audience=audience, issuer=issuer,
                                   role=role)
    click.echo(token)


def register(main: click.Group) -> None:
    main.add_command(serve_command)
    main.add_command(mcp_command)
    main.add_command(token_command)
