"""`pymem verify` and `pymem anchor`: check the hash chain, and vouch for it from outside.

Exit codes: 0 clean, 1 tampering found (or nothing signed), 2 usage or connection error.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from .. import PymemError
from ..integrity import anchor_store, audit_chain
from .common import PymemCommandError, echo_json, from_settings, json_option, open_store

if TYPE_CHECKING:
    from ..integrity import CheckpointReport, ReceiptAudit, VerifyReport


def _print_report(report: VerifyReport, label: str) -> None:
    since = getattr(report, "since", None)  # an IncrementalReport: where each tenant started
    for t in report.tenants:
        start = "" if since is None else (" (no checkpoint: in full)" if since.get(t.tenant) is None
                                          else f" since checkpoint seq {since[t.tenant]}")
        click.echo(f"tenant {t.tenant}{start}: {t.entries} entries, {t.rows_checked} live rows, "
                   f"head seq {t.head_seq or 0} hash {t.head_hash or '-'}")
    rate = report.entries / report.seconds if report.seconds > 0 else 0.0
    click.echo(f"{label}checked {report.entries} ledger entries across {len(report.tenants)} tenant(s) "
               f"in {report.seconds:.3f}s ({rate:,.0f} entries/s)")
    bad = report.first_problem
    if bad is None:
        click.echo(f"{label}tampering: none detected")
    else:
        where = f"seq {bad.bad_seq}" if bad.bad_seq is not None else "no ledger seq"
        memory = f", memory {bad.bad_memory_id}" if bad.bad_memory_id else ""
        click.echo(f"{label}TAMPERING DETECTED in tenant {bad.tenant} at {where}{memory}: {bad.problem}")


def _print_receipts(report: ReceiptAudit) -> None:
    if report.checked or report.endings or report.registered_key:
        click.echo(f"receipts: {report.checked} checked, {report.endings} ended"
                   + ("; signatures and anchors intact" if report.clean else ""))
    for f in report.findings:
        where = f" in tenant {f.tenant}" if f.tenant else ""
        what = f": receipt {f.receipt_id}" if f.receipt_id else ""
        version = f" version {f.version}" if f.version is not None else ""
        seq = f" (seq {f.seq})" if f.seq is not None else ""
        # the library speaks of a public key; the command line names its option for it
        problem = f.problem.replace("no public key given", "no --public-key given")
        click.echo(f"RECEIPT PROBLEM{where}{what}{version}{seq}: {problem}")


def _print_checkpoints(report: CheckpointReport) -> None:
    if report.clean:
        click.echo(f"checkpoints: {report.checked} checked, the chain extends every one")
    for f in report.findings:
        click.echo(f"CHECKPOINT MISMATCH in tenant {f.tenant} at seq {f.seq}: {f.problem}")


@click.command()
@click.option("--tenant", default=from_settings("PYMEM_TENANT"),
              help="Verify only this tenant [env: PYMEM_TENANT]; default: every tenant (needs pymem_auditor).")
@click.option("--checkpoints", "checkpoints", metavar="PATH",
              help="Also check that the chain extends every signed checkpoint in PATH (see `pymem anchor`).")
@click.option("--public-key", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="The key checkpoints and convention receipts must be signed with (hex or PEM); default: "
                   "PYMEM_SIGNING_KEY's.")
@click.option("--independent", is_flag=True,
              help="Also recompute every hash in Python from the raw rows, without the database's functions.")
@click.option("--since-checkpoint", "since_checkpoint", is_flag=True,
              help="Verify only from each tenant's newest checkpoint in --checkpoints: the chain since it and the "
                   "rows of memories with an event since it (a tenant without one in full); receipts are left to "
                   "the full verification.")
@click.option("--jobs", type=click.IntRange(1, 16), default=2, show_default=True,
              help="Connections to verify on at once (they read one snapshot); --since-checkpoint uses one.")
@json_option
def verify(tenant: str | None, checkpoints: str | None, public_key: Path | None, independent: bool,
           since_checkpoint: bool, jobs: int, as_json: bool) -> None:
    """Verify the ledger's hash chain, re-hash every live memory (lessons and shared facts among
    them) and check every convention receipt.

    Prints the entries checked and each tenant's head hash, then `tampering: none detected` or the
    first bad seq, the memory it concerns and what is wrong. The database streams the bytes each
    hash covers (from its own hash functions) on --jobs connections and Python hashes them. Each
    convention receipt must carry the installation key's valid signature (the key file, or
    --public-key; the key registered in the database must be the same) and exactly one matching
    anchoring ledger entry; each problem is printed as `RECEIPT PROBLEM` with the receipt's id.
    --checkpoints compares the chain with heads signed earlier outside the database (a
    truncated, rewound or rewritten chain fails there even if the database's own functions were
    replaced); --independent recomputes every hash in Python from the raw rows.

    --since-checkpoint (with --checkpoints) starts from each tenant's newest signed checkpoint:
    it refuses one whose signature fails, checks the entry at its seq still carries its hash, walks
    the chain from there to the head and re-hashes only the rows of memories with an event since,
    in time proportional to what was written since. It does not re-read older rows: a row edited
    outside the chain before the checkpoint is found only by the full verification, the default.
    Exit 0 when clean (also with no data), 1 on a finding, 2 on a usage or connection error.

    Example: pymem verify --tenant acme --checkpoints /srv/pymem/checkpoints.jsonl --independent
    """
    if since_checkpoint and not checkpoints:
        raise click.UsageError("--since-checkpoint needs --checkpoints PATH (where `pymem anchor` signs the heads)")
    try:
        with open_store() as store:
            result = audit_chain(store, tenant or None, independent=independent, checkpoints=checkpoints,
                                 public_key=public_key, jobs=jobs, since_checkpoint=since_checkpoint)
    except PymemError as exc:
        # Anything but a finding is a usage or connection problem: exit 2, never 1.
        raise PymemCommandError(str(exc), exit_code=2) from exc
    if as_json:
        echo_json(result.to_json())
    else:
        _print_report(result.database, "")
        if result.receipts is not None:
            _print_receipts(result.receipts)
        if result.independent is not None:
            _print_report(result.independent, "independent: ")
        if result.checkpoints is not None:
            _print_checkpoints(result.checkpoints)
    if not result.clean:
        raise SystemExit(1)


@click.command()
@click.option("--checkpoints", "checkpoints", required=True, metavar="PATH",
              help="Where to append the signed checkpoints: a file (JSON lines) or SCHEME:TARGET of a sink.")
@click.option("--tenant", default=from_settings("PYMEM_TENANT"),
              help="Anchor only this tenant [env: PYMEM_TENANT]; default: every tenant (administrative login).")
@json_option
def anchor(checkpoints: str, tenant: str | None, as_json: bool) -> None:
    """Sign each tenant's chain head and append it to PATH, outside the database.

    Uses the installation's Ed25519 key (PYMEM_SIGNING_KEY; created, owner-only, on first use).
    Refuses (exit 1, nothing written) when the chain no longer extends an earlier checkpoint in
    PATH or a tenant's head row does not point at its last entry. Run it on a schedule: a forged
    event appended after the newest checkpoint is only caught relative to the next one.

    Example: pymem anchor --checkpoints /srv/pymem/checkpoints.jsonl
    """
    try:
        with open_store() as store:
            result = anchor_store(store, checkpoints, tenant or None)
    except PymemError as exc:
        raise PymemCommandError(str(exc), exit_code=2) from exc
    if as_json:
        echo_json(result.to_json())
    elif result.clean:
        for cp in result.anchored:
            click.echo(f"tenant {cp.tenant}: seq {cp.seq} hash {cp.chain_hash}")
        click.echo(f"anchored {len(result.anchored)} tenant head(s) in {checkpoints} (key {result.public_key[:16]}…)")
    else:
        _print_checkpoints(result.earlier)
        click.echo("nothing anchored")
    if not result.clean:
        raise SystemExit(1)


def register(main: click.Group) -> None:
    main.add_command(verify)
    main.add_command(anchor)


__all__ = ["verify", "anchor", "register", "PymemCommandError"]
