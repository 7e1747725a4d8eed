"""The wheel tells type checkers that pymem is typed: `py.typed` ships inside the package (PEP 561).

The wheel is built from this checkout with the project's own build backend, offline.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_the_wheel_ships_py_typed_beside_the_package(tmp_path):
    wheel_builder = pytest.importorskip("hatchling.builders.wheel", reason="hatchling (the build backend) is needed")
    [built] = list(wheel_builder.WheelBuilder(str(ROOT)).build(directory=str(tmp_path), versions=["standard"]))
    names = zipfile.ZipFile(built).namelist()
    assert "pymem/py.typed" in names, sorted(n for n in names if n.startswith("pymem/") and "/" not in n[6:])
    assert "pymem/__init__.py" in names
