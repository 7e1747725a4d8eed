"""The checked-in OpenAPI document generates a usable client: openapi-python-client (from PyPI, in a
venv of its own) generates one from docs/openapi.json without a warning, its success responses are
typed (not `Error | None`), and the generated client, run against a live service, gets a verb's
result and a typed error back.

Skips, saying why, where openapi-python-client cannot be installed (no package index).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers.service import KEY, running, token

from pymem.server.app import build_app
from pymem.service.auth import TokenVerifier

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def generator(tmp_path_factory) -> Path:
    """A venv holding openapi-python-client (and the generated client's own dependencies)."""
    venv = tmp_path_factory.mktemp("openapi-client-venv")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    # --no-compile: the generator runs once, so compiling every dependency's bytecode ahead is wasted
    done = subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-compile", "--disable-pip-version-check",
                           "openapi-python-client", "python-dateutil"],
                          capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        pytest.skip("openapi-python-client could not be installed from the package index: "
                    + (done.stderr.strip().splitlines() or ["no output"])[-1])
    return python


@pytest.fixture(scope="module")
def generated(generator, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("generated")
    config = out / "config.yml"
    config.write_text("post_hooks: []\n")
    done = subprocess.run([str(generator.parent / "openapi-python-client"), "generate", "--path",
                           str(ROOT / "docs" / "openapi.json"), "--meta", "none", "--config", str(config),
                           "--output-path", str(out / "pymem_api")], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Warning" not in done.stdout + done.stderr, done.stdout + done.stderr
    return out


def test_the_generated_operations_type_their_success_responses(generated):
    api = generated / "pymem_api" / "api" / "default"
    call = (api / "call.py").read_text()
    assert "-> CallResponse200 | Error | None:" in call
    assert "-> Error | HandshakeResponse200 | None:" in (api / "handshake.py").read_text()
    models = {p.stem for p in (generated / "pymem_api" / "models").glob("*.py")}
    # every verb's result has its model (none dropped for an unreadable schema)
    document = json.loads((ROOT / "docs" / "openapi.json").read_text())
    objects = [name for name, schema in document["components"]["schemas"].items()
               if name.startswith("Result_") and schema.get("type") == "object"]
    missing = [name for name in objects if "result_" + name.removeprefix("Result_") not in models]
    assert missing == []


def test_the_generated_client_calls_the_live_service(generator, generated, store):
    script = textwrap.dedent("""
        import json, sys
        from pymem_api import AuthenticatedClient
        from pymem_api.api.default import call, healthz
        from pymem_api.models import CallResponse200, Error, Health, Get
        base, tok = sys.argv[1], sys.argv[2]
        client = AuthenticatedClient(base_url=base, token=tok)
        ok = call.sync(client=client, body=Health.from_dict({"verb": "health"}))
        bad = call.sync(client=client, body=Get.from_dict({"verb": "get", "args": {"id": ""}}))
        alive = healthz.sync(client=client)
        print(json.dumps({"ok_type": type(ok).__name__, "ok": ok.to_dict() if ok is not None else None,
                          "bad_type": type(bad).__name__, "bad": bad.to_dict() if bad is not None else None,
                          "alive": alive.to_dict() if alive is not None else None}))
    """)
    with running(build_app(store, tokens=TokenVerifier.hs256(KEY))) as base:
        done = subprocess.run([str(generator), "-c", script, base, token()], cwd=generated, capture_output=True,
                              text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert got["ok_type"] == "CallResponse200" and got["ok"]["ok"] is True and got["ok"]["result"]
    assert got["bad_type"] == "Error" and got["bad"]["ok"] is False
    assert got["bad"]["error"]["code"] == "invalid_arguments" and got["bad"]["error"]["request_id"]
    assert got["alive"] == {"status": "ok"}
