"""scoped search: per-(tenant, scope) live counts, a scope index, and a search plan chosen from
the number of rows in scope

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01

Applies sql/migrations/0008_scoped_search.sql.
"""

from pymem.migrate import apply_sql

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_sql("migrations/0008_scoped_search.sql")


def downgrade() -> None:
    raise NotImplementedError("pymem migrations are forward-only; restore from a backup to go back")
