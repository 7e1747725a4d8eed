"""Running the command line against a test database, with none of the caller's PYMEM_* settings."""

from __future__ import annotations

from click.testing import CliRunner

from pymem.cli import main

#: Settings a developer's shell may carry that would change what the commands do.
CLEARED = ("PYMEM_ADAPTER", "PYMEM_ACTOR", "PYMEM_SCOPE", "PYMEM_EMBEDDER", "PYMEM_POLICY_FILE",
           "PYMEM_INFERRED_CEILING", "PYMEM_TOOL_CEILING", "PYMEM_INJECTED_CEILING", "PYMEM_DENY_ORIGINS",
           "PYMEM_TRUSTED_ADAPTERS", "PYMEM_TRUST_UNTAGGED", "PYMEM_HOME", "PYMEM_EMBEDDING_DIM", "PYMEM_TIERS_FILE",
           "PYMEM_TIERS_EXCLUDE", "PYMEM_SIMILARITY_FLOOR", "PYMEM_LESSONS_EXCLUDED_ROLES", "PYMEM_SIGNING_KEY",
           "PYMEM_CLASSIFIER_THRESHOLD", "PYMEM_QUARANTINE_THRESHOLD", "PYMEM_QUARANTINE", "PYMEM_POOLER", "PYMEM_DIRECT_DSN", "PYMEM_ADMIN_DSN", "PYMEM_DSN")


def cli_runner(database, monkeypatch, **env):
    """`run(*args, input=None, **more_env)`: the click result of `pymem ARGS` on `database` as tenant acme."""
    for var in CLEARED:
        monkeypatch.delenv(var, raising=False)
    base = {"PYMEM_DSN": database.app_dsn, "PYMEM_ADMIN_DSN": database.admin_dsn, "PYMEM_TENANT": "acme",
            "PYMEM_ACTOR": "cli-user", **env}

    def run(*args, input=None, **extra_env):
        return CliRunner().invoke(main, list(args), env={**base, **extra_env}, input=input, catch_exceptions=False)

    return run
