"""lessons: lessons with read-time decay, signed convention receipts and their endings, the
installation's signing key, shared-fact notifications, and injection records that name lessons

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02

Applies sql/migrations/0005_lessons.sql.
"""

from pymem.migrate import apply_sql

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_sql("migrations/0005_lessons.sql")


def downgrade() -> None:
    raise NotImplementedError("pymem migrations are forward-only; restore from a backup to go back")
