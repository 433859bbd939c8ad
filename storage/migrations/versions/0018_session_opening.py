"""session opening: the hashed word features of the message a session's set was decided on.

Revision ID: 0018
Revises: 0016
Create Date: 2026-11-27 00:45:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # nullable, no default: adding it rewrites nothing, so it is safe while the previous
    # version still serves (that version neither reads nor writes it)
    with op.batch_alter_table("session_sets") as batch:
        batch.add_column(sa.Column("opening", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("session_sets") as batch:
        batch.drop_column("opening")
