"""The package's layering, as import-linter contracts (pyproject.toml, [tool.importlinter]).

The contracts are checked on this checkout, and on a copy with one forbidden import planted per
contract, so each of them is shown to be able to fail.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# `lint-imports --no-cache`, run by the interpreter running the tests
LINT = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"


def lint(root: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(root), "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-c", LINT, "--no-cache"], cwd=root, env=env, capture_output=True,
                          text=True, timeout=120)


def test_the_import_contracts_hold():
    result = lint(REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "5 kept, 0 broken" in result.stdout, result.stdout


# (file, line to add, the contract that must then break)
PLANTED = [
    ("pymem/storage/rows.py", "from ..admission import gate", "Storage never imports admission or recall"),
    ("pymem/admission/judge.py", "import psycopg", "The pure modules import no database code"),
    ("pymem/admission/policy.py", "from ..storage import validate", "The pure modules import no database code"),
    ("pymem/cli/common.py", "from ..storage import store", "The CLI imports only the public surface"),
    ("pymem/db.py", "from .storage import store", "Layers"),
    ("pymem/storage/validate.py", "from . import rows", "No import cycles"),
    ("pymem/service/verbs.py", "from ..mcp import server", "Layers"),
    ("pymem/mcp/server.py", "from .. import client", "Layers"),
    ("pymem/cli/service_commands.py", "from ..server import app", "The CLI imports only the public surface"),
    ("pymem/service/verbs.py", "from .. import admin", "Layers"),
    ("pymem/inspector/pages.py", "from ..server import app", "Layers"),
    ("pymem/inspector/pages.py", "from ..mcp import server", "Layers"),
    ("pymem/service/verbs.py", "from .. import inspector", "Layers"),
]


@pytest.mark.parametrize("path,line,contract", PLANTED, ids=[f"{p}: {line}" for p, line, _ in PLANTED])
def test_each_contract_can_fail(tmp_path, path, line, contract):
    shutil.copytree(REPO / "pymem", tmp_path / "pymem", ignore=shutil.ignore_patterns("__pycache__", "_sql"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    target = tmp_path / path
    target.write_text(target.read_text(encoding="utf-8") + f"\n{line}\n", encoding="utf-8")
    result = lint(tmp_path)
    assert result.returncode == 1, result.stdout
    broken = [ln for ln in result.stdout.splitlines() if ln.rstrip().endswith("BROKEN")]
    assert any(contract in ln for ln in broken), result.stdout
