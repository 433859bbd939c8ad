"""The read queries behind status, as SQL text shared by SqlStore (through SQLAlchemy, on SQLite
and PostgreSQL) and by LiteReader (through the standard library's sqlite3, so a one-shot
`learning-bot status` starts without importing SQLAlchemy). Placeholders are `?`.

The text imports nothing but the standard library; the functions that turn rows into the
engine's records import the engine when they are called."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from learning_bot.engine.ports import ArmRecord, LearnerState, RunStats
    from learning_bot.engine.savings import SessionUsage
    from learning_bot.engine.store_records import ResetRecord

LEARNER_BY_NAME = "SELECT id FROM learners WHERE name = ?"

LEARNER_STATE = """
SELECT l.id, l.name, l.phase,
       (SELECT COALESCE(SUM(s.changes), 0) FROM run_stats s WHERE s.learner_id = l.id),
       l.half_life, l.settings
FROM learners l WHERE l.id = ?
"""

ARMS = """
SELECT arm_id, label, token_cost, alpha, beta, pulls, COALESCE(last_updated, created_at), arm_key,
  prior_alpha, prior_beta, prior_pulls, reset_trace_pk, rewards
FROM posteriors WHERE learner_id = ?
"""

RUN_STATS = """
SELECT
  COALESCE(SUM(CASE WHEN s.stats_epoch >= l.status_from_epoch THEN s.trace_count END), 0),
  COALESCE(SUM(CASE WHEN s.stats_epoch >= l.status_from_epoch THEN s.total_tokens END), 0),
  MIN(CASE WHEN s.stats_epoch >= l.status_from_epoch THEN s.min_ts END),
  MAX(CASE WHEN s.stats_epoch >= l.status_from_epoch THEN s.max_ts END),
  COALESCE(SUM(CASE WHEN s.stats_epoch >= l.status_from_epoch THEN s.baseline_runs END), 0),
  COALESCE(SUM(CASE WHEN s.stats_epoch >= l.status_from_epoch THEN s.baseline_tokens END), 0),
  COALESCE(SUM(CASE WHEN s.stats_epoch >= l.status_from_epoch THEN s.baseline_duration END), 0),
  COALESCE(SUM(CASE WHEN s.stats_epoch >= l.status_from_epoch THEN s.selected_runs END), 0),
  COALESCE(SUM(CASE WHEN s.stats_epoch >= l.status_from_epoch THEN s.selected_tokens END), 0),
  COALESCE(SUM(CASE WHEN s.stats_epoch >= l.status_from_epoch THEN s.selected_duration END), 0),
  COALESCE(SUM(s.trace_count), 0),
  COALESCE(SUM(CASE WHEN s.stats_epoch >= l.status_from_epoch
               THEN s.offered_prompt_tokens END), 0),
  COALESCE(SUM(CASE WHEN s.stats_epoch >= l.status_from_epoch
               THEN s.selected_prompt_tokens END), 0)
FROM learners l LEFT JOIN run_stats s ON s.learner_id = l.id
WHERE l.id = ?
"""

INCLUSION = """
SELECT p.arm_id, SUM(CASE WHEN ta.included THEN 1 ELSE 0 END), COUNT(*),
       SUM(CASE WHEN ta.included AND ta.referenced THEN 1 ELSE 0 END)
FROM trace_arms ta JOIN posteriors p ON p.learner_id = ? AND p.arm_key = ta.arm_key
JOIN traces w ON w.id = ta.trace_pk AND w.guard IS NULL
WHERE ta.trace_pk IN (
    SELECT t.id FROM traces t JOIN learners l ON l.id = t.learner_id
    WHERE t.learner_id = ? AND NOT t.is_baseline AND t.phase = 'active'
      AND t.stats_epoch >= l.status_from_epoch
    ORDER BY t.id DESC LIMIT ?)
