"""the quarantine: notes the write gate held, released or rejected by an operator

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-02

Applies sql/migrations/0014_quarantine.sql.
"""

from pymem.migrate import apply_sql

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_sql("migrations/0014_quarantine.sql")


def downgrade() -> None:
    raise NotImplementedError("pymem migrations are forward-only; restore from a backup to go back")
