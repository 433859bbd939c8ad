"""context evidence: the context-aware policy's per-feature evidence (docs/context.md): per
learner, one row per (hashed feature, arm) with the arm's rewards and runs under the feature as
of the learner's observation count `tick`. Hashes only: no message text is stored.

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-26 22:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "context_evidence",
        sa.Column("learner_id", Id, nullable=False),
        sa.Column("feature", sa.BigInteger(), nullable=False),
        sa.Column("arm_id", sa.String(length=512), nullable=False),
        sa.Column("rewards", sa.Float(), nullable=False),
        sa.Column("runs", sa.Float(), nullable=False),
        sa.Column("tick", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["learner_id"], ["learners.id"], name="fk_context_evidence_learner_id_learners"
        ),
        sa.PrimaryKeyConstraint("learner_id", "feature", "arm_id", name="pk_context_evidence"),
    )
    op.create_index("ix_context_evidence_tick", "context_evidence", ["learner_id", "tick"])


def downgrade() -> None:
    op.drop_index("ix_context_evidence_tick", table_name="context_evidence")
    op.drop_table("context_evidence")