GROUP BY p.arm_id
"""

INCLUSION_SQLITE = """
WITH arms AS (SELECT arm_id, arm_key FROM posteriors WHERE learner_id = ?)
SELECT arms.arm_id, g.included, g.offered, g.used
FROM arms JOIN (
    SELECT ta.arm_key, SUM(CASE WHEN ta.included THEN 1 ELSE 0 END) AS included,
           COUNT(*) AS offered,
           SUM(CASE WHEN ta.included AND ta.referenced THEN 1 ELSE 0 END) AS used
    FROM trace_arms ta JOIN traces w ON w.id = ta.trace_pk AND w.guard IS NULL
    WHERE ta.trace_pk IN (
        SELECT t.id FROM traces t JOIN learners l ON l.id = t.learner_id
        WHERE +t.learner_id = ? AND NOT t.is_baseline AND t.phase = 'active'
          AND t.stats_epoch >= l.status_from_epoch
        ORDER BY t.id DESC LIMIT ?)
    GROUP BY ta.arm_key
) g ON g.arm_key = arms.arm_key
ORDER BY arms.arm_id
"""
"""INCLUSION as SQLite runs it fast, with the same parameters and rows, in the same order.
Given `t.learner_id = ?`, SQLite reads every trace of the learner through its (learner,
timestamp) index and sorts them all by id (60-80 ms at 100,000 traces); the unary plus makes it
walk the traces from the newest id instead and stop once the window is full. The counts are
grouped by the integer arm key and joined to the arm ids once per arm rather than once per
row. Rows come ordered by arm id, as the index SQLite used before gave them
(engine.metrics.estimated_recall adds floats in their order)."""

LAST_RESET = """
SELECT id, arm_ids, all_arms, actor, created_at, undone_at
FROM resets WHERE learner_id = ? ORDER BY id DESC LIMIT 1
"""

SCHEMA_REVISION = "SELECT version_num FROM alembic_version"


def for_postgres(sql: str) -> str:
    """The same text with psycopg's placeholders."""
    return sql.replace("?", "%s")


def learner_state(row: Sequence[Any]) -> LearnerState:
    import json

    from learning_bot.engine.config import Phase
    from learning_bot.engine.ports import LearnerState

    settings = json.loads(row[5]) if len(row) > 5 and row[5] is not None else None
    return LearnerState(
        int(row[0]), row[1], Phase(row[2]), int(row[3]), float(row[4] or 0.0), settings
    )


def inclusion_counts(rows: Sequence[Sequence[Any]]) -> dict[str, tuple[int, int, int]]:
    return {r[0]: (int(r[1] or 0), int(r[2] or 0), int(r[3] or 0)) for r in rows}


def arm_records(rows: Sequence[Sequence[Any]]) -> dict[str, ArmRecord]:
    from learning_bot.engine.arms import parse_arm_id
    from learning_bot.engine.forgetting import forgetting_prior
    from learning_bot.engine.ports import ArmRecord
    from learning_bot.engine.posterior import Posterior, prior_parameters

    return {
        r[0]: ArmRecord(
            r[0],
            r[1],
            int(r[2]),
            Posterior.trusted(r[3], r[4], int(r[5]), None if r[6] is None else int(r[6])),
            forgetting_prior(
                prior_parameters(parse_arm_id(r[0]).type),
                float(r[8]),
                float(r[9]),
                int(r[10]),
                int(r[11]),
            ),
            float(r[12]),
        )
        for r in rows
    }


def run_stats(row: Sequence[Any]) -> RunStats:
    from learning_bot.engine.ports import RunStats

    v = [None if x is None else int(x) for x in row]
    return RunStats(
        trace_count=v[0] or 0,
        total_tokens=v[1] or 0,
        min_timestamp=v[2],
        max_timestamp=v[3],
        baseline_runs=v[4] or 0,
        baseline_tokens=v[5] or 0,
        baseline_duration=v[6] or 0,
        selected_runs=v[7] or 0,
        selected_tokens=v[8] or 0,
        selected_duration=v[9] or 0,
        all_time_traces=v[10] or 0,
        offered_prompt_tokens=v[11] or 0,
        selected_prompt_tokens=v[12] or 0,
    )


