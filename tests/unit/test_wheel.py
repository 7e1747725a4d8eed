"""The wheel built from this checkout: its distribution name is the one free on PyPI (`pymem-pg`;
`pymem` there is an unrelated package), it carries the MIT licence, and it holds the library only:
the import package `pymem/` (with its SQL and migrations) and its metadata, nothing from the
workshop (benchmarks, evaluations, training) or the tests."""

from __future__ import annotations

import email.parser
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
NAME = "pymem-pg"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    pytest.importorskip("hatchling", reason="building the wheel offline needs hatchling (the test extra has it)")
    out = tmp_path_factory.mktemp("wheel")
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                           "-w", str(out), str(REPO)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    (built,) = out.glob("*.whl")
    with zipfile.ZipFile(built) as zf:
        yield zf


def _dist_info(zf: zipfile.ZipFile) -> str:
    (info,) = {n.split("/", 1)[0] for n in zf.namelist() if n.split("/", 1)[0].endswith(".dist-info")}
    return info


def test_the_project_declares_the_free_name():
    assert tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["name"] == NAME


def test_wheel_metadata_names_pymem_pg_and_mit(wheel):
    info = _dist_info(wheel)
    meta = email.parser.Parser().parsestr(wheel.read(f"{info}/METADATA").decode())
    assert meta["Name"] == NAME
    assert meta["License-Expression"] == "MIT"
    assert f"{info}/licenses/LICENSE" in wheel.namelist()
    assert "MIT License" in wheel.read(f"{info}/licenses/LICENSE").decode()
    assert "pymem = pymem.cli:main" in wheel.read(f"{info}/entry_points.txt").decode()


def test_wheel_holds_only_the_pymem_package_and_its_metadata(wheel):
    info = _dist_info(wheel)
    tops = {n.split("/", 1)[0] for n in wheel.namelist()}
    assert tops == {"pymem", info}, tops
    names = set(wheel.namelist())
    # the SQL and the Alembic environment ride inside the package (pymem db upgrade from a plain install)
    assert "pymem/_sql/schema.sql" in names and "pymem/_sql/queries.sql" in names
    assert any(n.startswith("pymem/_migrations/versions/") for n in names)
    assert "pymem/__init__.py" in names and "pymem/cli/__init__.py" in names


def test_the_licence_file_is_mit():
    assert (REPO / "LICENSE").read_text().startswith("MIT License")


def test_wheel_holds_no_benchmark_evaluation_or_training_code(wheel):
    names = wheel.namelist()
    workshop = sorted(p.stem for p in (REPO / "benchmarks").glob("*.py") if p.stem != "__init__")
    assert {"bench", "load_bench", "eval_recall"} <= set(workshop)
    leaked = [n for n in names if n.startswith(("benchmarks/", "training/", "tests/"))
              or (n.startswith("pymem/tools/") and n.rsplit("/", 1)[-1].removesuffix(".py") in workshop)
              or "training" in n.split("/")]
    assert leaked == []
    # what remains of pymem/tools is the guided demo, which is the library's
    assert sorted(n for n in names if n.startswith("pymem/tools/")) == [
        "pymem/tools/__init__.py", "pymem/tools/demo.py", "pymem/tools/demo_admission.py", "pymem/tools/demo_delivery.py"]


def test_without_the_benchmarks_package_the_commands_say_how_to_get_it(monkeypatch):
    """A plain install has no `benchmarks`: `pymem bench` and `pymem eval recall` exit 2 saying
    where the benchmarks are, before touching any store."""
    from click.testing import CliRunner

    from pymem.cli import main

    for name in [m for m in sys.modules if m == "benchmarks" or m.startswith("benchmarks.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "benchmarks", None)  # what an install without it finds
    for args in (["bench", "--admission"], ["bench", "--rows", "1000"], ["eval", "recall", "--data", str(REPO)]):
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 2, (args, result.output)
        assert "benchmarks" in result.output and "pip install -e '.[test]'" in result.output
