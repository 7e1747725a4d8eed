"""one schema for plain Postgres and Citus

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-02

Applies sql/migrations/0016_citus.sql.
"""

from pymem.migrate import apply_sql

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_sql("migrations/0016_citus.sql")


def downgrade() -> None:
    raise NotImplementedError("pymem migrations are forward-only; restore from a backup to go back")
