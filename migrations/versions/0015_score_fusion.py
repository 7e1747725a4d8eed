"""hybrid search fused by score

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-02

Applies sql/migrations/0015_score_fusion.sql.
"""

from pymem.migrate import apply_sql

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_sql("migrations/0015_score_fusion.sql")


def downgrade() -> None:
    raise NotImplementedError("pymem migrations are forward-only; restore from a backup to go back")
