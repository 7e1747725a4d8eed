"""`pymem quarantine list|release|reject`: the notes the write gate held for review.

A held note is read nowhere else (no recall, delivery, search or export returns it). Releasing or
rejecting one is an operator's decision: the database refuses it to a context acting as an
adapter (--adapter, or a login bound to one), so the agent that wrote a note cannot release it.
"""

from __future__ import annotations

import click

from .. import Context
from ..admission import list_quarantined, reject_quarantined, release_quarantined
from .common import context_options, echo_json, handle_errors, json_option, open_store, table


@click.group("quarantine")
def quarantine_group() -> None:
    """The notes the write gate held for review: list them, release or reject one (operator only)."""


@quarantine_group.command("list")
@click.option("--status", type=click.Choice(["held", "released", "rejected", "all"]), default="held", show_default=True,
              help="Which notes: still held, released, rejected, or all.")
@click.option("--limit", type=click.IntRange(1, 1000), default=100, show_default=True, help="Oldest N.")
@context_options
@json_option
@handle_errors
def quarantine_list(status: str, limit: int, ctx: Context, as_json: bool) -> None:
    """List the held notes this context may read, oldest first, with why they were held.

    The JSON holds each note's content while it is held (a released note's lives in memory, a
    rejected one's is gone); the table shows its reason and score only.

    Example: pymem quarantine list --tenant acme --json
    """
    with open_store() as store:
        notes = list_quarantined(store.bind(ctx), status=None if status == "all" else status, limit=limit)
    if as_json:
        echo_json([n.to_json() for n in notes])
        return
    table([{**n.to_json(), "held_at": n.held_at.isoformat(timespec="seconds"),
            "score": f"{n.score:.3f}" if n.score is not None else None} for n in notes],
          ["id", "status", "signature", "score", "origin", "source_adapter", "held_at", "held_by"])


@quarantine_group.command("release")
@click.argument("note_id", metavar="ID")
@click.option("--reason", required=True, help="Why it may be believed (chained into the ledger).")
@context_options
@json_option
@handle_errors
def quarantine_release(note_id: str, reason: str, ctx: Context, as_json: bool) -> None:
    """Release held note ID into memory, as its writer wrote it (an operator context only).

    Example: pymem quarantine release --tenant acme q-17 --reason "confirmed with finance"
    """
    with open_store() as store:
        seq = release_quarantined(store.bind(ctx), note_id, reason)
    if as_json:
        echo_json({"id": note_id, "status": "released", "seq": seq})
    else:
        click.echo(f"released {note_id} into memory; ledger seq {seq}")


@quarantine_group.command("reject")
@click.argument("note_id", metavar="ID")
@click.option("--reason", required=True, help="Why it is rejected (chained into the ledger).")
@context_options
@json_option
@handle_errors
def quarantine_reject(note_id: str, reason: str, ctx: Context, as_json: bool) -> None:
    """Reject held note ID: its content is dropped, its hash stays (an operator context only).

    Example: pymem quarantine reject --tenant acme q-17 --reason "payment redirection"
    """
    with open_store() as store:
        seq = reject_quarantined(store.bind(ctx), note_id, reason)
    if as_json:
        echo_json({"id": note_id, "status": "rejected", "seq": seq})
    else:
        click.echo(f"rejected {note_id}; ledger seq {seq}")


def register(main: click.Group) -> None:
    main.add_command(quarantine_group)


__all__ = ["quarantine_group", "register"]
