"""Every Python and console example of the documentation runs as written, on a real Postgres.

Each page gets a fresh database; its Python blocks run in order in one namespace with
`Store.open()` reaching that database through PYMEM_DSN (as a reader's own code would), its
console blocks as shell sessions running the real `pymem` command. A command is expected to exit
0 unless the output shown after it says `exit status N`.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest
from helpers.cli import CLEARED
from helpers.database import APP_LOGIN
from helpers.doc_examples import RUN, Block, blocks, commands, pages

PAGES = [p for p in pages() if any(b.lang in RUN and not b.not_run for b in blocks(p))]
ROOT = Path(__file__).resolve().parents[2]

#: What a page assumes of its database beyond pymem's schema, as the administrator would set it up.
PAGE_SETUP = {
    # the backend's login owns the application's own tables (orders) beside pymem's
    "docs/howto/saas-backend.md": [f"grant create on schema public to {APP_LOGIN}"],
}

#: The console sessions start processes and the pages load the default embedder: slow.
pytestmark = pytest.mark.slow

#: At most this many examples are marked not runnable (each with its reason on the page).
MAX_NOT_RUN = 6


def _env(database, tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in CLEARED and not k.startswith("PYMEM_")}
    env.update(PYMEM_DSN=database.app_dsn, PYMEM_ADMIN_DSN=database.admin_dsn,
               PYMEM_HOME=str(tmp_path / "home"), PYMEM_SIGNING_KEY=str(tmp_path / "keys" / "signing-ed25519.pem"),
               PYTHONPATH=str(ROOT))
    return env


def _expected_status(block: Block, command: str) -> int:
    """`exit status N` in the output shown after the command, else 0."""
    text = block.code.split(command, 1)[1]
    shown = text.split("\n$ ", 1)[0]
    m = re.search(r"exit status (\d+)", shown)
    return int(m.group(1)) if m else 0


def _run_console(block: Block, env: dict[str, str], cwd: Path, exports: list[str]) -> None:
    """Runs the block's commands after the page's earlier `export` lines (one reader's terminal)."""
    script = [f'pymem() {{ "{sys.executable}" -m pymem.cli "$@"; }}', "export -f pymem", *exports]
    cmds = commands(block)
    assert cmds, f"{block.where}: a console block without a `$ ` command"
    for n, cmd in enumerate(cmds):
        script += [cmd, f'echo "@@status {n} $?"']
    done = subprocess.run(["bash", "-c", "\n".join(script)], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=900)
    statuses = dict(re.findall(r"^@@status (\d+) (\d+)$", done.stdout, flags=re.M))
    for n, cmd in enumerate(cmds):
        got = statuses.get(str(n))
        assert got is not None, f"{block.where}: the session stopped before `{cmd}`:\n{done.stderr[-2000:]}"
        assert int(got) == _expected_status(block, cmd), (
            f"{block.where}: `{cmd}` exited {got}\nstdout:\n{done.stdout[-3000:]}\nstderr:\n{done.stderr[-3000:]}")


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_the_page_examples_run(page, database, tmp_path, monkeypatch):
    env = _env(database, tmp_path)
    for var in CLEARED:
        monkeypatch.delenv(var, raising=False)
    for key in ("PYMEM_DSN", "PYMEM_ADMIN_DSN", "PYMEM_HOME", "PYMEM_SIGNING_KEY"):
        monkeypatch.setenv(key, env[key])
    monkeypatch.chdir(tmp_path)
    with database.admin() as conn:
        for statement in PAGE_SETUP.get(str(page.relative_to(ROOT)), []):
            conn.execute(statement)
    module = types.ModuleType("docs_example")  # a real module: SQLAlchemy resolves annotations through it
    monkeypatch.setitem(sys.modules, module.__name__, module)
    namespace = module.__dict__
    ran, exports = 0, []
    for block in blocks(page):
        if block.lang not in RUN or block.not_run:
            continue
        if block.lang == "python":
            with contextlib.redirect_stdout(io.StringIO()):
                exec(compile(block.code, block.where, "exec"), namespace)
        else:
            _run_console(block, env, tmp_path, exports)
            exports += [c for c in commands(block) if c.startswith("export ")]
        ran += 1
    assert ran, f"{page}: no example ran"


def test_few_examples_are_marked_not_runnable_and_each_says_why():
    marked = [b for p in pages() for b in blocks(p) if b.not_run is not None]
    assert all(b.not_run.strip() for b in marked), [b.where for b in marked if not b.not_run.strip()]
    assert all(b.lang in RUN for b in marked), [b.where for b in marked if b.lang not in RUN]
    assert len(marked) <= MAX_NOT_RUN, [f"{b.where}: {b.not_run}" for b in marked]


def test_the_readme_example_runs_twice_on_the_same_store(database, monkeypatch, tmp_path):
    """Running the README's example again must not fail (it once started a fixed session id twice)."""
    monkeypatch.setenv("PYMEM_DSN", database.app_dsn)
    monkeypatch.setenv("PYMEM_ADMIN_DSN", database.admin_dsn)
    monkeypatch.setenv("PYMEM_HOME", str(tmp_path / "home"))
    example = next(b for b in blocks(ROOT / "README.md") if b.lang == "python")
    out = io.StringIO()
    for _ in range(2):
        with contextlib.redirect_stdout(out):
            exec(compile(example.code, example.where, "exec"), {"__name__": "readme_example"})
    assert out.getvalue().count("<<<pymem reference data") == 2
    assert "Initech wants invoices in EUR." in out.getvalue()
