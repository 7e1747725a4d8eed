"""foundation: roles, schema, RLS, hash chain, revisions, verification

Revision ID: 0001
Revises:
Create Date: 2026-11-29

Applies sql/schema.sql as the baseline. When a second revision is added, this one must keep
applying the schema *as of this revision*: freeze a copy in sql/migrations/0001_foundation.sql
first (tests/test_migrations.py checks the rule).
"""

from pymem.migrate import apply_sql

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_sql("schema.sql")


def downgrade() -> None:
    raise NotImplementedError("pymem migrations are forward-only; restore from a backup to go back")
