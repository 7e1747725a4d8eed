"""security: pinned search paths, login bindings with tenants and scope, adapter-keyed
idempotency, database-owned created_at, scoped ledger reads, no table-level UPDATE/DELETE

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30

Applies sql/migrations/0003_security.sql.
"""

from pymem.migrate import apply_sql

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_sql("migrations/0003_security.sql")


def downgrade() -> None:
    raise NotImplementedError("pymem migrations are forward-only; restore from a backup to go back")
