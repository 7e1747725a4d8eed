"""Alembic environment for pymem.

Revisions apply SQL from sql/ and nothing else. The version table lives in the pymem schema
(pymem.alembic_version), never in the host application's alembic_version. Offline mode
(`pymem db upgrade --sql`) needs no server: it prints the SQL a DBA can review and apply.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine, pool

config = context.config
VERSION_OPTIONS = dict(version_table="alembic_version", version_table_schema="pymem")

# The version table needs its schema before the first revision runs.
BOOTSTRAP = "create schema if not exists pymem"
# pymem checks the schema revision through its own (non-owner) roles.
GRANT_VERSION = "grant select on pymem.alembic_version to pymem_app, pymem_auditor"


def run_offline() -> None:
    context.configure(
        url="postgresql+psycopg://",
        dialect_name="postgresql",
        literal_binds=True,
        transactional_ddl=True,
        **VERSION_OPTIONS,
    )
    with context.begin_transaction():
        context.execute(BOOTSTRAP)
        context.run_migrations()
        context.execute(GRANT_VERSION)


def run_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    engine = create_engine(config.get_main_option("sqlalchemy.url"), poolclass=pool.NullPool)
    with engine.connect() as conn:
        _run(conn)


def _run(connection) -> None:
    context.configure(connection=connection, transactional_ddl=True, **VERSION_OPTIONS)
    with context.begin_transaction():
        context.execute(BOOTSTRAP)
        context.run_migrations()
        context.execute(GRANT_VERSION)


if context.is_offline_mode():
    run_offline()
else:
    run_online()
