"""Every Python and console example of the documentation runs as written, on a real Postgres.

Each page gets a fresh database; its Python blocks run in order in one namespace with
`Store.open()` reaching that database through PYMEM_DSN (as a reader's own code would), its
console blocks as shell sessions running the real `pymem` command. A command is expected to exit
0 unless the output shown after it says `exit status N`. A page whose examples talk to the
service gets the `export` lines of its shell recipe run (its PYMEM_JWT_KEY, a TOKEN from
`pymem token`) and the service running on its database with them (the app `pymem serve` runs,
under uvicorn), at a free port that stands in for the address the page shows.
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
from helpers.service import running

PAGES = [p for p in pages() if any(b.lang in RUN for b in blocks(p))]
ROOT = Path(__file__).resolve().parents[2]

#: What a page assumes of its database beyond pymem's schema, as the administrator would set it up.
PAGE_SETUP = {
    # the backend's login owns the application's own tables (orders) beside pymem's
    "docs/howto/saas-backend.md": [f"grant create on schema public to {APP_LOGIN}"],
}

#: The pages whose examples call the service, with the address they show for it.
PAGE_SERVICE = {"docs/service.md": "http://127.0.0.1:8080"}

#: The console sessions start processes and the pages load the default embedder: slow.
pytestmark = pytest.mark.slow


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


def _recipe_exports(page: Path, env: dict[str, str], cwd: Path) -> dict[str, str]:
    """The variables the `export` lines of the page's shell recipes set, run as a reader runs them."""
    lines = [line for b in blocks(page) if b.lang == "sh" for line in b.code.splitlines()
             if line.startswith("export ")]
    names = [line.split()[1].split("=", 1)[0] for line in lines]
    script = [f'pymem() {{ "{sys.executable}" -m pymem.cli "$@"; }}', "export -f pymem", "set -e", *lines,
              *(f'printf "%s\\0" "${name}"' for name in names)]
    done = subprocess.run(["bash", "-c", "\n".join(script)], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, f"{page}: the recipe's exports failed:\n{done.stderr[-2000:]}"
    values = done.stdout.split("\0")[:-1]
    assert len(values) == len(names) and all(values), (names, done.stderr[-2000:])
    return dict(zip(names, values, strict=True))


@contextlib.contextmanager
def _service_for(page: Path, env: dict[str, str], cwd: Path, monkeypatch):
    """The page's service address and the real one serving the page's database (None, None: none)."""
    shown = PAGE_SERVICE.get(str(page.relative_to(ROOT)))
    if shown is None:
        yield None, None
        return
    from pymem import Settings, build_app

    for name, value in _recipe_exports(page, env, cwd).items():
        env[name] = value
        monkeypatch.setenv(name, value)
    settings = Settings.from_env({k: v for k, v in env.items() if k.startswith("PYMEM_")})
    with running(build_app(settings=settings, pool_size=2)) as url:
        yield shown, url


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_the_page_examples_run(page, database, tmp_path, monkeypatch):
    env = _env(database, tmp_path)
    for var in CLEARED:
        monkeypatch.delenv(var, raising=False)
    for key in ("PYMEM_DSN", "PYMEM_ADMIN_DSN", "PYMEM_HOME", "PYMEM_SIGNING_KEY"):
        monkeypatch.setenv(key, env[key])
    monkeypatch.chdir(tmp_path)
    rel = str(page.relative_to(ROOT))
    with database.admin() as conn:
        for statement in PAGE_SETUP.get(rel, []):
            conn.execute(statement)
    module = types.ModuleType("docs_example")  # a real module: SQLAlchemy resolves annotations through it
    monkeypatch.setitem(sys.modules, module.__name__, module)
    namespace = module.__dict__
    ran, exports = 0, []
    with _service_for(page, env, tmp_path, monkeypatch) as (shown, url):
        for block in blocks(page):
            if block.lang not in RUN:
                continue
            assert block.not_run is None, f"{block.where} is marked not runnable: {block.not_run}"
            code = block.code if shown is None else block.code.replace(shown, url)
            if block.lang == "python":
                with contextlib.redirect_stdout(io.StringIO()):
                    exec(compile(code, block.where, "exec"), namespace)
            else:
                _run_console(Block(block.page, block.line, block.lang, code, None), env, tmp_path, exports)
                exports += [c for c in commands(block) if c.startswith("export ")]
            ran += 1
    assert ran, f"{page}: no example ran"
    if shown is not None:  # the examples reached the service, which wrote to the page's database
        with database.admin() as conn:
            assert conn.execute("select count(*) from pymem.memories").fetchone()[0] > 0


def test_no_example_is_marked_not_runnable():
    marked = [f"{b.where}: {b.not_run}" for p in pages() for b in blocks(p) if b.not_run is not None]
    assert marked == []


def test_every_page_that_shows_the_service_address_gets_a_service():
    shows = {str(p.relative_to(ROOT)) for p in pages() for b in blocks(p)
             if b.lang == "python" and "http://127.0.0.1:8080" in b.code}
    assert shows <= set(PAGE_SERVICE)
    for page, address in PAGE_SERVICE.items():
        assert any(address in b.code for b in blocks(ROOT / page) if b.lang in RUN), page


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
