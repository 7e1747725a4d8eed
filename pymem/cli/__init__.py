"""The `pymem` command line: each command is a thin wrapper over one library call."""

from __future__ import annotations

import warnings

import click

warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="pymem-pg")
def main() -> None:
    """pymem: long-term memory for AI agents, in Postgres.

    With no PYMEM_DSN, pymem runs an embedded Postgres (with pgvector) in PYMEM_HOME.
    """


def _register() -> None:
    from . import (
        bench_command,
        data_commands,
        db_commands,
        delivery_commands,
        demo_command,
        eval_command,
        lesson_commands,
        memory_commands,
        quarantine_commands,
        retention_commands,
        service_commands,
        verify_command,
    )

    for module in (db_commands, verify_command, demo_command, memory_commands, quarantine_commands, delivery_commands,
                   lesson_commands, data_commands, bench_command, eval_command, service_commands, retention_commands):
        module.register(main)


_register()
