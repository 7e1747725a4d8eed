"""The generated references cover the code: every command, every HTTP verb and route, every public
name. The site is built as CI builds it (warnings are errors); the lists come from the code now."""

from __future__ import annotations

import importlib
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest

from pymem.cli import main

ROOT = Path(__file__).resolve().parents[2]
NEEDED = ("mkdocs", "material", "mkdocs_click", "mkdocstrings_handlers.python")
MISSING = [m for m in NEEDED if importlib.util.find_spec(m.split(".")[0]) is None]

#: The public subpackages (beside pymem itself) whose `__all__` the Python reference must cover.
PUBLIC_SUBPACKAGES = ("pymem.errors", "pymem.admission", "pymem.delivery", "pymem.lessons", "pymem.conventions",
                      "pymem.facts", "pymem.integrity", "pymem.embedder", "pymem.vocabulary", "pymem.admin",
                      "pymem.telemetry", "pymem.langgraph", "pymem.sqlalchemy", "pymem.client")

pytestmark = pytest.mark.skipif(bool(MISSING), reason=f"the docs extra is not installed (missing {MISSING}): "
                                                      "pip install -e '.[docs]'")


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stderr[-4000:]}"
    return out


def _ids(page: Path) -> set[str]:
    return set(re.findall(r'id="([^"]+)"', page.read_text(encoding="utf-8")))


def _commands(group: click.Group, path: tuple[str, ...] = ("pymem",)) -> list[tuple[str, ...]]:
    out = []
    for name, cmd in sorted(group.commands.items()):
        out.append((*path, name))
        if isinstance(cmd, click.Group):
            out.extend(_commands(cmd, (*path, name)))
    return out


def test_the_cli_reference_has_every_command(site):
    ids = _ids(site / "reference" / "cli" / "index.html")
    commands = _commands(main)
    assert len(commands) > 30
    missing = [" ".join(c) for c in commands if "-".join(c) not in ids]
    assert not missing, f"commands missing from the CLI reference: {missing}"


def test_the_cli_reference_shows_every_option(site):
    html = (site / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    missing = []
    for path in _commands(main):
        cmd: click.Command = main
        for name in path[1:]:
            cmd = cmd.commands[name]  # type: ignore[attr-defined]
        for param in cmd.params:
            for opt in getattr(param, "opts", []):
                if opt.startswith("--") and opt not in html:
                    missing.append(f"{' '.join(path)} {opt}")
    assert not missing, missing


def test_the_http_reference_has_every_verb_and_route(site):
    from pymem.server.openapi import openapi_document
    from pymem.service.verbs import VERBS

    ids = _ids(site / "reference" / "http" / "index.html")
    html = (site / "reference" / "http" / "index.html").read_text(encoding="utf-8")
    assert VERBS
    missing = [v for v in VERBS if v not in ids]
    assert not missing, f"verbs missing from the HTTP reference: {missing}"
    schemas = openapi_document()["components"]["schemas"]
    for verb in VERBS:  # and each verb's arguments, however its args are wrapped (an object, or object | null)
        args = schemas[f"Call_{verb}"]["properties"].get("args", {})
        names = {name for option in args.get("anyOf", [args]) for name in option.get("properties", {})}
        section = html.split(f'id="{verb}"', 1)[1].split("<h4", 1)[0]
        missing = [name for name in sorted(names) if f"<code>{name}</code>" not in section]
        assert not missing, f"{verb}'s arguments missing from its section of the HTTP reference: {missing}"
    for path in openapi_document()["paths"]:
        assert f"<code>{path}</code>" in html, f"route {path} is missing from the HTTP reference"
    from pymem.service.wire import ERRORS
    assert not [e.code for e in ERRORS if f"<code>{e.code}</code>" not in html]


def _public() -> list[tuple[str, list[str]]]:
    out = [("pymem", list(importlib.import_module("pymem").__all__))]
    for name in PUBLIC_SUBPACKAGES:
        try:
            module = importlib.import_module(name)
        except ImportError:  # pymem.admin before it exists, or an optional dependency missing
            continue
        out.append((name, list(getattr(module, "__all__", []))))
    return out


def test_the_python_reference_has_every_public_name(site):
    page = site / "reference" / "python" / "index.html"
    ids, html = _ids(page), page.read_text(encoding="utf-8")
    public = _public()
    assert len(public[0][1]) >= 30
    missing = [f"{module}.{name}" for module, names in public for name in names
               if f"{module}.{name}" not in ids and f"<code>{module}.{name}</code>" not in html]
    assert not missing, f"public names missing from the Python reference: {missing}"


def test_the_site_builds_every_page_of_the_nav(site):
    for page in ROOT.joinpath("docs").rglob("*.md"):
        rel = page.relative_to(ROOT / "docs").with_suffix("")
        built = site / ("index.html" if rel.name == "index" and rel.parent == Path(".") else rel / "index.html")
        assert built.exists(), f"{page} was not built"
    assert json.loads((site / "openapi.json").read_text())["paths"]
