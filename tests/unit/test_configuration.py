"""One configuration: Settings, built once and held by the store; nothing else reads the environment.

The policies in force (admission, adapter trust, trust tiers) are built from a Settings once and
reused, built again when a file they name changes or when the settings are reloaded.
"""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path

import pytest

from pymem import AdmissionPolicy, InvalidArguments, Origin, Settings
from pymem.admission import AdapterTrustPolicy
from pymem.admission.policy import admission_policy_in_force
from pymem.admission.trust import active_trust_policy
from pymem.delivery.tiers import tiers_in_force

REPO = Path(__file__).resolve().parents[2]
#: The one module of the package that touches the process's environment, reading or writing it;
#: everything else (the command line and the demo included) goes through it.
ALLOWED = {"pymem/config.py"}
ENVIRONMENT_NAMES = ("environ", "environb", "getenv", "getenvb", "putenv", "unsetenv")


def environment_uses(source: str) -> list[int]:
    """The lines of `source` that touch the process's environment: os.environ or os.environb (read,
    assigned into or deleted from), os.getenv, os.putenv, os.unsetenv, or any of them imported from os."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "os"
                and node.attr in ENVIRONMENT_NAMES) or (
                isinstance(node, ast.ImportFrom) and node.module == "os"
                and any(a.name in ENVIRONMENT_NAMES for a in node.names)):
            found.append(node.lineno)
    return found


def test_no_module_of_the_library_reads_the_environment_outside_the_configuration():
    wrong = {}
    for path in sorted((REPO / "pymem").rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        if rel in ALLOWED:
            continue
        lines = environment_uses(path.read_text(encoding="utf-8"))
        if lines:
            wrong[rel] = lines
    assert wrong == {}


def test_the_walk_covers_the_command_line_and_the_demo():
    walked = {p.relative_to(REPO).as_posix() for p in (REPO / "pymem").rglob("*.py")}
    assert "pymem/cli/common.py" in walked and "pymem/tools/demo.py" in walked
    assert environment_uses((REPO / "pymem" / "config.py").read_text(encoding="utf-8")) != []


@pytest.mark.parametrize("source", ["import os\nx = os.environ.get('PYMEM_X')\n", "import os\nos.getenv('A')\n",
                                    "from os import environ\n", "import os\nenv = {**os.environ}\n",
                                    "import os\nos.environ['HF_HUB_OFFLINE'] = '1'\n",
                                    "import os\ndel os.environ['A']\n", "import os\nos.putenv('A', '1')\n",
                                    "from os import putenv\n"])
def test_an_environment_read_or_write_is_caught(source):
    assert environment_uses(source) != []


def test_a_mapping_named_environ_is_not_the_environment():
    assert environment_uses("def f(settings):\n    return settings.environ['PYMEM_X']\n") == []


def test_settings_keep_the_variables_they_were_built_from_and_nothing_else():
    s = Settings.from_env({"PYMEM_TRUSTED_ADAPTERS": "codex", "HOME": "/somewhere", "PYMEM_EMBED_THREADS": "2"})
    assert dict(s.environ) == {"PYMEM_TRUSTED_ADAPTERS": "codex", "PYMEM_EMBED_THREADS": "2"}
    assert s.embed_threads == 2
    with pytest.raises(TypeError):
        s.environ["PYMEM_TRUSTED_ADAPTERS"] = "other"  # read-only
    assert active_trust_policy(s) == AdapterTrustPolicy(trusted_adapters=frozenset({"codex"}))


def test_settings_built_in_code_ask_for_the_default_policies(monkeypatch):
    monkeypatch.setenv("PYMEM_TRUSTED_ADAPTERS", "codex")
    monkeypatch.setenv("PYMEM_DENY_ORIGINS", "model_inferred")
    s = Settings()
    assert active_trust_policy(s) == AdapterTrustPolicy()
    assert admission_policy_in_force(s) == AdmissionPolicy()


def test_the_environment_changing_later_changes_nothing(monkeypatch):
    monkeypatch.setenv("PYMEM_TRUSTED_ADAPTERS", "codex")
    s = Settings.from_env()
    monkeypatch.setenv("PYMEM_TRUSTED_ADAPTERS", "other")
    assert active_trust_policy(s).trusted_adapters == frozenset({"codex"})


def _policy_file(path: Path, ceiling: float) -> None:
    path.write_text(json.dumps({"inferred_ceiling": ceiling}), encoding="utf-8")


def test_the_policy_file_is_read_once_and_again_when_it_changes(tmp_path):
    path = tmp_path / "policy.json"
    _policy_file(path, 0.4)
    s = Settings.from_env({"PYMEM_POLICY_FILE": str(path)})
    first = admission_policy_in_force(s)
    assert first.rules[Origin.MODEL_INFERRED].ceiling == 0.4
    builds = s.in_force.builds
    assert admission_policy_in_force(s) is first  # not read again
    assert s.in_force.builds == builds
    _policy_file(path, 0.25)  # a different size
    os.utime(path, ns=(1, 1))  # and a different modification time
    assert admission_policy_in_force(s).rules[Origin.MODEL_INFERRED].ceiling == 0.25


def test_reload_reads_the_files_again(tmp_path):
    path = tmp_path / "tiers.json"
    path.write_text(json.dumps({"exclude": ["tool"]}), encoding="utf-8")
    s = Settings.from_env({"PYMEM_TIERS_FILE": str(path)})
    first = tiers_in_force(s)
    stat = path.stat()
    path.write_text(json.dumps({"exclude": ["user"]}), encoding="utf-8")  # the same size ...
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # ... and modification time: unnoticed
    assert tiers_in_force(s) is first
    s.reload()
    assert tiers_in_force(s) != first


def test_a_broken_policy_file_is_a_typed_error_and_is_not_kept(tmp_path):
    path = tmp_path / "policy.json"
    path.write_text("{not json", encoding="utf-8")
    s = Settings.from_env({"PYMEM_POLICY_FILE": str(path)})
    with pytest.raises(InvalidArguments, match="not valid JSON"):
        admission_policy_in_force(s)
    _policy_file(path, 0.3)
    assert admission_policy_in_force(s).rules[Origin.MODEL_INFERRED].ceiling == 0.3


def test_settings_from_a_file(tmp_path):
    path = tmp_path / "pymem.toml"
    path.write_text('dsn = "postgresql://db/app"\ntrusted_adapters = ["codex", "claude-code"]\n'
                    'trust_untagged = false\nlock_timeout_ms = 2000\n', encoding="utf-8")
    s = Settings.from_file(path)
    assert s.dsn == "postgresql://db/app" and s.lock_timeout_ms == 2000
    assert active_trust_policy(s) == AdapterTrustPolicy(trust_untagged=False,
                                                        trusted_adapters=frozenset({"codex", "claude-code"}))


@pytest.mark.parametrize("text,match", [("Dsn = 'x'\n", "lower-case"), ("dsn = {a = 1}\n", "must be a string"),
                                        ("dsn = \n", "TOML")])
def test_a_bad_settings_file_is_a_typed_error(tmp_path, text, match):
    path = tmp_path / "pymem.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InvalidArguments, match=match):
        Settings.from_file(path)


def test_library_errors_name_settings_not_command_line_flags(monkeypatch):
    with pytest.raises(InvalidArguments) as caught:
        Settings(pooler="session")
    assert "--" not in str(caught.value) and "PYMEM_" not in str(caught.value)
    from pymem import Context
    with pytest.raises(InvalidArguments) as caught:
        Context(tenant="")
    assert "--" not in str(caught.value)
    from pymem.service.auth import TokenVerifier
    with pytest.raises(InvalidArguments) as caught:
        TokenVerifier.from_env({})
    assert "--" not in str(caught.value) and "pymem " not in str(caught.value)


#: Where messages may name a `--option`: the command line, and the demo it runs.
SPEAKS_OF_OPTIONS = ("pymem/cli/", "pymem/tools/")
#: A schema behind the library stops with a message naming `pymem db upgrade` and its `--sql`
#: output: the operator's way to apply a migration, whichever surface hit it (DESIGN: defaults).
NAMES_THE_UPGRADE_COMMAND = {"pymem/migrate.py"}


def test_no_library_message_names_a_command_line_option():
    """String literals outside the command line and the workshop never name a `--option`
    (a command's own arguments to git or to a script it runs are not messages)."""
    import re

    wrong = []
    for path in sorted((REPO / "pymem").rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        if rel.startswith(SPEAKS_OF_OPTIONS) or rel in NAMES_THE_UPGRADE_COMMAND:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                      if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                      and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            if isinstance(node, (ast.List, ast.Tuple)):  # an argument vector being built
                docstrings.update(id(e) for e in node.elts)
            if isinstance(node, ast.Call):
                name = getattr(node.func, "attr", getattr(node.func, "id", ""))
                if name in ("_git", "run", "Popen") or (node.args and isinstance(node.args[0], ast.List)):
                    for sub in ast.walk(node):
                        docstrings.add(id(sub))  # a command line pymem runs, not a message
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings \
                    and re.search(r"(?<![\w-])--[a-z][a-z-]+", node.value):
                wrong.append(f"{rel}:{node.lineno}: {node.value[:60]!r}")
    assert wrong == []
