"""learner projection: the projection shown when the learner was switched to active.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-07 06:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # nullable, no default: adding them rewrites nothing (a plain ADD COLUMN, as 0012's: the
    # learners table is referenced by every other one, so SQLite must not copy it), and it is
    # safe while the previous version still serves (that version neither reads nor writes them)
    op.add_column("learners", sa.Column("projection", sa.Text(), nullable=True))
    op.add_column("learners", sa.Column("projected_at", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    op.drop_column("learners", "projected_at")
    op.drop_column("learners", "projection")
