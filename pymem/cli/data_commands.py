"""`pymem import`, `export`, `get`, `delete` and `search`: the storage verbs on the command line."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from .. import Context, ContextError, InvalidArguments
from ..admin import check_file, export_records, import_file
from ..admission import import_gated
from ..context import parse_scope_pairs
from .common import context_options, echo_json, handle_errors, is_tty, json_option, open_store, stderr, table


def _short(value: Any, width: int = 60) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _readable(record: dict[str, Any]) -> dict[str, Any]:
    """A record for people: vectors summarised instead of printed in full."""
    out = {}
    for key, value in record.items():
        if key in ("embedding", "vector") and isinstance(value, list):
            out[key] = f"<{len(value)} numbers>"
        else:
            out[key] = value
    return out


@click.command("import")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--batch-size", type=click.IntRange(1, 10_000), default=500, show_default=True,
              help="Records per transaction (and per idempotency key).")
@click.option("--gate", is_flag=True,
              help="Judge each record's text as the write gate does: instruction-shaped ones are refused "
                   "(audited), doubtful ones held in quarantine, the rest imported.")
@context_options
@json_option
@handle_errors
def import_command(file: Path, batch_size: int, gate: bool, ctx: Context, as_json: bool) -> None:
    """Import chunk records from a JSON Lines file (one chunk object per line).

    The whole file is checked first (a malformed line stops the import with its line number,
    nothing written). Each batch commits on its own under an idempotency key derived from the
    file's content and the batch's position: re-run the same command after an interruption and
    the finished batches are replayed, the rest written, nothing duplicated. Records are stored
    as given (a restore); with --gate, notes from elsewhere pass the gate's content check first.

    Example: pymem import --tenant acme memories.jsonl
    """
    with open_store() as store:
        mem = store.bind(ctx)
        run = import_gated if gate else import_file
        if is_tty() and not as_json:
            checked = check_file(mem, file, batch_size)
            with click.progressbar(length=checked[1], label="importing", file=sys.stderr) as bar:
                report = run(mem, file, batch_size=batch_size, checked=checked,
                             on_batch=lambda _i, n, _replayed: bar.update(n))
        else:
            report = run(mem, file, batch_size=batch_size)
    if as_json:
        echo_json(report.as_dict())
    else:
        click.echo(f"imported {report.records - report.quarantined - report.refused} records in {report.batches} "
                   f"batches ({report.written_batches} written, {report.replayed_batches} already done)"
                   + (f"; {report.quarantined} quarantined, {report.refused} refused" if gate else ""))


@click.command("export")
@click.option("--output", "-o", type=click.Path(dir_okay=False, writable=True, path_type=Path),
              help="Write to this file instead of standard output.")
@context_options
@handle_errors
def export_command(output: Path | None, ctx: Context) -> None:
    """Export every visible chunk record as JSON Lines, verbatim, in id order.

    The output imports back with `pymem import` to the same records.

    Example: pymem export --tenant acme --output memories.jsonl
    """
    with open_store() as store:
        mem = store.bind(ctx)
        if output is None:
            count = export_records(mem, sys.stdout)
        else:
            partial = output.with_name(output.name + ".partial")
            with partial.open("w", encoding="utf-8") as fh:
                count = export_records(mem, fh)
            partial.replace(output)  # a complete file or none
    if output is not None:
        stderr(f"exported {count} records to {output}")


@click.command("get")
@click.argument("memory_id", metavar="ID")
@context_options
@json_option
@handle_errors
def get_command(memory_id: str, ctx: Context, as_json: bool) -> None:
    """Show one chunk record (with its revision); exit 1 if there is none.

    Example: pymem get --tenant acme chunk-42 --json
    """
    with open_store() as store:
        record = store.bind(ctx).get(memory_id)
    if record is None:
        if as_json:
            echo_json(None)
        else:
            stderr(f"no record {memory_id!r} in this context")
        raise SystemExit(1)
    if as_json:
        echo_json(record)
    else:
        click.echo(json.dumps(_readable(record), ensure_ascii=False, indent=2, sort_keys=True))


@click.command("delete")
@click.argument("ids", nargs=-1, required=True, metavar="ID...")
@context_options
@json_option
@handle_errors
def delete_command(ids: tuple[str, ...], ctx: Context, as_json: bool) -> None:
    """Delete chunk records by id, in one transaction (each delete is a ledger event).

    Example: pymem delete --tenant acme chunk-41 chunk-42
    """
    with open_store() as store:
        result = store.bind(ctx).delete_many(list(ids))
    if as_json:
        echo_json(result)
    else:
        click.echo(f"deleted {result['deleted']} of {len(set(ids))} ids")


def _read_vector(source: str) -> Any:
    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
    except OSError as exc:
        raise InvalidArguments(f"cannot read the vector file: {exc.strerror}") from None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidArguments(f"the vector file is not JSON ({exc.msg}); expected an array of numbers") from None
    if isinstance(value, dict):  # a chunk record works too
        value = value.get("embedding", value.get("vector", value))
    return value


@click.command("search")
@click.option("--vector-file", required=True, metavar="FILE|-",
              help="The query vector as a JSON array of numbers ('-' reads standard input).")
@click.option("--top-k", type=int, default=10, show_default=True, help="How many results (1-1000).")
@click.option("--scope-filter", "scope_filter", multiple=True, metavar="AXIS=VALUE",
              help="Only chunks whose scope has this axis value; repeatable.")
@context_options
@json_option
@handle_errors
def search_command(vector_file: str, top_k: int, scope_filter: tuple[str, ...], ctx: Context,
                   as_json: bool) -> None:
    """Find the chunks closest to a vector (cosine), best first.

    top_k counts only chunks this context may see and that match --scope-filter. --json prints
    a JSON array of {chunk_id, score, revision, chunk}.

    Example: pymem search --tenant acme --vector-file query.json --top-k 5 --scope-filter agent=a1
    """
    vector = _read_vector(vector_file)
    try:
        scope = parse_scope_pairs(scope_filter)
    except ContextError as exc:
        raise InvalidArguments(str(exc).replace("scope", "scope filter", 1)) from None
    with open_store() as store:
        hits = store.bind(ctx).search(vector, top_k=top_k, scope_filter=scope)
    if as_json:
        echo_json([{"chunk_id": h["chunk_id"], "score": h["score"], "revision": h["revision"], "chunk": h["chunk"]}
                   for h in hits])
    else:
        table([{"rank": i, "chunk_id": h["chunk_id"], "score": f"{h['score']:.4f}", "revision": h["revision"],
                "recalled_view": _short(_readable(h["recalled_view"]) if isinstance(h["recalled_view"], dict)
                                        else h["recalled_view"])}
               for i, h in enumerate(hits, start=1)],
              ["rank", "chunk_id", "score", "revision", "recalled_view"])


def register(main: click.Group) -> None:
    for command in (import_command, export_command, get_command, delete_command, search_command):
        main.add_command(command)


__all__ = ["register"]
