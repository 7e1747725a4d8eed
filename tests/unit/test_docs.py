"""The README documents every command, and every command's help ends with an example."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest

from pymem.cli import main

README = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")


def _commands(group: click.Group, prefix: str = "pymem") -> list[tuple[str, click.Command]]:
    out = []
    for name, cmd in sorted(group.commands.items()):
        full = f"{prefix} {name}"
        if isinstance(cmd, click.Group):
            out.extend(_commands(cmd, full))
        else:
            out.append((full, cmd))
    return out


COMMANDS = _commands(main)


def test_there_are_commands():
    assert len(COMMANDS) >= 10


@pytest.mark.parametrize("name,cmd", COMMANDS, ids=[n for n, _ in COMMANDS])
def test_command_is_in_the_readme(name, cmd):
    assert f"`{name}" in README, f"{name} is not documented in README.md"


@pytest.mark.parametrize("name,cmd", COMMANDS, ids=[n for n, _ in COMMANDS])
def test_help_ends_with_an_example(name, cmd):
    text = (cmd.help or "").strip()
    last = text.splitlines()[-1].strip() if text else ""
    assert re.match(r"^Example: pymem ", last), f"{name}'s help does not end with an example"


def test_quickstart_has_exactly_two_commands_and_ci_runs_the_second():
    quick = README.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)```", quick, flags=re.S)
    commands = [line for b in blocks for line in b.strip().splitlines() if line.strip()]
    assert len(commands) == 2, commands
    ci = (Path(__file__).resolve().parents[2] / ".ci" / "run").read_text()
    assert commands[1] in ci.splitlines(), "the CI script must run the README's test command verbatim"
