"""`pymem verify` and `pymem anchor`: check the hash chain, and vouch for it from outside.

Exit codes: 0 clean, 1 tampering found (or nothing signed), 2 usage or connection error.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

import click

from .common import PymemCommandError, echo_json, json_option, open_store


@contextmanager
def _connection(store, tenant: str | None):
    """The app's connection for one tenant, the administrative one for every tenant."""
    if tenant:
        with store.pool.connection() as conn:
            yield conn
    else:
        with store.admin_connection() as conn:
            yield conn


def _print_report(report, label: str) -> None:
    for t in report.tenants:
        click.echo(f"tenant {t.tenant}: {t.entries} entries, {t.rows_checked} live rows, "
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


def _print_checkpoints(report) -> None:
    if report.clean:
        click.echo(f"checkpoints: {report.checked} checked, the chain extends every one")
    for f in report.findings:
        click.echo(f"CHECKPOINT MISMATCH in tenant {f.tenant} at seq {f.seq}: {f.problem}")


def _trusted_key(settings, public_key: Path | None) -> str:
    from ..integrity.signing import load_key, load_public_hex, public_bytes

    if public_key is not None:
        return public_bytes(load_public_hex(public_key.read_text(encoding="utf-8"))).hex()
    return load_key(settings.signing_key_path).public_hex


@click.command()
@click.option("--tenant", envvar="PYMEM_TENANT",
              help="Verify only this tenant [env: PYMEM_TENANT]; default: every tenant (needs pymem_auditor).")
@click.option("--checkpoints", "checkpoints", metavar="PATH",
              help="Also check that the chain extends every signed checkpoint in PATH (see `pymem anchor`).")
@click.option("--public-key", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="The key checkpoints must be signed with (hex or PEM); default: PYMEM_SIGNING_KEY's.")
@click.option("--independent", is_flag=True,
              help="Also recompute every hash in Python from the raw rows, without the database's functions.")
@json_option
def verify(tenant: str | None, checkpoints: str | None, public_key: Path | None, independent: bool,
           as_json: bool) -> None:
    """Verify the ledger's hash chain and re-hash every live memory.

    Prints the entries checked and each tenant's head hash, then `tampering: none detected` or the
    first bad seq, the memory it concerns and what is wrong. --checkpoints compares the chain with
    heads signed earlier outside the database (a truncated, rewound or rewritten chain fails
    there even if the database's own functions were replaced); --independent recomputes every
    hash in Python. Exit 0 when clean (also with no data), 1 on a finding, 2 on a usage or
    connection error.

    Example: pymem verify --tenant acme --checkpoints /srv/pymem/checkpoints.jsonl --independent
    """
    from ..errors import PymemError
    from ..integrity.checkpoints import check_checkpoints, open_sink
    from ..integrity.independent import verify_independently
    from ..verify import verify_store

    out: dict = {}
    try:
        with open_store() as store:
            report = verify_store(store, tenant or None)
            out["sql"] = report
            if independent:
                with _connection(store, tenant or None) as conn:
                    out["independent"] = verify_independently(conn, tenant or None)
            if checkpoints:
                trusted = _trusted_key(store.settings, public_key)
                with _connection(store, tenant or None) as conn:
                    out["checkpoints"] = check_checkpoints(conn, open_sink(checkpoints).read(),
                                                           trusted_key=trusted, tenant=tenant or None)
    except PymemError as exc:
        # Anything but a finding is a usage or connection problem: exit 2, never 1.
        raise PymemCommandError(str(exc), exit_code=2) from exc
    clean = all(r.clean for r in out.values())
    if as_json:
        body = report.to_json()
        if "independent" in out:
            body["independent"] = out["independent"].to_json()
        if "checkpoints" in out:
            body["checkpoints"] = out["checkpoints"].to_json()
        body["clean"] = clean
        echo_json(body)
    else:
        _print_report(report, "")
        if "independent" in out:
            _print_report(out["independent"], "independent: ")
        if "checkpoints" in out:
            _print_checkpoints(out["checkpoints"])
    if not clean:
        raise SystemExit(1)


@click.command()
@click.option("--checkpoints", "checkpoints", required=True, metavar="PATH",
              help="Where to append the signed checkpoints: a file (JSON lines) or SCHEME:TARGET of a sink.")
@click.option("--tenant", envvar="PYMEM_TENANT",
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
    from ..errors import PymemError
    from ..integrity.checkpoints import anchor as anchor_heads
    from ..integrity.checkpoints import open_sink
    from ..integrity.signing import load_or_create_key

    try:
        with open_store() as store:
            key = load_or_create_key(store.settings.signing_key_path)
            with _connection(store, tenant or None) as conn:
                made, earlier = anchor_heads(conn, open_sink(checkpoints), key, tenant=tenant or None)
    except PymemError as exc:
        raise PymemCommandError(str(exc), exit_code=2) from exc
    if as_json:
        echo_json({"anchored": [cp.__dict__ for cp in made], "earlier": earlier.to_json(),
                   "public_key": key.public_hex})
    else:
        if earlier.clean:
            for cp in made:
                click.echo(f"tenant {cp.tenant}: seq {cp.seq} hash {cp.chain_hash}")
            click.echo(f"anchored {len(made)} tenant head(s) in {checkpoints} (key {key.public_hex[:16]}…)")
        else:
            _print_checkpoints(earlier)
            click.echo("nothing anchored")
    if not earlier.clean:
        raise SystemExit(1)


def register(main: click.Group) -> None:
    main.add_command(verify)
    main.add_command(anchor)


__all__ = ["verify", "anchor", "register", "PymemCommandError"]
