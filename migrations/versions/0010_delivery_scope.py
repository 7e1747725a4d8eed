"""delivery scope: a session receives the memories of its own scope and its ancestors, through
definer reads that apply that rule; injection records name only what the session receives

Revision ID: 0010
Revises: 0008
Create Date: 2026-12-02

Applies sql/migrations/0010_delivery_scope.sql.
"""

from pymem.migrate import apply_sql

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_sql("migrations/0010_delivery_scope.sql")


def downgrade() -> None:
    raise NotImplementedError("pymem migrations are forward-only; restore from a backup to go back")
