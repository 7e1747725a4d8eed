"""performance: hash version 2 (built-in renderings) with a re-hash of live rows, a cheaper
flat-scope check, narrow exact-search ranking and a stored record_lite for vector-less results

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-30

Applies sql/migrations/0007_performance.sql.
"""

from pymem.migrate import apply_sql

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_sql("migrations/0007_performance.sql")


def downgrade() -> None:
    raise NotImplementedError("pymem migrations are forward-only; restore from a backup to go back")
