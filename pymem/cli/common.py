"""What every command shares: context options, opening the store, output, and error mapping.

Exit codes: 0 success, 1 a finding or a refusal (verify found tampering, admission refused),
2 usage, connection or configuration errors.
"""

from __future__ import annotations

import functools
import importlib
import json
import sys
from collections.abc import Callable
from typing import Any, cast

import click

from .. import Context, PymemError, Settings, Store
from ..context import parse_scope_pairs
from ..errors import ServerError


class PymemCommandError(click.ClickException):
    """A library error shown as `Error: ...` with the error's own exit code."""

    def __init__(self, message: str, exit_code: int = 1):
        super().__init__(message)
        self.exit_code = exit_code  # type: ignore[misc, unused-ignore]  # some click releases declare it a ClassVar; each error sets its own


def handle_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except PymemError as exc:
            raise PymemCommandError(str(exc), exit_code=exc.exit_code) from exc
    return wrapper


#: What `pymem bench` and `pymem eval recall` say where the workshop is not installed.
WORKSHOP_HINT = ("needs the benchmarks of a source checkout (the benchmarks/ package is not in the pymem-pg "
                 "wheel): in a clone of the repository, pip install -e '.[test]' and run it there")


def workshop(module: str, command: str) -> Any:
    """`benchmarks.<module>` from a development install, imported when the command runs; absent
    (a plain install), a usage error (exit 2) saying how to get it."""
    try:
        return importlib.import_module(f"benchmarks.{module}")
    except ModuleNotFoundError as exc:
        if exc.name not in ("benchmarks", f"benchmarks.{module}"):
            raise
        raise PymemCommandError(f"{command} {WORKSHOP_HINT}", exit_code=2) from None


def command_settings() -> Settings:
    """The settings of the command being run: built from the environment once per command."""
    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return Settings.from_env()
    meta = ctx.find_root().meta
    if "pymem.settings" not in meta:
        meta["pymem.settings"] = Settings.from_env()
    return cast(Settings, meta["pymem.settings"])


def from_settings(name: str) -> Callable[[], str | None]:
    """An option's default: the variable `name` of the command's settings (None when unset)."""
    def default() -> str | None:
        try:
            return command_settings().value(name) or None
        except PymemError as exc:
            raise click.UsageError(str(exc)) from exc
    return default


def context_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """--tenant/--actor/--adapter/--scope with PYMEM_* defaults; passes `ctx: Context`."""

    @click.option("--tenant", default=from_settings("PYMEM_TENANT"),
                  help="Tenant to act for [env: PYMEM_TENANT] (required).")
    @click.option("--actor", default=from_settings("PYMEM_ACTOR"), help="Acting user or agent id [env: PYMEM_ACTOR].")
    @click.option("--adapter", default=from_settings("PYMEM_ADAPTER"),
                  help="Source adapter (agent CLI) writing; unset = operator [env: PYMEM_ADAPTER].")
    @click.option("--scope", "scope_pairs", multiple=True, metavar="AXIS=VALUE",
                  help="Scope axis, repeatable [env: PYMEM_SCOPE, comma-separated].")
    @functools.wraps(fn)
    def wrapper(*args: Any, tenant: str | None, actor: str | None, adapter: str | None,
                scope_pairs: tuple[str, ...], **kwargs: Any) -> Any:
        kwargs["ctx"] = build_context(tenant, actor, adapter, scope_pairs)
        return fn(*args, **kwargs)

    return wrapper


def build_context(tenant: str | None, actor: str | None, adapter: str | None,
                  scope_pairs: tuple[str, ...] | list[str]) -> Context:
    if not tenant:
        raise click.UsageError("a tenant is required: pass --tenant or set PYMEM_TENANT")
    try:
        default_scope = command_settings().context_scope
        pairs = list(scope_pairs) or ([default_scope] if default_scope else [])
        return Context(tenant=tenant, actor=actor or None, adapter=adapter or None, scope=parse_scope_pairs(pairs))
    except PymemError as exc:
        raise click.UsageError(str(exc)) from exc


#: The output contract of --json, the same for every command: one JSON document (an object, or an
#: array for a list), except the commands that stream, which print JSON Lines (one document per line,
#: each as it comes) and say so in their --help. tests/unit/test_cli_json.py walks every command.
JSON_DOCUMENT_HELP = "Print one JSON document (for machines)."
JSON_LINES_HELP = "Print JSON Lines: one JSON document per line, each as it comes (for machines)."
json_option = click.option("--json", "as_json", is_flag=True, help=JSON_DOCUMENT_HELP)
json_lines_option = click.option("--json", "as_json", is_flag=True, help=JSON_LINES_HELP)


def open_store() -> Store:
    """Open the store from the environment (embedded when PYMEM_DSN is unset)."""
    try:
        return Store.open(command_settings())
    except PymemError:
        raise
    except Exception as exc:  # a driver or server failure we did not anticipate
        raise ServerError(f"cannot open the store: {exc}") from exc


def echo_json(value: Any) -> None:
    click.echo(json.dumps(value, ensure_ascii=False, default=str, sort_keys=False))


def stderr(message: str) -> None:
    click.echo(message, err=True)


def table(rows: list[dict[str, Any]], columns: list[str]) -> None:
    """A plain aligned table."""
    if not rows:
        click.echo("(none)")
        return
    cells = [[("" if r.get(c) is None else str(r.get(c))) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    click.echo("  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=False)).rstrip())
    for row in cells:
        click.echo("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=False)).rstrip())


def is_tty() -> bool:
    return sys.stderr.isatty()
