"""learner settings: a learner's learning options (policy, half-life, budget, ...) are stored
with it, like its phase, and change only by an explicit command (docs/configuration.md). Existing
learners get none (NULL): they keep the settings of the process that opens them, and their
stored half-life, until a settings command stores them.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-26 18:40:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("learners", sa.Column("settings", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("learners", "settings")
