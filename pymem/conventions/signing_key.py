"""The installation's signing key in the database: registered by the administrative connection only.

Every convention receipt must be signed with the key registered in pymem.signing_keys, and a
rule is in force only while its signature verifies against it. Were registration first come,
first served, any app or agent login could register a key of its own before the installation
did, and every tenant's filing would fail; so pymem.register_signing_key answers only a login
that is a member of pymem_owner (the administrative connection: `pymem db register-key`, or a
store that holds an administrative DSN, such as the embedded server's), and the app role has no
EXECUTE on it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

import psycopg

from .. import db, queries
from ..context import Context
from ..errors import AccessDenied, InvalidArguments

if TYPE_CHECKING:  # pragma: no cover
    from ..storage.store import Store

__all__ = ["register_signing_key", "registered_signing_key", "ensure_registered"]


def _check_hex(public_key: object) -> str:
    if not isinstance(public_key, str) or len(public_key) != 64 or any(c not in "0123456789abcdef" for c in public_key):
        raise InvalidArguments("a signing key is 64 lowercase hex digits (a raw Ed25519 public key)")
    return public_key


def register_signing_key(conn: psycopg.Connection, public_key: str) -> str:
    """Register the installation's public key (64 hex digits) on the administrative connection
    `conn`, or confirm it when it is the one registered. AccessDenied when another key is
    registered (replacing it is an administrator's act on the table) or when `conn` is not an
    administrative connection."""
    public_key = _check_hex(public_key)
    with db.translate_errors(), conn.transaction():
        return cast("str", db.one(conn.execute(queries.query("register_signing_key"), (public_key,)).fetchone())[0])


def registered_signing_key(conn: psycopg.Connection) -> str | None:
    """The public key registered in the database, if any (any pymem connection may read it)."""
    with db.translate_errors(), conn.transaction():
        row = conn.execute(queries.query("registered_signing_key")).fetchone()
    return row[0] if row else None


def ensure_registered(store: Store, ctx: Context, public_key: str, *, conn: psycopg.Connection | None = None) -> None:
    """Make sure receipts signed with `public_key` will be accepted: it is the registered key, or
    no key is registered yet and the store's administrative connection registers it now. Raises
    AccessDenied naming what to do otherwise; nothing is written."""
    with store.transaction(ctx, conn) as c:
        row = c.execute(queries.query("registered_signing_key")).fetchone()
    if row is not None:
        if row[0] != public_key:
            raise AccessDenied(f"this database trusts another signing key ({row[0][:16]}...), not this installation's "
                               f"({public_key[:16]}...): receipts must be signed with the registered key "
                               "(PYMEM_SIGNING_KEY)")
        return
    try:
        with store.admin_connection() as admin:
            register_signing_key(admin, public_key)
    except AccessDenied:
        raise AccessDenied("no signing key is registered in this database, and only the administrative connection "
                           "may register one: run `pymem db register-key` (PYMEM_ADMIN_DSN) with this "
                           "installation's PYMEM_SIGNING_KEY") from None
