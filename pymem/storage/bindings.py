"""Login bindings: the adapter, tenants and scope an agent's database login is confined to.

A login (or a group role, binding every member) bound here always writes as its adapter, acts only
in the tenants named, and only inside the scope named, whatever its connection sets: Postgres
enforces it in pymem.set_context and in every policy (sql/schema.sql, section 2). Bindings are
managed through the administrative connection; every change lands in the append-only
pymem.binding_log, whoever makes it and however.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from .. import db, queries
from ..context import check_scope
from ..errors import InvalidArguments, NotFound
from ..vocabulary import MAX_NAME, is_plain_text
from .distribution import sync_bindings

MAX_ADAPTER = MAX_NAME  # the binding table's CHECK, as every adapter name (vocabulary)
MAX_ROLE = 63  # Postgres's identifier length


@dataclass(frozen=True)
class LoginBinding:
    """One row of pymem.login_bindings. `tenants` is None only when the login may act in every tenant."""

    role: str
    adapter: str
    tenants: tuple[str, ...] | None
    scope: Mapping[str, str] = field(default_factory=dict)
    created_at: _dt.datetime | None = None
    created_by: str | None = None

    @property
    def all_tenants(self) -> bool:
        return self.tenants is None

    def to_json(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "adapter": self.adapter,
            "tenants": list(self.tenants) if self.tenants is not None else None,
            "all_tenants": self.all_tenants,
            "scope": dict(self.scope),
            "created_at": self.created_at.isoformat() if self.created_at else None,
            "created_by": self.created_by,
        }


def _name(value: Any, what: str, limit: int) -> str:
    if not isinstance(value, str) or not value or value != value.strip():
        raise InvalidArguments(f"{what} must be a non-empty string without surrounding spaces")
    if len(value) > limit or not is_plain_text(value):
        raise InvalidArguments(f"{what} must be at most {limit} characters, without control or format characters")
    return value


def _row(r: Mapping[str, Any]) -> LoginBinding:
    return LoginBinding(
        role=r["role_name"], adapter=r["adapter"],
        tenants=None if r["all_tenants"] else tuple(r["tenants"] or ()),
        scope=dict(r["scope"] or {}), created_at=r["created_at"], created_by=r["created_by"])


def bind_login(conn: psycopg.Connection, role: str, *, adapter: str, tenants: Iterable[str] | None = None,
               all_tenants: bool = False, scope: Mapping[str, str] | None = None) -> LoginBinding:
    """Bind `role` (a login, or a group whose members are then bound) to `adapter`, the tenants it
    may act in, and the scope it is confined to; replaces an existing binding of the role.

    A binding names at least one tenant, or says `all_tenants=True` explicitly: it never widens to
    every tenant by omission. `conn` is an administrative connection.
    """
    role = _name(role, "role", MAX_ROLE)
    adapter = _name(adapter, "adapter", MAX_ADAPTER)
    names = None if tenants is None else [_name(t, "tenant", MAX_NAME) for t in tenants]
    if all_tenants and names:
        raise InvalidArguments("name tenants or pass all_tenants, not both")
    if not all_tenants and not names:
        raise InvalidArguments("a binding names at least one tenant (or all_tenants=True, explicitly)")
    scope = check_scope(scope or {})
    with db.translate_errors(), conn.transaction(), conn.cursor(row_factory=dict_row) as cur:
        found = cur.execute(queries.query("role_is_superuser"), (role,)).fetchone()
        if found is None:
            raise NotFound(f"role {role!r} does not exist")
        if found["rolsuper"]:
            raise InvalidArguments(f"{role} is a superuser: a binding cannot contain it")
        row = cur.execute(
            queries.query("bind_login"),
            (role, adapter, None if all_tenants or names is None else list(dict.fromkeys(names)), all_tenants,
             Jsonb(scope)),
        ).fetchone()
        sync_bindings(conn)  # on a Citus store, every worker's shards read their node's copy
    return _row(db.one(row))


def unbind_login(conn: psycopg.Connection, role: str) -> bool:
    """Remove `role`'s binding; True if there was one. The login is an operator again."""
    role = _name(role, "role", MAX_ROLE)
    with db.translate_errors(), conn.transaction():
        gone = conn.execute(queries.query("unbind_login"), (role,)).rowcount > 0
        sync_bindings(conn)
        return gone


def list_bindings(conn: psycopg.Connection) -> list[LoginBinding]:
    """Every binding, by role name (an administrative or auditor connection)."""
    with db.translate_errors(), conn.transaction(), conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(queries.query("login_bindings")).fetchall()
    return [_row(r) for r in rows]


__all__ = ["LoginBinding", "bind_login", "unbind_login", "list_bindings"]
