"""recorded rewards: each posterior row counts the rewards its arm has received since its last
reset (`rewards`, and `prior_rewards` for the part its base holds), so totalReward and accuracy
stay the recorded figures when forgetting decays alpha and beta.

Existing rows: the base's share is read from the base as before (pulls - (beta - 1), which is
exact for a base built without forgetting), then every recorded change of the row's current
epoch is added, so `db verify` holds at once. Reset snapshots take the same reading.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-24 09:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def _from_base(pulls: str, beta: str) -> str:
    return (
        f"CASE WHEN {pulls} - ({beta} - 1.0) < 0 THEN 0.0 "
        f"WHEN {pulls} - ({beta} - 1.0) > {pulls} THEN {pulls} "
        f"ELSE {pulls} - ({beta} - 1.0) END"
    )


def upgrade() -> None:
    for table in ("posteriors", "reset_snapshots"):
        op.add_column(table, sa.Column("rewards", sa.Float(), nullable=False, server_default="0"))
        op.add_column(
            table, sa.Column("prior_rewards", sa.Float(), nullable=False, server_default="0")
        )
        op.execute(
            f"UPDATE {table} SET prior_rewards = {_from_base('prior_pulls', 'prior_beta')}, "
            f"rewards = {_from_base('pulls', 'beta')}"
        )
    op.execute("UPDATE posteriors SET rewards = prior_rewards")
    op.execute(
        """
UPDATE posteriors SET rewards = posteriors.rewards + agg.gained
FROM (SELECT t.learner_id AS learner_id, ta.arm_key AS arm_key, ta.epoch AS epoch,
             SUM(ta.reward) AS gained
      FROM trace_arms ta JOIN traces t ON t.id = ta.trace_pk
      WHERE ta.reward IS NOT NULL
      GROUP BY t.learner_id, ta.arm_key, ta.epoch) AS agg
WHERE posteriors.learner_id = agg.learner_id AND posteriors.arm_key = agg.arm_key
  AND posteriors.epoch = agg.epoch
"""
    )
    op.execute(
        """
UPDATE posteriors SET rewards = posteriors.rewards + agg.gained
FROM (SELECT learner_id, arm_id, epoch, SUM(reward) AS gained FROM observations
      GROUP BY learner_id, arm_id, epoch) AS agg
WHERE posteriors.learner_id = agg.learner_id AND posteriors.arm_id = agg.arm_id
  AND posteriors.epoch = agg.epoch
"""
    )


def downgrade() -> None:
    for table in ("reset_snapshots", "posteriors"):
        op.drop_column(table, "prior_rewards")
        op.drop_column(table, "rewards")
