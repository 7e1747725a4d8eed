"""the store's embedder, and hybrid (full-text + vector) search

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01

Applies sql/migrations/0011_hybrid_recall.sql.
"""

from pymem.migrate import apply_sql

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_sql("migrations/0011_hybrid_recall.sql")


def downgrade() -> None:
    raise NotImplementedError("pymem migrations are forward-only; restore from a backup to go back")
