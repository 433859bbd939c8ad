"""arm keys: trace outcomes name their arm by a small per-learner number instead of its id
string, which makes every observed run's rows several times smaller and cheaper to write.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-22 09:30:00
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

VIEW_0001 = """
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

# Every posterior change as one row: automatic ones (and those bootstrapped from passive traces)
# are the rewarded arm outcomes of traces; manual ones are observation rows.
VIEW = """
CREATE VIEW posterior_changes AS
SELECT t.learner_id AS learner_id, p.arm_id AS arm_id, ta.epoch AS epoch, ta.reward AS reward,
       CASE WHEN t.phase = 'passive' THEN 'bootstrap' ELSE 'auto' END AS source,
       false AS lagged, NULL AS actor, NULL AS reason, t.trace_id AS trace_id,
       t.timestamp AS created_at
FROM trace_arms ta
JOIN traces t ON t.id = ta.trace_pk
JOIN posteriors p ON p.learner_id = t.learner_id AND p.arm_key = ta.arm_key
WHERE ta.reward IS NOT NULL
UNION ALL
SELECT o.learner_id, o.arm_id, o.epoch, o.reward, o.source, o.lagged, o.actor, o.reason,
       t.trace_id, o.created_at
FROM observations o LEFT JOIN traces t ON t.id = o.trace_pk
"""

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _trace_arms(name: str, key: sa.Column[Any]) -> None:
    op.create_table(
        name,
        sa.Column("trace_pk", Id, nullable=False),
        key,
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
        sa.PrimaryKeyConstraint("trace_pk", key.name, name=op.f("pk_trace_arms")),
        sqlite_with_rowid=False,
    )


def upgrade() -> None:
    op.execute("DROP VIEW posterior_changes")
    with op.batch_alter_table("posteriors") as batch:
        batch.add_column(sa.Column("arm_key", sa.Integer(), nullable=True))
    op.execute(
        """
        UPDATE posteriors SET arm_key = (
            SELECT COUNT(*) FROM posteriors p2
            WHERE p2.learner_id = posteriors.learner_id AND p2.arm_id <= posteriors.arm_id
        )
        """
    )
    with op.batch_alter_table("posteriors") as batch:
        batch.alter_column("arm_key", existing_type=sa.Integer(), nullable=False)
        batch.create_unique_constraint("uq_posteriors_learner_arm_key", ["learner_id", "arm_key"])
    op.rename_table("trace_arms", "trace_arms_by_id")
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        op.execute("ALTER TABLE trace_arms_by_id RENAME CONSTRAINT pk_trace_arms TO pk_old_ta")
        op.execute(
            "ALTER TABLE trace_arms_by_id RENAME CONSTRAINT fk_trace_arms_trace_pk_traces "
            "TO fk_old_ta"
        )
    _trace_arms("trace_arms", sa.Column("arm_key", sa.Integer(), nullable=False))
    op.execute(
        """
        INSERT INTO trace_arms (trace_pk, arm_key, included, referenced, token_cost, reward, epoch)
        SELECT ta.trace_pk, p.arm_key, ta.included, ta.referenced, ta.token_cost, ta.reward,
               ta.epoch
        FROM trace_arms_by_id ta
        JOIN traces t ON t.id = ta.trace_pk
        JOIN posteriors p ON p.learner_id = t.learner_id AND p.arm_id = ta.arm_id
        """
    )
    op.drop_table("trace_arms_by_id")
    op.execute(VIEW)


def downgrade() -> None:
    op.execute("DROP VIEW posterior_changes")
    op.rename_table("trace_arms", "trace_arms_by_key")
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        op.execute("ALTER TABLE trace_arms_by_key RENAME CONSTRAINT pk_trace_arms TO pk_old_ta")
        op.execute(
            "ALTER TABLE trace_arms_by_key RENAME CONSTRAINT fk_trace_arms_trace_pk_traces "
            "TO fk_old_ta"
        )
    _trace_arms("trace_arms", sa.Column("arm_id", sa.String(512), nullable=False))
    op.execute(
        """
        INSERT INTO trace_arms (trace_pk, arm_id, included, referenced, token_cost, reward, epoch)
        SELECT ta.trace_pk, p.arm_id, ta.included, ta.referenced, ta.token_cost, ta.reward,
               ta.epoch
        FROM trace_arms_by_key ta
        JOIN traces t ON t.id = ta.trace_pk
        JOIN posteriors p ON p.learner_id = t.learner_id AND p.arm_key = ta.arm_key
        """
    )
    op.drop_table("trace_arms_by_key")
    with op.batch_alter_table("posteriors") as batch:
        batch.drop_constraint("uq_posteriors_learner_arm_key", type_="unique")
        batch.drop_column("arm_key")
    op.execute(VIEW_0001)
