"""usage.cacheWrite: the prompt tokens a run wrote to the provider's prefix cache (Anthropic's
cache_creation_input_tokens), priced apart from uncached input and cache reads. Traces stored
before it read 0.

On PostgreSQL `learning_bot_record_runs` (migration 0009) names the trace columns it inserts,
so it is replaced by the same function with this column among them; its signature is unchanged.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-26 18:00:00
"""

from __future__ import annotations

import importlib

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

_PREVIOUS = importlib.import_module(
    "learning_bot.storage.migrations.versions.0009_record_runs_function"
)
_COLUMNS = "usage_cache_read, "
_WITH_CACHE_WRITE = "usage_cache_read, usage_cache_write, "


def _function(with_cache_write: bool) -> str:
    """0009's function, created or replaced, inserting `usage_cache_write` or not."""
    body: str = _PREVIOUS.FUNCTION.replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", 1)
    if with_cache_write:
        # The column list and the matching `r.<column>` values list.
        body = body.replace(_COLUMNS, _WITH_CACHE_WRITE, 1)
        body = body.replace("r.usage_cache_read, ", "r.usage_cache_read, r.usage_cache_write, ", 1)
    return body


def upgrade() -> None:
    op.add_column(
        "traces",
        sa.Column("usage_cache_write", sa.BigInteger(), nullable=False, server_default="0"),
    )
    if op.get_bind().dialect.name != "sqlite":
        op.execute(_function(with_cache_write=True))


def downgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        op.execute(_function(with_cache_write=False))
    op.drop_column("traces", "usage_cache_write")
