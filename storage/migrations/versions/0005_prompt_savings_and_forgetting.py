"""prompt savings counters, forgetting (half-life) and the order of posterior changes

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23 22:20:00.000000

run_stats gains, for selected runs, the token costs of every offered arm and of the arms that
went into the prompt; existing counters are back-filled from trace_arms (into one shard row of
each learner and epoch). learners gains `half_life` (0: never forget). trace_arms and
observations gain `seq`: the arm's pull count once the change was applied, the order in which
`db verify` replays decayed changes (NULL for changes recorded before this revision).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

_BACKFILL = """
UPDATE run_stats SET
  offered_prompt_tokens = (
    SELECT COALESCE(SUM(ta.token_cost), 0)
    FROM trace_arms ta JOIN traces t ON t.id = ta.trace_pk
    WHERE t.learner_id = run_stats.learner_id AND t.stats_epoch = run_stats.stats_epoch
      AND NOT t.is_baseline),
  selected_prompt_tokens = (
    SELECT COALESCE(SUM(CASE WHEN ta.included THEN ta.token_cost ELSE 0 END), 0)
    FROM trace_arms ta JOIN traces t ON t.id = ta.trace_pk
    WHERE t.learner_id = run_stats.learner_id AND t.stats_epoch = run_stats.stats_epoch
      AND NOT t.is_baseline)
WHERE shard = (SELECT MIN(s.shard) FROM run_stats s
               WHERE s.learner_id = run_stats.learner_id AND s.stats_epoch = run_stats.stats_epoch)
"""


def upgrade() -> None:
    for name in ("offered_prompt_tokens", "selected_prompt_tokens"):
        op.add_column(
            "run_stats", sa.Column(name, sa.BigInteger(), nullable=False, server_default="0")
        )
    op.add_column(
        "learners", sa.Column("half_life", sa.Float(), nullable=False, server_default="0")
    )
    op.add_column("trace_arms", sa.Column("seq", sa.Integer(), nullable=True))
    op.add_column("observations", sa.Column("seq", sa.Integer(), nullable=True))
    op.execute(_BACKFILL)


def downgrade() -> None:
    op.drop_column("observations", "seq")
    op.drop_column("trace_arms", "seq")
    op.drop_column("learners", "half_life")
    op.drop_column("run_stats", "selected_prompt_tokens")
    op.drop_column("run_stats", "offered_prompt_tokens")
