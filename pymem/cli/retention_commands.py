"""`pymem retention`, `pymem purge` and `pymem erase-actor`: how long memories live, the purge of
expired ones, and the erasure of a person."""

from __future__ import annotations

import click

from .. import Context
from ..admin import purge_expired, purge_expired_all, retention_policy, set_retention
from ..integrity import erase_actor
from .common import context_options, echo_json, handle_errors, json_option, open_store, table


def _ttl_text(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:g}s"


@click.group("retention")
def retention_group() -> None:
    """The tenant's retention policy: the default and maximum time-to-live of its memories."""


@retention_group.command("show")
@context_options
@json_option
@handle_errors
def retention_show(ctx: Context, as_json: bool) -> None:
    """Show the tenant's retention policy (none: memories without a ttl never expire).

    Example: pymem retention show --tenant acme
    """
    with open_store() as store:
        policy = retention_policy(store.bind(ctx))
    if as_json:
        echo_json(None if policy is None else policy.to_json())
        return
    if policy is None:
        click.echo(f"tenant {ctx.tenant}: no retention policy (memories without a ttl never expire)")
        return
    data = policy.to_json()
    click.echo(f"tenant {ctx.tenant}: default ttl {_ttl_text(data['default_ttl_seconds'])}, "
               f"maximum ttl {_ttl_text(data['max_ttl_seconds'])} (set {data['set_at']} by {data['set_by']})")


@retention_group.command("set")
@click.option("--default-ttl", type=click.FloatRange(min=0, min_open=True), metavar="SECONDS",
              help="The ttl of a memory whose writer names none [default: none, it never expires].")
@click.option("--max-ttl", type=click.FloatRange(min=0, min_open=True), metavar="SECONDS",
              help="The longest ttl any writer may name (a longer one is refused) [default: no limit].")
@context_options
@json_option
@handle_errors
def retention_set(default_ttl: float | None, max_ttl: float | None, ctx: Context, as_json: bool) -> None:
    """Set the tenant's retention policy (neither option: remove it). An operator's act: refused
    for a context acting as an adapter or confined to a scope. Memories already written keep
    their expiry until their next write; the change is a ledger event.

    Example: pymem retention set --tenant acme --default-ttl 2592000 --max-ttl 31536000
    """
    with open_store() as store:
        seq = set_retention(store.bind(ctx), default_ttl=default_ttl, max_ttl=max_ttl)
    if as_json:
        echo_json({"default_ttl_seconds": default_ttl, "max_ttl_seconds": max_ttl, "ledger_seq": seq})
        return
    click.echo(f"tenant {ctx.tenant}: default ttl {_ttl_text(default_ttl)}, maximum ttl {_ttl_text(max_ttl)}; "
               f"ledger seq {seq}")


@click.command("purge")
@click.option("--all-tenants", is_flag=True,
              help="Purge every tenant, with the administrative login (as pymem.purge_expired_all() does for a "
                   "scheduler); then no --tenant is needed.")
@click.option("--tenant", envvar="PYMEM_TENANT", help="Tenant to purge [env: PYMEM_TENANT].")
@click.option("--actor", envvar="PYMEM_ACTOR", help="Acting user or agent id [env: PYMEM_ACTOR].")
@click.option("--adapter", envvar="PYMEM_ADAPTER",
              help="Source adapter; unset = operator (an adapter purges only its own memories) "
                   "[env: PYMEM_ADAPTER].")
@json_option
@handle_errors
def purge_command(all_tenants: bool, tenant: str | None, actor: str | None, adapter: str | None,
                  as_json: bool) -> None:
    """Delete expired memories: each a ledger event (its hash stays in the chain, its content goes),
    so `pymem verify` stays clean. Expired memories are already gone from every read; the purge
    reclaims their rows.

    Example: pymem purge --tenant acme
    """
    if all_tenants:
        if click.get_current_context().get_parameter_source("tenant") == click.core.ParameterSource.COMMANDLINE:
            raise click.UsageError("--all-tenants purges every tenant: leave out --tenant")
        with open_store() as store:
            totals = purge_expired_all(store)
        if as_json:
            echo_json({"tenants": totals, "purged": sum(totals.values())})
            return
        table([{"tenant": k, "purged": v} for k, v in totals.items()], ["tenant", "purged"])
        click.echo(f"purged {sum(totals.values())} expired memories across {len(totals)} tenant(s)")
        return
    if not tenant:
        raise click.UsageError("a tenant is required: pass --tenant (or --all-tenants)")
    ctx = Context(tenant=tenant, actor=actor or None, adapter=adapter or None)
    with open_store() as store:
        purged = purge_expired(store.bind(ctx))
    if as_json:
        echo_json({"tenant": tenant, "purged": purged})
        return
    click.echo(f"purged {purged} expired memories of tenant {tenant}")


@click.command("erase-actor")
@click.argument("actor_id", metavar="ACTOR")
@click.option("--reason", required=True, help="Why (kept in the ledger; 1-300 characters; must not name the person).")
@context_options
@json_option
@handle_errors
def erase_actor_command(actor_id: str, reason: str, ctx: Context, as_json: bool) -> None:
    """Erase a person from the tenant: every memory ACTOR wrote or that is about them (their subject
    key) is deleted, their idempotency records too, and the link between their id and the
    pseudonym the ledger records them under is destroyed. No row names them afterwards, and the
    chain still verifies. An operator's act (no --adapter, no --scope).

    Example: pymem erase-actor alice@example.com --tenant acme --actor dpo --reason "data subject request 2026-118"
    """
    with open_store() as store:
        done = erase_actor(store.bind(ctx), actor_id, reason)
    if as_json:
        echo_json(done.to_json())
        return
    click.echo(f"erased: {done.memories} memories, {done.idempotency_keys} idempotency records; "
               f"{done.ledger_entries} ledger entries now name nobody ({done.legacy_entries} sealed); "
               f"actor.erased at ledger seq {done.seq}")


def register(main: click.Group) -> None:
    main.add_command(retention_group)
    main.add_command(purge_command)
    main.add_command(erase_actor_command)


__all__ = ["register"]
