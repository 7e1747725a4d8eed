"""The wheel built from this checkout: its distribution name is the one free on PyPI (`pymem-pg`;
`pymem` there is an unrelated package), it carries the MIT licence, and it holds the library only:
the import package `pymem/` (with its SQL and migrations) and its metadata, nothing from the
workshop (benchmarks, evaluations, training) or the tests; installed by its name into a fresh
virtual environment, it is pymem and only pymem, requires what the project declares, and imports
and runs without loading the migration machinery."""

from __future__ import annotations

import email.parser
import json
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
NAME = "pymem-pg"


@pytest.fixture(scope="module")
def wheel_path(tmp_path_factory) -> Path:
    pytest.importorskip("hatchling", reason="building the wheel offline needs hatchling (the test extra has it)")
    out = tmp_path_factory.mktemp("wheel")
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                           "-w", str(out), str(REPO)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    (built,) = out.glob("*.whl")
    return built


@pytest.fixture(scope="module")
def wheel(wheel_path) -> zipfile.ZipFile:
    with zipfile.ZipFile(wheel_path) as zf:
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


# -- The wheel installed by its name into a fresh virtual environment -------------------------------
#
# Offline and in seconds: pip resolves the name from a folder holding only the wheel (--no-index),
# with --no-deps, since a full dependency install needs an index (pip's cache holds HTTP responses,
# not a folder pip can install from offline) and minutes (the embedded Postgres, the e5 model).
# What a dependency install would add is checked instead: the installed metadata requires exactly
# what pyproject.toml declares, and this test environment, whose versions meet every requirement,
# lends its packages to the fresh one (each entry of its site-packages but its own pymem, linked
# into a folder the fresh environment puts on its path after its own site-packages) so the installed
# pymem imports and runs.


def _fresh(venv: Path, script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(venv / "bin" / "python"), "-c", script], capture_output=True, text=True,
                          timeout=300, env={"PATH": str(venv / "bin"), "HOME": str(venv)}, cwd=venv)


@pytest.fixture(scope="module")
def fresh_venv(wheel_path, tmp_path_factory) -> Path:
    import sysconfig
    import venv as venv_module

    venv = tmp_path_factory.mktemp("fresh") / "venv"
    venv_module.EnvBuilder(with_pip=False).create(venv)
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install",
                           "--no-index", "--find-links", str(wheel_path.parent), "--no-deps", "--no-cache-dir",
                           "--disable-pip-version-check", NAME], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    lent = venv.parent / "lent"
    lent.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if not entry.name.lower().lstrip("_").startswith(("pymem", "editable")):
            (lent / entry.name).symlink_to(entry)
    purelib = _fresh(venv, "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip()
    (Path(purelib) / "zz_lent.pth").write_text(f"{lent}\n")
    return venv


def test_installing_the_name_installs_pymem_and_only_pymem(fresh_venv, wheel_path):
    listed = _fresh(fresh_venv, """
import importlib.metadata as md, json, sys, sysconfig
own = sysconfig.get_paths()['purelib']
dists = [d for d in md.distributions() if str(d.locate_file('')).startswith(own)]
print(json.dumps({'dists': sorted(d.metadata['Name'] for d in dists),
                  'files': sorted(str(f) for d in dists for f in d.files)}))
""")
    assert listed.returncode == 0, listed.stderr
    got = json.loads(listed.stdout)
    assert got["dists"] == [NAME]
    info = f"pymem_pg-{wheel_path.name.split('-')[1]}.dist-info/"
    outside = [f for f in got["files"] if not f.startswith(("pymem/", info, "../../../bin/pymem"))]
    assert outside == []
    assert "pymem/__init__.py" in got["files"] and "pymem/_sql/schema.sql" in got["files"]


def test_the_installed_metadata_requires_what_the_project_declares(fresh_venv):
    packaging = pytest.importorskip("packaging.requirements")
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]

    def expanded(reqs):  # an extra that names the project's own extras stands for their requirements
        for r in map(packaging.Requirement, reqs):
            yield from expanded([x for e in sorted(r.extras) for x in extras[e]]) if r.name == NAME else [str(r)]

    declared = set(expanded(project["dependencies"]))
    for extra, reqs in extras.items():
        declared |= {str(packaging.Requirement(f"{r}; extra == '{extra}'")) for r in expanded(reqs)}
    shown = _fresh(fresh_venv, "import importlib.metadata as md; print('\\n'.join(md.requires('pymem-pg')))")
    assert shown.returncode == 0, shown.stderr
    installed = {str(packaging.Requirement(r)) for r in shown.stdout.splitlines()}
    assert installed == declared
    # the environment that lends its packages meets every requirement of a plain install
    import importlib.metadata as md

    for r in (packaging.Requirement(r) for r in project["dependencies"]):
        assert r.specifier.contains(md.version(r.name), prereleases=True), (r, md.version(r.name))


def test_the_installed_package_imports_without_the_migration_machinery_and_runs(fresh_venv):
    imported = _fresh(fresh_venv, """
import json, sys, sysconfig
import pymem
print(json.dumps({'file': pymem.__file__, 'own': sysconfig.get_paths()['purelib'],
                  'loaded': sorted(m for m in ('alembic', 'sqlalchemy') if m in sys.modules),
                  'version': pymem.__version__, 'names': len(pymem.__all__)}))
""")
    assert imported.returncode == 0, imported.stderr
    got = json.loads(imported.stdout)
    assert got["file"].startswith(got["own"]) and not got["file"].startswith(str(REPO))
    assert got["loaded"] == []
    assert got["version"] == tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert got["names"] == len(__import__("pymem").__all__)
    command = subprocess.run([str(fresh_venv / "bin" / "pymem"), "--version"], capture_output=True, text=True,
                             timeout=120, env={"PATH": str(fresh_venv / "bin"), "HOME": str(fresh_venv)},
                             cwd=fresh_venv)
    assert command.returncode == 0, command.stderr
    assert got["version"] in command.stdout
    served = _fresh(fresh_venv, "from pymem.service.verbs import version; print(version())")  # the handshake's
    assert (served.returncode, served.stdout.strip()) == (0, got["version"]), served.stderr
    sql = _fresh(fresh_venv, "from pymem.admin import upgrade_sql; print(upgrade_sql(embedding_dim=8))")
    assert sql.returncode == 0, sql.stderr
    assert "create table pymem.memories" in sql.stdout
