"""The command-line guide documents every command, every command's help ends with an example, and the
README stays a front door: short, with the two Quickstart commands verbatim."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest

from pymem.cli import main

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
CLI_GUIDE = (ROOT / "docs" / "reference" / "cli.md").read_text(encoding="utf-8")
#: The README's Quickstart, exactly (CI runs the second).
QUICKSTART = ('pip install -e ".[test]" && pymem demo', 'pip install -e ".[test]" && python -m pytest')


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
def test_command_is_in_the_cli_guide(name, cmd):
    assert f"`{name}" in CLI_GUIDE, f"{name} is not in the guide's table, docs/reference/cli.md"


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
    assert tuple(commands) == QUICKSTART
    ci = (Path(__file__).resolve().parents[2] / ".ci" / "run").read_text()
    assert commands[1] in ci.splitlines(), "the CI script must run the README's test command verbatim"


def test_the_readme_is_at_most_200_lines_and_links_the_docs():
    assert len(README.splitlines()) <= 200
    assert all(cmd in README.splitlines() for cmd in QUICKSTART)
    for link in re.findall(r"\]\((docs/[^)#]+)", README):
        assert (ROOT / link).exists(), f"the README links to {link}, which does not exist"
    assert "pip install pymem-pg" in README


def test_every_install_line_uses_the_distribution_name():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    wrong = [f"{p.relative_to(ROOT)}: {line.strip()}" for p in pages for line in p.read_text(encoding="utf-8").splitlines()
             if re.search(r"pip install ['\"]?pymem(?![-\w])", line)]
    assert not wrong, wrong


#: The names `pymem` itself exports; everything else is imported from its public subpackage.
CORE = {"Store", "Memories", "Context", "Settings", "Provenance", "Origin", "AdmissionPolicy", "admit", "recall",
        "RecallResult", "RecalledMemory", "WithheldMemory", "deliver", "Delivery", "DeliveredItem", "start_session",
        "end_session", "Session", "supersede", "erase", "reembed", "Embedder", "get_embedder", "verify_store",
        "VerifyReport", "PymemError", "InvalidArguments", "ContextError", "AccessDenied", "NotFound",
        "MemoryAdmissionError", "Busy", "EmbedderMismatch"}


def test_the_examples_import_only_core_names_from_pymem():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    wrong = [f"{p.relative_to(ROOT)}: {name}" for p in pages
             for line in re.findall(r"^from pymem import (.+)$", p.read_text(encoding="utf-8"), flags=re.M)
             for name in (n.strip() for n in line.split(",")) if name not in CORE]
    assert not wrong, wrong
