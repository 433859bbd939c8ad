"""session sets: the arms a session's first select decided, kept for its later selects
(docs/sessions.md), so that every replica answers a session with the same arms in one order.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-26 18:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "session_sets",
        sa.Column("learner_id", Id, nullable=False),
        sa.Column("session_key", sa.String(length=256), nullable=False),
        sa.Column("included", sa.Text(), nullable=False),
        sa.Column("left_out", sa.Text(), nullable=False),
        sa.Column("is_baseline", sa.Boolean(), nullable=False),
        sa.Column("decided_at", sa.BigInteger(), nullable=False),
        sa.Column("used_at", sa.BigInteger(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["learner_id"], ["learners.id"], name="fk_session_sets_learner_id_learners"
        ),
        sa.PrimaryKeyConstraint("learner_id", "session_key", name="pk_session_sets"),
    )
    op.create_index("ix_session_sets_used", "session_sets", ["learner_id", "used_at"])


def downgrade() -> None:
    op.drop_index("ix_session_sets_used", table_name="session_sets")
    op.drop_table("session_sets")