def reset_record(row: Sequence[Any] | None) -> ResetRecord | None:
    if row is None:
        return None
    from learning_bot.engine.store_records import ResetRecord

    return ResetRecord(
        int(row[0]),
        tuple(json.loads(row[1])),
        bool(row[2]),
        row[3],
        int(row[4]),
        row[5] is not None,
    )


SESSION_USAGE = """
SELECT t.session_key, t.is_baseline, t.provider, t.model, COUNT(*),
       SUM(t.usage_input), SUM(t.usage_cache_read), SUM(t.usage_cache_write), MIN(t.timestamp)
FROM (SELECT session_key, is_baseline, provider, model,
             usage_input, usage_cache_read, usage_cache_write, timestamp
      FROM traces
      WHERE learner_id = ? AND phase = 'active' AND session_key <> ''
        AND stats_epoch >= (SELECT status_from_epoch FROM learners WHERE id = ?)
      ORDER BY timestamp DESC, id DESC
      LIMIT ?) AS t
GROUP BY t.session_key, t.is_baseline, t.provider, t.model
"""
"""Per session (and model), the usage of a learner's latest active runs counted by status
(parameters: learner, learner, how many runs): what the measured cost saving is priced from."""

SESSION_USAGE_SINCE = """
SELECT session_key, is_baseline, provider, model, COUNT(*),
       SUM(usage_input), SUM(usage_cache_read), SUM(usage_cache_write), MIN(timestamp)
FROM traces
WHERE learner_id = ? AND phase = 'active' AND session_key <> '' AND timestamp >= ?
  AND stats_epoch >= (SELECT status_from_epoch FROM learners WHERE id = ?)
GROUP BY session_key, is_baseline, provider, model
"""
"""Per session (and model), the usage of a learner's active runs since a time (parameters:
learner, since in ms, learner): what the dashboard's cost-per-session chart is priced from."""


def session_usages(rows: Sequence[Sequence[Any]]) -> list[SessionUsage]:
    from learning_bot.engine.savings import SessionUsage

    return [
        SessionUsage(
            key=str(r[0]),
            is_baseline=bool(r[1]),
            provider=r[2],
            model=r[3],
            runs=int(r[4]),
            input=int(r[5]),
            cache_read=int(r[6]),
            cache_write=int(r[7]),
            started=int(r[8] or 0),
        )
        for r in rows
    ]


SESSION_DECISIONS = """
SELECT COUNT(*), SUM(CASE WHEN COALESCE(redraws, 0) > 0 THEN 1 ELSE 0 END),
       SUM(COALESCE(redraws, 0)),
       SUM(CASE WHEN REPLACE(decision, '"added":', '') <> decision THEN 1 ELSE 0 END)
FROM session_sets WHERE learner_id = ?
"""
"""A learner's stored sessions, those redrawn while live, their redraws, and those that took
on tools outside their cached prefix (the decision's JSON has an "added" key, written only
when non-empty; REPLACE rather than LIKE, whose % psycopg would read as a placeholder;
parameter: learner)."""

SESSION_REDRAW_REASONS = """
SELECT reason, COUNT(*) FROM session_sets
WHERE learner_id = ? AND COALESCE(redraws, 0) > 0
GROUP BY reason
"""
"""The learner's redrawn sessions per reason of their latest redraw (parameter: learner)."""


def session_decisions(totals: Sequence[Any] | None, reasons: Sequence[Sequence[Any]]) -> Any:
    """engine.session_sets.SessionDecisions from the two queries' rows, the most frequent
    reason first."""
    from learning_bot.engine.session_sets import SessionDecisions

    total, redrawn, redraws, grown = totals if totals is not None else (0, 0, 0, 0)
    by_reason = sorted(
        ((str(r[0] or "unknown"), int(r[1])) for r in reasons), key=lambda x: (-x[1], x[0])
    )
    return SessionDecisions(
        int(total or 0), int(redrawn or 0), int(redraws or 0), tuple(by_reason), int(grown or 0)
    )
