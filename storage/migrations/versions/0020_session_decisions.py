"""session decisions: what a session's set was last decided on, how often it was redrawn.

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-07 07:20:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # nullable, no default: adding them rewrites nothing, so it is safe while the previous
    # version still serves (that version neither reads nor writes them; a row it writes reads
    # as a set with no decision recorded)
    with op.batch_alter_table("session_sets") as batch:
        batch.add_column(sa.Column("turns", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("redraws", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("reason", sa.String(64), nullable=True))
        batch.add_column(sa.Column("decision", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("session_sets") as batch:
        batch.drop_column("decision")
        batch.drop_column("reason")
        batch.drop_column("redraws")
        batch.drop_column("turns")
