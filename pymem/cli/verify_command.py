"""`pymem verify`: check the hash chain and every live row; exit 0 clean, 1 tampering, 2 error."""

from __future__ import annotations

import click

from .. import PymemError, verify_store
from .common import PymemCommandError, echo_json, json_option, open_store


@click.command()
@click.option("--tenant", envvar="PYMEM_TENANT",
              help="Verify only this tenant [env: PYMEM_TENANT]; default: every tenant (needs pymem_auditor).")
@json_option
def verify(tenant: str | None, as_json: bool) -> None:
    """Verify the ledger's hash chain and re-hash every live memory.

    Prints the entries checked and each tenant's head hash (anchor it outside the database to
    detect a rewritten tail), then `tampering: none detected` or the first bad seq, the memory
    it concerns and what is wrong. Exit 0 when clean (also with no data), 1 on a violation,
    2 on a usage or connection error.

    Example: pymem verify --tenant acme
    """
    try:
        with open_store() as store:
            report = verify_store(store, tenant or None)
    except PymemError as exc:
        # Anything but a finding is a usage or connection problem: exit 2, never 1.
        raise PymemCommandError(str(exc), exit_code=2) from exc
    if as_json:
        echo_json(report.to_json())
    else:
        for t in report.tenants:
            click.echo(f"tenant {t.tenant}: {t.entries} entries, {t.rows_checked} live rows, "
                       f"head seq {t.head_seq or 0} hash {t.head_hash or '-'}")
        rate = report.entries / report.seconds if report.seconds > 0 else 0.0
        click.echo(f"checked {report.entries} ledger entries across {len(report.tenants)} tenant(s) "
                   f"in {report.seconds:.3f}s ({rate:,.0f} entries/s)")
        bad = report.first_problem
        if bad is None:
            click.echo("tampering: none detected")
        else:
            where = f"seq {bad.bad_seq}" if bad.bad_seq is not None else "no ledger seq"
            memory = f", memory {bad.bad_memory_id}" if bad.bad_memory_id else ""
            click.echo(f"TAMPERING DETECTED in tenant {bad.tenant} at {where}{memory}: {bad.problem}")
    if not report.clean:
        raise SystemExit(1)


def register(main: click.Group) -> None:
    main.add_command(verify)


__all__ = ["verify", "register", "PymemCommandError"]
