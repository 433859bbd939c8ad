"""alert subscriptions: channels subscribed to a learner's alerts, digests and changes; the
state of each alert; the messages owed to each channel (claimed once); the sender's lease.

Revision ID: 0014
Revises: 0012
Create Date: 2026-11-26 22:10:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0012"
branch_labels = None
depends_on = None

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "alert_subscriptions",
        sa.Column("id", Id, autoincrement=True, nullable=False),
        sa.Column("surface", sa.String(length=64), nullable=False),
        sa.Column("channel", sa.String(length=256), nullable=False),
        sa.Column("scope", sa.String(length=256), nullable=False),
        sa.Column("learner", sa.String(length=128), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("created_by", sa.String(length=256), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("paused_at", sa.BigInteger(), nullable=True),
        sa.Column("paused_reason", sa.Text(), nullable=True),
        sa.Column("timezone", sa.String(length=64), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_alert_subscriptions")),
        sa.UniqueConstraint(
            "surface", "channel", "learner", "kind", name="uq_alert_subscriptions_target"
        ),
    )
    op.create_table(
        "alert_states",
        sa.Column("learner", sa.String(length=128), nullable=False),
        sa.Column("alert", sa.String(length=600), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("episode", sa.Integer(), nullable=False),
        sa.Column("first_seen", sa.BigInteger(), nullable=False),
        sa.Column("last_seen", sa.BigInteger(), nullable=False),
        sa.Column("resolved_at", sa.BigInteger(), nullable=True),
        sa.Column("detail", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("learner", "alert", name=op.f("pk_alert_states")),
    )
    op.create_table(
        "alert_messages",
        sa.Column("subscription_id", Id, nullable=False),
        sa.Column("alert", sa.String(length=600), nullable=False),
        sa.Column("episode", sa.Integer(), nullable=False),
        sa.Column("stage", sa.String(length=16), nullable=False),
        sa.Column("claimed_by", sa.String(length=128), nullable=False),
        sa.Column("claimed_at", sa.BigInteger(), nullable=False),
        sa.Column("sent_at", sa.BigInteger(), nullable=True),
        sa.Column("ref", sa.String(length=256), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint(
            "subscription_id", "alert", "episode", "stage", name=op.f("pk_alert_messages")
        ),
    )
    op.create_index(
        "ix_alert_messages_sent", "alert_messages", ["subscription_id", "sent_at"], unique=False
    )
    op.create_table(
        "alert_leases",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("holder", sa.String(length=128), nullable=False),
        sa.Column("expires_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_alert_leases")),
    )


def downgrade() -> None:
    op.drop_table("alert_leases")
    op.drop_index("ix_alert_messages_sent", table_name="alert_messages")
    op.drop_table("alert_messages")
    op.drop_table("alert_states")
    op.drop_table("alert_subscriptions")
