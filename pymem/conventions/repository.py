"""Asking a git repository whether a rule's symbol still resolves at HEAD.

A symbol resolves when its last component (after the last `.` or `:`) occurs as a whole word in
a file that matches the rule's subject (a path, or a glob where `*` stays within a directory and
`**` crosses them) in the tree of HEAD: `git grep -w -F` on the commit, so the working tree and
uncommitted changes do not count. A subject that matches no file at HEAD resolves nothing. pymem
runs git and nothing else here: a rule's assertion is stored and signed, never executed.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from ..config import child_environ
from ..errors import InvalidArguments

__all__ = ["head_commit", "symbol_resolves", "last_component"]

_TIMEOUT = 60
_SEPARATORS = re.compile(r"[.:]+")


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = child_environ(GIT_TERMINAL_PROMPT="0", GIT_OPTIONAL_LOCKS="0", LC_ALL="C")
    try:
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=_TIMEOUT,
                              env=env, check=False)
    except FileNotFoundError:
        raise InvalidArguments("git is not installed (it is needed to check rules against a repository)") from None
    except subprocess.TimeoutExpired:
        raise InvalidArguments(f"git did not answer within {_TIMEOUT} s in {repo}") from None


def head_commit(repo: Path | str) -> str:
    """The full id of HEAD's commit; InvalidArguments when `repo` is not a git repository with one."""
    repo = Path(repo).expanduser()
    if not repo.is_dir():
        raise InvalidArguments(f"{repo} is not a directory")
    done = _git(repo, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
    if done.returncode != 0 or not done.stdout.strip():
        raise InvalidArguments(f"{repo} is not a git repository with a commit at HEAD")
    return done.stdout.strip()


def last_component(symbol: str) -> str:
    return _SEPARATORS.split(symbol)[-1] or symbol


def symbol_resolves(repo: Path | str, commit: str, subject: str, symbol: str) -> bool:
    """Whether `symbol` occurs as a whole word in a file matching `subject` in `commit`'s tree."""
    word = last_component(symbol)
    done = _git(Path(repo).expanduser(), "grep", "--quiet", "--word-regexp", "--fixed-strings", "-e", word, commit,
                "--", f":(glob){subject}")
    if done.returncode == 0:
        return True
    if done.returncode == 1:
        return False
    raise InvalidArguments(f"git grep failed in {repo} (exit {done.returncode})")
