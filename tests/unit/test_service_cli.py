"""`pymem serve`, `pymem mcp` and `pymem token` on the command line (no database needed)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from helpers.service import KEY

from pymem.cli import main
from pymem.service.auth import TokenVerifier

CLEAN = {"PYMEM_JWT_KEY": None, "PYMEM_JWT_PUBLIC_KEY": None, "PYMEM_JWT_AUDIENCE": None, "PYMEM_JWT_ISSUER": None,
         "PYMEM_TENANT": None, "PYMEM_ACTOR": None, "PYMEM_ADAPTER": None, "PYMEM_SCOPE": None}


def run(args, **env):
    return CliRunner().invoke(main, args, env={**CLEAN, **env}, catch_exceptions=False)


def test_serve_refuses_to_start_without_a_key():
    result = run(["serve", "--port", "8099"])
    assert result.exit_code == 2 and "PYMEM_JWT_KEY is not set" in result.output


def test_serve_refuses_a_short_key():
    result = run(["serve", "--port", "8099"], PYMEM_JWT_KEY="too-short")
    assert result.exit_code == 2 and "at least 32 bytes" in result.output


def test_token_prints_a_token_the_service_accepts():
    result = run(["token", "--tenant", "acme", "--actor", "alice", "--adapter", "codex", "--scope", "project=x",
                  "--ttl", "120", "--audience", "pymem-test"], PYMEM_JWT_KEY=KEY)
    assert result.exit_code == 0, result.output
    ctx = TokenVerifier.hs256(KEY, audience="pymem-test").verify(result.output.strip())
    assert (ctx.tenant, ctx.actor, ctx.adapter, dict(ctx.scope)) == ("acme", "alice", "codex", {"project": "x"})


def test_token_takes_its_scope_from_pymem_scope_unless_scope_is_given():
    base = ["token", "--tenant", "acme", "--actor", "alice", "--ttl", "120"]
    verifier = TokenVerifier.hs256(KEY)
    from_env = run(base, PYMEM_JWT_KEY=KEY, PYMEM_SCOPE="project=x,team=y")
    assert from_env.exit_code == 0, from_env.output
    assert dict(verifier.verify(from_env.output.strip()).scope) == {"project": "x", "team": "y"}
    given = run([*base, "--scope", "project=z"], PYMEM_JWT_KEY=KEY, PYMEM_SCOPE="project=x,team=y")
    assert given.exit_code == 0, given.output
    assert dict(verifier.verify(given.output.strip()).scope) == {"project": "z"}
    bad = run(base, PYMEM_JWT_KEY=KEY, PYMEM_SCOPE="no-equals-sign")
    assert bad.exit_code == 2 and bad.output.strip() != "" and "Traceback" not in bad.output


@pytest.mark.parametrize("args,env,message", [
    (["token", "--tenant", "acme", "--actor", "alice"], {}, "PYMEM_JWT_KEY"),
    (["token", "--tenant", "acme"], {"PYMEM_JWT_KEY": KEY}, "an actor is required"),
    (["token", "--actor", "alice"], {"PYMEM_JWT_KEY": KEY}, "a tenant is required"),
    (["token", "--tenant", "acme", "--actor", "alice"], {"PYMEM_JWT_KEY": "short"}, "at least 32 bytes"),
])
def test_token_refuses_what_the_service_would_refuse(args, env, message):
    result = run(args, **env)
    assert result.exit_code == 2 and message in result.output
