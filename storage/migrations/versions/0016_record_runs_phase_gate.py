"""The observe write checks the learner's phase and settings in its own statement.

A replica builds the rewards of the runs it observes from the phase and settings it holds,
which may be older than a change another replica made. `learning_bot_record_runs` (migration
0009, replaced by 0010) now also gates on them, in the statement that writes the runs and with
the learner row share-locked as before: when the phase the runs were built under (`p_phase`)
is not the learner's, or the settings they were built under (`p_settings`, JSON; NULL: not
checked) are not its stored ones, nothing is written and the function answers the learner's
phase and `settings_current` false; the caller rebuilds the runs under the learner's state and
calls again. The settings are compared as jsonb (key order and spacing do not matter); a
learner without stored settings compares as JSON `null`.

Two parameters after `p_half_life` and two result columns first make a new signature: the
function is dropped and created again. Downgrading restores 0010's function.

SQLite has no server-side functions: its observe transaction makes the same check
(storage.hotpath).

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-27 01:00:00
"""

from __future__ import annotations

import importlib

from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

_0009 = importlib.import_module(
    "learning_bot.storage.migrations.versions.0009_record_runs_function"
)
_0010 = importlib.import_module("learning_bot.storage.migrations.versions.0010_usage_cache_write")

ARGUMENT_TYPES = _0009.ARGUMENT_TYPES.replace("bigint, float8, ", "bigint, float8, text, text, ", 1)
"""The argument types of the function this revision makes."""

_CHANGES = (
    ("CREATE OR REPLACE FUNCTION", "CREATE FUNCTION"),
    ("p_half_life float8, ", "p_half_life float8, p_phase text, p_settings text, "),
    (
        "RETURNS TABLE (learner_half_life float8,",
        "RETURNS TABLE (learner_phase text, settings_current boolean, learner_half_life float8,",
    ),
    (
        "    v_half_life float8;\n",
        "    v_half_life float8;\n    v_phase text;\n    v_current boolean;\n",
    ),
    (
        "a half-life change waits for this run.\n"
        "    SELECT l.stats_epoch, l.half_life INTO v_epoch, v_half_life\n",
        "a phase or half-life change waits for\n"
        "    -- this run, or this run sees it.\n"
        "    SELECT l.stats_epoch, l.half_life, l.phase,\n"
        "           p_settings IS NULL OR coalesce(l.settings, 'null') = p_settings\n"
        "           OR coalesce(l.settings, 'null')::jsonb = p_settings::jsonb\n"
        "    INTO v_epoch, v_half_life, v_phase, v_current\n",
    ),
    (
        "    -- The gate: the runs were folded with this half-life and every arm has its row.\n"
        "    IF v_half_life <> p_half_life\n",
        "    -- The gate: the runs were built under the learner's phase and settings, folded with\n"
        "    -- its half-life, and every arm has its row.\n"
        "    IF v_phase IS DISTINCT FROM p_phase OR NOT v_current OR v_half_life <> p_half_life\n",
    ),
)


def function() -> str:
    """The function of this revision: 0010's with the phase and settings gate."""
    body: str = _0010._function(with_cache_write=True)
    for old, new in _CHANGES:
        assert body.count(old) == 1, old
        body = body.replace(old, new)
    returns = "RETURN QUERY SELECT v_half_life, "
    assert body.count(returns) == 3
    return body.replace(returns, "RETURN QUERY SELECT v_phase, v_current, v_half_life, ")


def upgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        op.execute(f"DROP FUNCTION {_0009.ARGUMENT_TYPES}")
        op.execute(function())


def downgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        op.execute(f"DROP FUNCTION {ARGUMENT_TYPES}")
        op.execute(_0010._function(with_cache_write=True))
