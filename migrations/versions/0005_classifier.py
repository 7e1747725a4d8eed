"""classifier: admission refusals carry the classifier's score and the deciding piece's digest

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02

Applies sql/migrations/0005_classifier.sql.
"""

from pymem.migrate import apply_sql

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_sql("migrations/0005_classifier.sql")


def downgrade() -> None:
    raise NotImplementedError("pymem migrations are forward-only; restore from a backup to go back")
