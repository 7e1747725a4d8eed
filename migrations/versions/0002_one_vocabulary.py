"""one vocabulary: the pymem.origin domain, adapter names as long as a context's, the chain-lock probe

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01

Applies sql/migrations/0002_one_vocabulary.sql.
"""

from pymem.migrate import apply_sql

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_sql("migrations/0002_one_vocabulary.sql")


def downgrade() -> None:
    raise NotImplementedError("pymem migrations are forward-only; restore from a backup to go back")
