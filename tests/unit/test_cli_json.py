"""The CLI's output contract, walked over every click command: `--json` prints one JSON document
(an object, or an array for a list), except the commands that stream, which print JSON Lines and
say so in their --help; a command without --json is one whose output is not a result to parse."""

from __future__ import annotations

import click

from pymem.cli import main
from pymem.cli.common import JSON_DOCUMENT_HELP, JSON_LINES_HELP

#: Commands that stream (JSON Lines, as each item comes): a live subscription, a file judged line by line.
STREAMING = {"facts subscribe": JSON_LINES_HELP, "remember": "with --file, JSON Lines"}
#: Commands with no --json: they change the installation, run a process, or write the data format itself.
NO_JSON = {"db upgrade", "db stop", "db register-key", "db unbind-login", "demo", "export", "serve", "mcp", "token"}


def _commands(group: click.Group, prefix: str = ""):
    for name, cmd in sorted(group.commands.items()):
        path = f"{prefix}{name}"
        if isinstance(cmd, click.Group):
            yield from _commands(cmd, path + " ")
        else:
            yield path, cmd


def _json_help(cmd: click.Command) -> str | None:
    for param in cmd.params:
        if isinstance(param, click.Option) and "--json" in param.opts:
            return param.help or ""
    return None


def test_every_command_states_its_json_contract():
    seen, wrong = set(), []
    for path, cmd in _commands(main):
        seen.add(path)
        helped = _json_help(cmd)
        if path in NO_JSON:
            if helped is not None:
                wrong.append((path, "has --json but is listed as without"))
        elif helped is None:
            wrong.append((path, "has no --json"))
        elif path in STREAMING:
            if STREAMING[path] not in helped:
                wrong.append((path, helped))
        elif helped != JSON_DOCUMENT_HELP:
            wrong.append((path, helped))
    assert wrong == []
    assert set(STREAMING) | NO_JSON <= seen  # no stale entry
    assert len(seen) > 40


def test_the_streaming_commands_say_so_in_their_help():
    from click.testing import CliRunner

    for path in STREAMING:
        out = CliRunner().invoke(main, [*path.split(), "--help"]).output
        assert "JSON Lines" in " ".join(out.split()), path
