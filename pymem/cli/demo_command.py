"""`pymem demo`: a guided tour of what pymem guarantees, on the embedded Postgres by default."""

from __future__ import annotations

import click

from .common import handle_errors


@click.command()
@handle_errors
def demo() -> None:
    """Run the guided demo: isolation, adapter tagging, tamper detection, admission, delivery.

    Runs in its own database on the embedded Postgres (your memories are untouched); with
    PYMEM_DSN set it runs against that server with fresh demo tenants.

    Example: pymem demo
    """
    from ..tools.demo import run_demo

    ok = run_demo(click.echo)
    if not ok:
        raise SystemExit(1)


def register(main: click.Group) -> None:
    main.add_command(demo)
