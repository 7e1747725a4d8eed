"""trust: filing locks on rows only the tenant can lock, the signing key registered by the
administrative connection alone, origin operator only from operator contexts, erasure completed by
the trigger, injection records within the allow-list, keyed fact channels

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-08

Applies sql/migrations/0009_trust.sql.
"""

from pymem.migrate import apply_sql

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_sql("migrations/0009_trust.sql")


def downgrade() -> None:
    raise NotImplementedError("pymem migrations are forward-only; restore from a backup to go back")
