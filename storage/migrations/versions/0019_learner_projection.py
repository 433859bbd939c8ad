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
    # nullable, no default: adding them rewrites nothing, so it is safe while the previous
    # version still serves (that version neither reads nor writes them)
    with op.batch_alter_table("learners") as batch:
        batch.add_column(sa.Column("projection", sa.Text(), nullable=True))
        batch.add_column(sa.Column("projected_at", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("learners") as batch:
        batch.drop_column("projected_at")
        batch.drop_column("projection")
