"""docker-compose.yml: the structure a stack needs, checked without Docker (service names, the migration
before the service, the readiness healthcheck on the port it serves, the token key from an env file,
the application's login), and `docker compose config` where Docker Compose is installed."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
ONE_LINER = ("printf 'PYMEM_JWT_KEY=%s\\n' \"$(openssl rand -hex 32)\" > docker/serve.env "
             "&& docker compose up -d serve")


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def _command(service: dict) -> str:
    parts = [*(service.get("entrypoint") or []), *(service.get("command") or [])]
    return " ".join(parts) if isinstance(parts, list) else str(parts)


def test_the_services_and_their_order(compose):
    services = compose["services"]
    assert set(services) == {"postgres", "migrate", "serve"}
    assert services["migrate"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    serve = services["serve"]["depends_on"]
    assert serve["migrate"]["condition"] == "service_completed_successfully"
    assert serve["postgres"]["condition"] == "service_healthy"
    assert services["migrate"].get("restart") == "no"  # one-shot: the service waits for it to finish
    assert "pymem db upgrade" in _command(services["migrate"])


def test_serve_runs_pymem_serve_and_is_healthy_when_ready(compose):
    serve = compose["services"]["serve"]
    command = _command(serve)
    assert "[server]" in command  # the service needs the server extra
    match = re.search(r"exec pymem serve --host 0\.0\.0\.0 --port (\d+)", command)
    assert match, command
    port = match.group(1)
    assert f"{port}:{port}" in serve["ports"]
    check = serve["healthcheck"]
    test = " ".join(check["test"])
    assert check["test"][0] == "CMD" and f"http://127.0.0.1:{port}/readyz" in test and "!= 200" in test
    for key in ("interval", "timeout", "retries", "start_period"):
        assert key in check, key


def test_serve_takes_its_key_from_an_env_file_and_acts_as_the_app_login(compose):
    serve = compose["services"]["serve"]
    assert serve["env_file"] == ["docker/serve.env"]
    env = serve["environment"]
    assert not {"PYMEM_JWT_KEY", "PYMEM_JWT_PUBLIC_KEY", "PYMEM_ADMIN_DSN"} & set(env)  # no secret, no admin login
    login = re.fullmatch(r"postgresql://(\w+):\w+@postgres:5432/pymem", env["PYMEM_DSN"])
    assert login, env["PYMEM_DSN"]
    initdb = "\n".join(p.read_text() for p in sorted((ROOT / "docker" / "initdb").glob("*.sql")))
    created = re.search(rf"create role {login.group(1)} login password '\w+' in role (\w+);", initdb)
    assert created and created.group(1) == "pymem_app"
    assert not re.search(rf"alter role {login.group(1)}\b.*(superuser|bypassrls)", initdb, re.I)
    assert env["PYMEM_EMBEDDING_DIM"] == compose["services"]["migrate"]["environment"]["PYMEM_EMBEDDING_DIM"]
    # the env file itself is never committed; its example says what goes in it, with no key
    assert "/docker/serve.env" in (ROOT / ".gitignore").read_text().splitlines()
    example = (ROOT / "docker" / "serve.env.example").read_text()
    assert re.search(r"^PYMEM_JWT_KEY=$", example, re.M)


def test_the_one_liner_is_documented_where_operators_look():
    assert ONE_LINER in COMPOSE.read_text()
    assert ONE_LINER in (ROOT / "docs" / "operations.md").read_text()


def test_docker_compose_config_accepts_the_file(tmp_path):
    docker = shutil.which("docker")
    if docker is None or subprocess.run([docker, "compose", "version"], capture_output=True).returncode != 0:
        pytest.skip("Docker Compose is not installed here: the structure is checked by the tests above")
    project = tmp_path / "project"
    (project / "docker").mkdir(parents=True)
    shutil.copy(COMPOSE, project / "docker-compose.yml")
    shutil.copytree(ROOT / "docker" / "initdb", project / "docker" / "initdb")
    (project / "docker" / "serve.env").write_text("PYMEM_JWT_KEY=" + "0" * 64 + "\n")
    result = subprocess.run([docker, "compose", "config", "--quiet"], cwd=project, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    names = subprocess.run([docker, "compose", "config", "--services"], cwd=project, capture_output=True, text=True)
    assert set(names.stdout.split()) == {"postgres", "migrate", "serve"}
