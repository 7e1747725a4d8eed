"""What the lesson, receipt and fact tests share: a fixed policy, trust and embedder, a store whose
signing key lives in the test's directory, and small git helpers."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from pymem import AdmissionPolicy, Context
from pymem.admission import AdapterTrustPolicy
from pymem.embedder import LexicalEmbedder

from .database import DIM
from .flavours import file_lesson

POLICY = AdmissionPolicy()
TRUST = AdapterTrustPolicy()
EMBEDDER = LexicalEmbedder(DIM)
GATE = dict(policy=POLICY, embedder=EMBEDDER)


def keyed_store(database, tmp_path: Path, name: str = "signing-ed25519.pem"):
    """A store of `database` whose installation key is a file under `tmp_path` (never the user's home)."""
    return database.store(signing_key=tmp_path / "keys" / name)


def lesson(memories, text: str, tags, memory_type: str = "project", confidence: float | None = 0.8,
           origin: str | None = None, **kwargs):
    """File a lesson through the gate with the fixed policy and embedder; by default as the
    operator's (origin operator) from an operator context and as the user's from an agent's (only
    the operator may write origin operator)."""
    if origin is None:
        origin = "operator" if memories.ctx.adapter is None else "user_asserted"
    return file_lesson(memories, text, tags, memory_type, confidence, origin=origin, **GATE, **kwargs)


def ctx(tenant: str = "acme", **kwargs) -> Context:
    return Context(tenant=tenant, actor=kwargs.pop("actor", "tester"), **kwargs)


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.org", "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(repo)}
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, env=env, check=True)
    return done.stdout.strip()


def commit_files(repo: Path, files: dict[str, str | None], message: str) -> str:
    """Write (or, for None, delete) files in `repo` and commit them; returns the new HEAD."""
    for name, text in files.items():
        path = repo / name
        if text is None:
            git(repo, "rm", "-q", name)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            git(repo, "add", name)
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def new_repo(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q")
    return path
