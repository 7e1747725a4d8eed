"""pymem verbs inside a SQLAlchemy Session's transaction: a business row and a memory, atomically.

    from pymem.sqlalchemy import connection

    with Session(engine) as session, session.begin():
        session.add(Order(id=42, customer="acme"))
        admit(memories, "Acme orders by the pallet", Provenance("user_asserted"), conn=connection(session))
    # both committed together; an exception in the block rolls both back

`connection(session)` is the psycopg connection under the Session's current transaction (it
begins one if the Session has not yet: SQLAlchemy begins lazily). pymem joins that transaction
as a savepoint and never commits it: the Session's commit or rollback decides for the memory as
for the business row. The engine must use the psycopg 3 driver (`postgresql+psycopg://`), and its
login must be a member of pymem_app (row-level security applies to it as to pymem's own
connections). Nothing else of SQLAlchemy is used; `import pymem` does not import this module.
"""

from __future__ import annotations

from typing import Any

import psycopg

from .errors import InvalidArguments

__all__ = ["connection"]


def connection(session: Any) -> psycopg.Connection:
    """The psycopg connection of `session`'s current transaction (a SQLAlchemy Session or
    Connection), for pymem's `conn=`."""
    try:
        from sqlalchemy.engine import Connection as SAConnection
        from sqlalchemy.orm import Session
    except ImportError as exc:  # pragma: no cover - sqlalchemy is a dependency of pymem
        raise InvalidArguments("pymem.sqlalchemy needs SQLAlchemy installed") from exc
    if isinstance(session, Session):
        bound = session.connection()
    elif isinstance(session, SAConnection):
        bound = session
    else:
        raise InvalidArguments(f"expected a SQLAlchemy Session or Connection, got {type(session).__name__}")
    driver = bound.connection.driver_connection
    if not isinstance(driver, psycopg.Connection):
        raise InvalidArguments("pymem joins SQLAlchemy sessions on the psycopg 3 driver only "
                               f"(a postgresql+psycopg:// URL), not {bound.dialect.driver}")
    return driver
