"""context words: the forms a learner's message word features were written in (engine.
feature_words), one row per (hashed feature, lower-cased word) with how often it was seen, so
explanations on every replica name a word as users write it. Single words only, never a
message.

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-07 06:45:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    # a new table: the previous version neither reads nor writes it
    op.create_table(
        "context_words",
        sa.Column("learner_id", Id, nullable=False),
        sa.Column("feature", sa.BigInteger(), nullable=False),
        sa.Column("word", sa.String(length=64), nullable=False),
        sa.Column("seen", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["learner_id"], ["learners.id"], name="fk_context_words_learner_id_learners"
        ),
        sa.PrimaryKeyConstraint("learner_id", "feature", "word", name="pk_context_words"),
    )


def downgrade() -> None:
    op.drop_table("context_words")
