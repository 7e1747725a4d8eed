"""classifier: admission refusals carry the classifier's score and the deciding piece's digest

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-02

Applies sql/migrations/0006_classifier.sql.
"""

from pymem.migrate import apply_sql

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_sql("migrations/0006_classifier.sql")


def downgrade() -> None:
    raise NotImplementedError("pymem migrations are forward-only; restore from a backup to go back")
