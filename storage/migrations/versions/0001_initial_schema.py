"""initial schema: learners, posteriors, traces and their arm outcomes, manual observations,
sharded run counters, resets with snapshots, the audit log, and the posterior_changes view.

Revision ID: 0001
Revises:
Create Date: 2026-11-22 07:40:46.045330
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

# Every posterior change as one row: automatic ones (and those bootstrapped from passive traces)
# are the rewarded arm outcomes of traces; manual ones are observation rows.
POSTERIOR_CHANGES_VIEW = """
CREATE VIEW posterior_changes AS
SELECT t.learner_id AS learner_id, ta.arm_id AS arm_id, ta.epoch AS epoch, ta.reward AS reward,
       CASE WHEN t.phase = 'passive' THEN 'bootstrap' ELSE 'auto' END AS source,
       false AS lagged, NULL AS actor, NULL AS reason, t.trace_id AS trace_id,
       t.timestamp AS created_at
FROM trace_arms ta JOIN traces t ON t.id = ta.trace_pk
WHERE ta.reward IS NOT NULL
UNION ALL
SELECT o.learner_id, o.arm_id, o.epoch, o.reward, o.source, o.lagged, o.actor, o.reason,
       t.trace_id, o.created_at
FROM observations o LEFT JOIN traces t ON t.id = o.trace_pk
"""


def upgrade() -> None:
    op.create_table(
        "learners",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("phase", sa.String(length=16), nullable=False),
        sa.Column("stats_epoch", sa.Integer(), nullable=False),
        sa.Column("status_from_epoch", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_learners")),
        sa.UniqueConstraint("name", name=op.f("uq_learners_name")),
    )
    op.create_table(
        "audit_log",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column(
            "learner_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column("kind", sa.String(length=64), nullable=False),
        sa.Column("actor", sa.String(length=256), nullable=False),
        sa.Column("surface", sa.String(length=64), nullable=False),
        sa.Column("detail", sa.Text(), nullable=False),
        sa.Column("result", sa.Text(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["learner_id"], ["learners.id"], name=op.f("fk_audit_log_learner_id_learners")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_log")),
    )
    with op.batch_alter_table("audit_log", schema=None) as batch_op:
        batch_op.create_index("ix_audit_learner_id", ["learner_id", "id"], unique=False)

    op.create_table(
        "posteriors",
        sa.Column(
            "learner_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column("arm_id", sa.String(length=512), nullable=False),
        sa.Column("label", sa.String(length=512), nullable=False),
        sa.Column("token_cost", sa.Integer(), nullable=False),
        sa.Column("alpha", sa.Float(), nullable=False),
        sa.Column("beta", sa.Float(), nullable=False),
        sa.Column("pulls", sa.Integer(), nullable=False),
        sa.Column("last_updated", sa.BigInteger(), nullable=True),
        sa.Column("prior_alpha", sa.Float(), nullable=False),
        sa.Column("prior_beta", sa.Float(), nullable=False),
        sa.Column("prior_pulls", sa.Integer(), nullable=False),
        sa.Column("epoch", sa.Integer(), nullable=False),
        sa.Column("reset_trace_pk", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["learner_id"], ["learners.id"], name=op.f("fk_posteriors_learner_id_learners")
        ),
        sa.PrimaryKeyConstraint("learner_id", "arm_id", name=op.f("pk_posteriors")),
    )
    op.create_table(
        "resets",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column(
            "learner_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column("all_arms", sa.Boolean(), nullable=False),
        sa.Column("arm_ids", sa.Text(), nullable=False),
        sa.Column("actor", sa.String(length=256), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("previous_status_from_epoch", sa.Integer(), nullable=False),
        sa.Column("undone_at", sa.BigInteger(), nullable=True),
        sa.Column("undone_by", sa.String(length=256), nullable=True),
        sa.ForeignKeyConstraint(
            ["learner_id"], ["learners.id"], name=op.f("fk_resets_learner_id_learners")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_resets")),
    )
    op.create_table(
        "run_stats",
        sa.Column(
            "learner_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column("stats_epoch", sa.Integer(), nullable=False),
        sa.Column("shard", sa.Integer(), nullable=False),
        sa.Column("trace_count", sa.BigInteger(), nullable=False),
        sa.Column("total_tokens", sa.BigInteger(), nullable=False),
        sa.Column("min_ts", sa.BigInteger(), nullable=True),
        sa.Column("max_ts", sa.BigInteger(), nullable=True),
        sa.Column("baseline_runs", sa.BigInteger(), nullable=False),
        sa.Column("baseline_tokens", sa.BigInteger(), nullable=False),
        sa.Column("baseline_duration", sa.BigInteger(), nullable=False),
        sa.Column("selected_runs", sa.BigInteger(), nullable=False),
        sa.Column("selected_tokens", sa.BigInteger(), nullable=False),
        sa.Column("selected_duration", sa.BigInteger(), nullable=False),
        sa.Column("changes", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["learner_id"], ["learners.id"], name=op.f("fk_run_stats_learner_id_learners")
        ),
        sa.PrimaryKeyConstraint("learner_id", "stats_epoch", "shard", name=op.f("pk_run_stats")),
    )
    op.create_table(
        "traces",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column(
            "learner_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column("trace_id", sa.String(length=256), nullable=False),
        sa.Column("run_id", sa.String(length=256), nullable=False),
        sa.Column("session_id", sa.String(length=256), nullable=False),
        sa.Column("session_key", sa.String(length=256), nullable=False),
        sa.Column("channel", sa.String(length=256), nullable=False),
        sa.Column("conversation", sa.String(length=256), nullable=False),
        sa.Column("timestamp", sa.BigInteger(), nullable=False),
        sa.Column("provider", sa.String(length=256), nullable=False),
        sa.Column("model", sa.String(length=256), nullable=False),
        sa.Column("is_baseline", sa.Boolean(), nullable=False),
        sa.Column("phase", sa.String(length=16), nullable=False),
        sa.Column("guard", sa.String(length=32), nullable=True),
        sa.Column("usage_input", sa.BigInteger(), nullable=False),
        sa.Column("usage_output", sa.BigInteger(), nullable=False),
        sa.Column("usage_cache_read", sa.BigInteger(), nullable=False),
        sa.Column("usage_total", sa.BigInteger(), nullable=False),
        sa.Column("duration_ms", sa.BigInteger(), nullable=False),
        sa.Column("system_prompt_chars", sa.BigInteger(), nullable=False),
        sa.Column("aborted", sa.Boolean(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("context", sa.Text(), nullable=False),
        sa.Column("stats_epoch", sa.Integer(), nullable=False),
        sa.Column("bootstrapped", sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(
            ["learner_id"], ["learners.id"], name=op.f("fk_traces_learner_id_learners")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_traces")),
        sa.UniqueConstraint("learner_id", "trace_id", name=op.f("uq_traces_learner_id")),
    )
    with op.batch_alter_table("traces", schema=None) as batch_op:
        batch_op.create_index(
            "ix_traces_learner_conversation",
            ["learner_id", "conversation", "timestamp"],
            unique=False,
        )
        batch_op.create_index("ix_traces_learner_time", ["learner_id", "timestamp"], unique=False)

    op.create_table(
        "observations",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column(
            "learner_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column("arm_id", sa.String(length=512), nullable=False),
        sa.Column("epoch", sa.Integer(), nullable=False),
        sa.Column("reward", sa.Float(), nullable=False),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("lagged", sa.Boolean(), nullable=False),
        sa.Column("actor", sa.String(length=256), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("trace_pk", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=True),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["learner_id"], ["learners.id"], name=op.f("fk_observations_learner_id_learners")
        ),
        sa.ForeignKeyConstraint(
            ["trace_pk"],
            ["traces.id"],
            name=op.f("fk_observations_trace_pk_traces"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_observations")),
    )
    with op.batch_alter_table("observations", schema=None) as batch_op:
        batch_op.create_index(
            "ix_observations_arm_epoch", ["learner_id", "arm_id", "epoch"], unique=False
        )

    op.create_table(
        "reset_snapshots",
        sa.Column("reset_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("arm_id", sa.String(length=512), nullable=False),
        sa.Column("alpha", sa.Float(), nullable=False),
        sa.Column("beta", sa.Float(), nullable=False),
        sa.Column("pulls", sa.Integer(), nullable=False),
        sa.Column("last_updated", sa.BigInteger(), nullable=True),
        sa.Column("prior_alpha", sa.Float(), nullable=False),
        sa.Column("prior_beta", sa.Float(), nullable=False),
        sa.Column("prior_pulls", sa.Integer(), nullable=False),
        sa.Column("epoch", sa.Integer(), nullable=False),
        sa.Column("reset_trace_pk", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["reset_id"],
            ["resets.id"],
            name=op.f("fk_reset_snapshots_reset_id_resets"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("reset_id", "arm_id", name=op.f("pk_reset_snapshots")),
    )
    op.create_table(
        "trace_arms",
        sa.Column("trace_pk", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("arm_id", sa.String(length=512), nullable=False),
        sa.Column("included", sa.Boolean(), nullable=False),
        sa.Column("referenced", sa.Boolean(), nullable=False),
        sa.Column("token_cost", sa.Integer(), nullable=False),
        sa.Column("reward", sa.Float(), nullable=True),
        sa.Column("epoch", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(
            ["trace_pk"],
            ["traces.id"],
            name=op.f("fk_trace_arms_trace_pk_traces"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("trace_pk", "arm_id", name=op.f("pk_trace_arms")),
        sqlite_with_rowid=False,
    )
    op.execute(POSTERIOR_CHANGES_VIEW)


def downgrade() -> None:
    op.execute("DROP VIEW posterior_changes")
    op.drop_table("trace_arms")
    op.drop_table("reset_snapshots")
    with op.batch_alter_table("observations", schema=None) as batch_op:
        batch_op.drop_index("ix_observations_arm_epoch")

    op.drop_table("observations")
    with op.batch_alter_table("traces", schema=None) as batch_op:
        batch_op.drop_index("ix_traces_learner_time")
        batch_op.drop_index("ix_traces_learner_conversation")

    op.drop_table("traces")
    op.drop_table("run_stats")
    op.drop_table("resets")
    op.drop_table("posteriors")
    with op.batch_alter_table("audit_log", schema=None) as batch_op:
        batch_op.drop_index("ix_audit_learner_id")

    op.drop_table("audit_log")
    op.drop_table("learners")
