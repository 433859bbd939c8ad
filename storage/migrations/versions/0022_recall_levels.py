"""recall levels: the recall target's calibration (engine.recall_levels), the uses a learner's
baseline sessions recorded, kept so that a restarted process and every replica calibrate on
the same ones.

A new table: the previous version neither reads nor writes it, so it can keep serving while
this one rolls out (it calibrates in its own process, as before).

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-08 09:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "recall_levels",
        sa.Column("id", Id, autoincrement=True, nullable=False),
        sa.Column("learner_id", Id, nullable=False),
        sa.Column("level", sa.Float(), nullable=True),
        sa.Column("own", sa.Float(), nullable=True),
        sa.Column("session_key", sa.String(length=256), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["learner_id"], ["learners.id"], name="fk_recall_levels_learner_id_learners"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_recall_levels"),
    )
    op.create_index("ix_recall_levels_learner", "recall_levels", ["learner_id", "id"])


def downgrade() -> None:
    op.drop_index("ix_recall_levels_learner", table_name="recall_levels")
    op.drop_table("recall_levels")
