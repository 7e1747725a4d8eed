"""hybrid search and a delivery's recall cheaper, with the same results

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-02

Applies sql/migrations/0012_recall_latency.sql.
"""

from pymem.migrate import apply_sql

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_sql("migrations/0012_recall_latency.sql")


def downgrade() -> None:
    raise NotImplementedError("pymem migrations are forward-only; restore from a backup to go back")
