"""delivery: sessions, hot-memory events, injection records, erasure with a reason, search as of a
past time

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01

Applies sql/migrations/0004_delivery.sql.
"""

from pymem.migrate import apply_sql

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_sql("migrations/0004_delivery.sql")


def downgrade() -> None:
    raise NotImplementedError("pymem migrations are forward-only; restore from a backup to go back")
