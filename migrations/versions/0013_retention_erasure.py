"""retention (memory expiry, purge) and erasure of a person (pseudonymous ledger)

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-02

Applies sql/migrations/0013_retention_erasure.sql.
"""

from pymem.migrate import apply_sql

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_sql("migrations/0013_retention_erasure.sql")


def downgrade() -> None:
    raise NotImplementedError("pymem migrations are forward-only; restore from a backup to go back")
