"""The public surface: a small core at `pymem`, the rest in documented public subpackages.

Every exported name is importable and documented; the command line imports only public
modules (a package, never a module inside one); the core is the decided list, at most 40 names.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from types import ModuleType

import pytest
from helpers.public_api import PUBLIC_MODULES, public_modules, public_names

import pymem

REPO = Path(__file__).resolve().parents[2]

CORE = {
    "Store", "Memories", "Context", "Settings", "Provenance", "Origin", "AdmissionPolicy", "admit", "recall",
    "RecallResult", "RecalledMemory", "WithheldMemory", "deliver", "Delivery", "DeliveredItem", "start_session",
    "end_session", "Session", "supersede", "erase", "reembed", "Embedder", "get_embedder", "verify_store",
    "VerifyReport", "PymemError", "InvalidArguments", "ContextError", "AccessDenied", "NotFound",
    "MemoryAdmissionError", "Busy", "EmbedderMismatch", "__version__",
}


def test_the_core_is_the_decided_list_of_at_most_40_names():
    assert len(pymem.__all__) <= 40
    assert len(set(pymem.__all__)) == len(pymem.__all__)
    assert set(pymem.__all__) == CORE


def test_the_version_is_the_distributions():
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert pymem.__version__ == project["version"]


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_each_public_module_has_a_docstring_and_an_all(name):
    module = next(m for m in public_modules() if m.__name__ == name)
    assert (module.__doc__ or "").strip(), f"{name} has no docstring"
    assert isinstance(module.__all__, (list, tuple)) and module.__all__, f"{name} has no __all__"


def _own_docstring(value) -> str | None:
    doc = value.__doc__ if isinstance(value, type) else inspect.getdoc(value)
    if doc and dataclasses.is_dataclass(value) and doc.startswith(f"{value.__name__}("):
        return None  # the signature dataclasses writes when the class has no docstring
    return doc


def _commented_constant(module_name: str, name: str) -> bool:
    """A constant is documented by a `#:` comment on the line before its assignment in the module
    that defines it, or by a mention in the docstring of a module that exports it."""
    for module in [sys.modules[module_name], *public_modules()]:
        if name in getattr(module, "__all__", ()) and re.search(rf"\b{re.escape(name)}\b", module.__doc__ or ""):
            return True
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None) or ""
        if not (module.__name__.startswith("pymem") and path.endswith(".py")):
            continue
        lines = Path(path).read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines):
            if not re.match(rf"{re.escape(name)}\s*(:[^=]+)?=", line):
                continue
            # the comment may head a group of constants: walk up past the group's other lines
            j = i - 1
            while j >= 0 and (re.match(r"[A-Z_][A-Z0-9_]*\s*(:[^=]+)?=", lines[j]) or lines[j].startswith(" ")):
                j -= 1
            if j >= 0 and lines[j].lstrip().startswith("#:"):
                return True
    return False


def test_every_public_name_is_importable_and_documented():
    undocumented = []
    for module_name, name, value in public_names():
        if name == "__version__":
            continue
        if inspect.isclass(value) or inspect.isroutine(value):
            if not (_own_docstring(value) or "").strip():
                undocumented.append(f"{module_name}.{name}")
        elif not _commented_constant(module_name, name):
            undocumented.append(f"{module_name}.{name}")
    assert undocumented == []


def test_every_name_that_left_the_core_has_a_public_home():
    """What `pymem` exported before it shrank is still public, in one of the subpackages."""
    homes = {name for _, name, _ in public_names()}
    for name in ("bind_login", "upgrade_schema", "upgrade_sql", "stop_embedded", "admin_connection", "database_status",
                 "register_signing_key", "import_file", "export_records", "WriteGate", "AdapterTrustPolicy",
                 "TrustTiers", "ApproxTokenCounter", "session_injections", "inspect_memory", "file_lesson",
                 "deliver_with_lessons", "file_review_correction", "publish", "audit_chain", "LockTimeout",
                 "SURFACES", "LESSON_TYPES", "ORIGINS", "LexicalEmbedder", "parse_scope_pairs", "ReembedReport"):
        assert name in homes, name


def test_import_pymem_loads_no_migration_machinery_and_no_service():
    code = ("import sys, pymem; bad = [m for m in ('sqlalchemy', 'alembic', 'pymem.admin', 'starlette', 'mcp')"
            " if m in sys.modules]; print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]"


def private_imports(source: str, package: str) -> list[str]:
    """The modules of pymem imported by `source` (a module of `package`) that are not public
    (PUBLIC_MODULES, pymem.tools, or a module of the command line itself)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            targets = [target]
            if target.startswith("pymem"):  # `from .. import x` may name a submodule
                parent = importlib.import_module(target)
                targets = [f"{target}.{a.name}" for a in node.names
                           if isinstance(getattr(parent, a.name, None), ModuleType)] or [target]
        elif isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        else:
            continue
        for t in targets:
            if not t.startswith("pymem"):
                continue
            if t in PUBLIC_MODULES or t.startswith(("pymem.cli", "pymem.tools")):
                continue
            found.append(t)
    return found


def test_the_command_line_imports_only_public_modules():
    wrong = {}
    for path in sorted((REPO / "pymem" / "cli").glob("*.py")):
        bad = private_imports(path.read_text(encoding="utf-8"), "pymem.cli")
        if bad:
            wrong[path.name] = bad
    assert wrong == {}


@pytest.mark.parametrize("line", ["from ..admission.gate import admit", "from pymem.delivery.tiers import Tier",
                                  "import pymem.storage.store", "from ..lessons import filing"])
def test_a_private_import_in_the_command_line_is_caught(line):
    assert private_imports(f"from .. import Store\nfrom ..admission import admit\n{line}\n", "pymem.cli") != []
