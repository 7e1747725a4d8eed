"""The per-transaction context: who is acting, for which tenant, as which adapter, in which scope.

Every verb takes its identity from a Context, never from its call arguments; Postgres enforces it
through row-level security once pymem.set_context() has put it in transaction-local settings.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from .errors import ContextError
from .vocabulary import MAX_NAME, is_plain_text

__all__ = ["Context", "parse_scope_pairs", "check_scope"]

def _name(value: object, what: str, *, required: bool) -> str | None:
    if value is None or value == "":
        if required:
            raise ContextError(f"the context's {what} is required")
        return None
    if not isinstance(value, str):
        raise ContextError(f"{what} must be a string, got {type(value).__name__}")
    if len(value) > MAX_NAME or value != value.strip() or not is_plain_text(value):
        raise ContextError(f"{what} must be at most {MAX_NAME} characters, without control or format characters "
                           "or surrounding spaces")
    return value


def check_scope(scope: object, what: str = "scope") -> dict[str, str]:
    """A scope is a flat {axis: value} map of non-empty strings."""
    if scope is None:
        return {}
    if not isinstance(scope, Mapping):
        raise ContextError(f"{what} must be an object of axis -> value, got {type(scope).__name__}")
    out: dict[str, str] = {}
    for axis, value in scope.items():
        if not isinstance(axis, str) or not axis or "\x00" in axis:
            raise ContextError(f"{what} axes must be non-empty strings")
        if not isinstance(value, str) or not value or "\x00" in value:
            raise ContextError(f"{what} value for {axis!r} must be a non-empty string (scopes are flat)")
        out[axis] = value
    return out


@dataclass(frozen=True)
class Context:
    """Who acts. `adapter=None` is an operator connection (writes untagged rows).

    read_adapters: None = no adapter filter on reads; a tuple = strict allow-list (untagged rows
    excluded; an empty tuple reads nothing).
    """

    tenant: str
    actor: str | None = None
    adapter: str | None = None
    scope: Mapping[str, str] = field(default_factory=dict)
    read_adapters: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "tenant", _name(self.tenant, "tenant", required=True))
        object.__setattr__(self, "actor", _name(self.actor, "actor", required=False))
        object.__setattr__(self, "adapter", _name(self.adapter, "adapter", required=False))
        object.__setattr__(self, "scope", MappingProxyType(check_scope(self.scope)))
        if self.read_adapters is not None:
            if isinstance(self.read_adapters, str) or not isinstance(self.read_adapters, Iterable):
                raise ContextError("read_adapters must be a list of adapter names (or None for no filter)")
            names = tuple(_name(a, "adapter", required=True) for a in self.read_adapters)
            object.__setattr__(self, "read_adapters", names)

    def params(self) -> tuple[Any, ...]:
        """Arguments of pymem.set_context()."""
        from psycopg.types.json import Jsonb

        return (
            self.tenant,
            self.actor,
            self.adapter,
            Jsonb(dict(self.scope)),
            list(self.read_adapters) if self.read_adapters is not None else None,
        )


def parse_scope_pairs(pairs: Iterable[str]) -> dict[str, str]:
    """`k=v` strings (CLI --scope, PYMEM_SCOPE) into a scope map."""
    scope: dict[str, str] = {}
    for pair in pairs:
        for part in pair.split(","):
            part = part.strip()
            if not part:
                continue
            axis, sep, value = part.partition("=")
            if not sep or not axis.strip() or not value.strip():
                raise ContextError(f"scope must be given as axis=value, got {part!r}")
            scope[axis.strip()] = value.strip()
    return check_scope(scope)
