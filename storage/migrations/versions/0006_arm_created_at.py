"""arm creation time: an arm's lastUpdated reads as the time its posterior row was created
until its first update, instead of null. Rows that exist already take their learner's creation
time.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-23 22:10:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # A plain ADD COLUMN (no table rebuild: the posterior_changes view reads posteriors).
    op.add_column("posteriors", sa.Column("created_at", sa.BigInteger(), nullable=True))
    op.execute(
        "UPDATE posteriors SET created_at = "
        "(SELECT l.created_at FROM learners l WHERE l.id = posteriors.learner_id)"
    )


def downgrade() -> None:
    op.drop_column("posteriors", "created_at")
