"""observe under concurrent writers: outcome rows without a foreign key, and posterior rows
with room to be rewritten in place on PostgreSQL.

`trace_arms.trace_pk` no longer references `traces.id`.

Every observed run writes one outcome row per arm in the statement that inserts its trace, so
the reference could never fail, yet PostgreSQL checked it row by row at the end of that
statement (one trigger query per outcome, 20 for a 20-arm run) while the run held its
posterior rows locked: every other writer of the same arms waited for those checks. Outcomes
are deleted with their traces by the code that deletes traces (`delete_learner_data`), which
removes them first, so the cascade the key gave is not needed either.

On SQLite the table is rebuilt without the key (SQLite cannot drop one in place), its rows
copied as they are; the posterior_changes view, which reads it, is dropped and made again
from its own definition around that.

On PostgreSQL `posteriors` gets a fill factor of 50. Every observed run rewrites the row of
each of its arms, and a page can only be pruned of old versions when no other backend has it
pinned, which is rare while other writers work on the same rows. With the page full, the new
version goes to another page and both indexes get a new entry: one update in six at 4
writers, and a 20-arm table grown to 4.5 MB in 3 seconds. With half of each page left free,
most versions stay on their page (heap-only updates). Pages written before the migration
fill up as before until the table is rewritten (VACUUM FULL, or a dump and restore).

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-24 08:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

KEY = "fk_trace_arms_trace_pk_traces"
COLUMNS = "trace_pk, arm_key, included, referenced, token_cost, reward, epoch, seq"


def _rebuild_sqlite(with_key: bool) -> None:
    view = (
        op.get_bind()
        .exec_driver_sql(
            "SELECT sql FROM sqlite_master WHERE type = 'view' AND name = 'posterior_changes'"
        )
        .scalar_one()
    )
    op.execute("DROP VIEW posterior_changes")
    op.rename_table("trace_arms", "trace_arms_before_0008")
    key = (
        [sa.ForeignKeyConstraint(["trace_pk"], ["traces.id"], name=KEY, ondelete="CASCADE")]
        if with_key
        else []
    )
    op.create_table(
        "trace_arms",
        sa.Column("trace_pk", sa.Integer(), nullable=False),
        sa.Column("arm_key", sa.Integer(), nullable=False),
        sa.Column("included", sa.Boolean(), nullable=False),
        sa.Column("referenced", sa.Boolean(), nullable=False),
        sa.Column("token_cost", sa.Integer(), nullable=False),
        sa.Column("reward", sa.Float(), nullable=True),
        sa.Column("epoch", sa.Integer(), nullable=True),
        sa.Column("seq", sa.Integer(), nullable=True),
        *key,
        sa.PrimaryKeyConstraint("trace_pk", "arm_key", name="pk_trace_arms"),
        sqlite_with_rowid=False,
    )
    source = "trace_arms_before_0008"
    if with_key:  # rows whose trace is gone could not go back under the key
        source += " WHERE trace_pk IN (SELECT id FROM traces)"
    op.execute(f"INSERT INTO trace_arms ({COLUMNS}) SELECT {COLUMNS} FROM {source}")
    op.drop_table("trace_arms_before_0008")
    op.execute(view)


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        _rebuild_sqlite(with_key=False)
    else:
        op.drop_constraint(KEY, "trace_arms", type_="foreignkey")
        op.execute("ALTER TABLE posteriors SET (fillfactor = 50)")


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        _rebuild_sqlite(with_key=True)
    else:
        op.execute("ALTER TABLE posteriors RESET (fillfactor)")
        op.execute("DELETE FROM trace_arms WHERE trace_pk NOT IN (SELECT id FROM traces)")
        op.create_foreign_key(KEY, "trace_arms", "traces", ["trace_pk"], ["id"], ondelete="CASCADE")
