"""foundation: roles, schema, RLS, hash chain, revisions, verification

Revision ID: 0001
Revises:
Create Date: 2026-11-29

Applies sql/migrations/0001_foundation.sql: the schema as it was at this revision, frozen. Later
revisions apply the numbered deltas beside it; sql/schema.sql is the canonical whole, and the
migration tests prove that applying every revision from an empty database gives exactly it.
"""

from pymem.migrate import apply_sql

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_sql("migrations/0001_foundation.sql")


def downgrade() -> None:
    raise NotImplementedError("pymem migrations are forward-only; restore from a backup to go back")
