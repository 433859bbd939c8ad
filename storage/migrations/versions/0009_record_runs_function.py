"""observe on PostgreSQL through a server-side function, `learning_bot_record_runs`.

Until now a run was written by one data-modifying `WITH` statement. A statement reads every
table through the one snapshot it took when it started. When another writer updated the same
posterior rows and committed while this statement waited for them, PostgreSQL rechecked each
of those rows against the newer version (EvalPlanQual) twice, once to lock it and once to
update it, building a copy of the plan to do so. All of that ran while the statement held the
rows, so every other writer of the same arms waited for it too. With 4 writers on the same 20
arms that made runs go one at a time at about 1,000 per second.

In PL/pgSQL each statement of a function takes its own snapshot. The function inserts the
traces, locks the posterior rows (in code-point order of their ids, as every writer does), and
then updates them with a statement that starts after the locks are held, so it already sees
the newest versions: no recheck. The traces and their conflicts are resolved before any
posterior row is locked. The steps, their checks and their results are those of the statement
it replaces; see `storage.hotpath.PG_RECORD` for the call.

SQLite has no server-side functions and is not changed.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-24 10:00:00
"""

from __future__ import annotations

from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

SIGNATURE = """learning_bot_record_runs(
    p_learner bigint, p_half_life float8, p_keys int[], p_traces json, p_fold_key int[],
    p_runs bigint, p_at bigint, p_keep float8[], p_prior_alpha float8[], p_alpha_gain float8[],
    p_prior_beta float8[], p_beta_gain float8[], p_pulls int[], p_rewards float8[],
    p_run int[], p_arm_key int[], p_included bool[], p_referenced bool[], p_token_cost int[],
    p_reward float8[], p_k int[], p_shard bigint, p_trace_count bigint, p_total_tokens bigint,
    p_min_ts bigint, p_max_ts bigint, p_baseline_runs bigint, p_baseline_tokens bigint,
    p_baseline_duration bigint, p_selected_runs bigint, p_selected_tokens bigint,
    p_selected_duration bigint, p_offered_prompt_tokens bigint, p_selected_prompt_tokens bigint
)"""

ARGUMENT_TYPES = """learning_bot_record_runs(
    bigint, float8, int[], json, int[], bigint, bigint, float8[], float8[], float8[], float8[],
    float8[], int[], float8[], int[], int[], bool[], bool[], int[], float8[], int[], bigint,
    bigint, bigint, bigint, bigint, bigint, bigint, bigint, bigint, bigint, bigint, bigint,
    bigint
)"""

# A counter stops at this value instead of overflowing: 16 shards in 64 epochs still sum
# inside a signed 64-bit integer ((2^63 - 1) // 1024).
CAP = "9007199254740991"


def _saturating(column: str) -> str:
    return (
        f"{column} = CASE WHEN run_stats.{column} > {CAP} - excluded.{column} "
        f"THEN {CAP} ELSE run_stats.{column} + excluded.{column} END"
    )


_COUNTERS = (
    "trace_count",
    "total_tokens",
    "baseline_runs",
    "baseline_tokens",
    "baseline_duration",
    "selected_runs",
    "selected_tokens",
    "selected_duration",
    "changes",
    "offered_prompt_tokens",
    "selected_prompt_tokens",
)

_TRACE_COLUMNS = (
    "learner_id, trace_id, run_id, session_id, session_key, channel, conversation, timestamp, "
    "provider, model, is_baseline, phase, guard, usage_input, usage_output, usage_cache_read, "
    "usage_total, duration_ms, system_prompt_chars, aborted, error, context, stats_epoch, "
    "bootstrapped"
)
_TRACE_VALUES = ", ".join(
    {"learner_id": "p_learner", "stats_epoch": "v_epoch", "bootstrapped": "false"}.get(
        column, f"r.{column}"
    )
    for column in _TRACE_COLUMNS.split(", ")
)


def _target(side: str) -> str:
    """learning_bot.engine.forgetting.forgetting_prior on the row being updated."""
    return (
        f"(CASE WHEN p.prior_pulls = 0 THEN p.prior_{side} "
        f"WHEN p.reset_trace_pk > 0 THEN 1.0 ELSE (p_prior_{side})[w.i] END)"
    )


FUNCTION = f"""
CREATE FUNCTION {SIGNATURE}
RETURNS TABLE (learner_half_life float8, gate_passed boolean, inserted_trace_ids text[])
LANGUAGE plpgsql VOLATILE AS $body$
DECLARE
    v_epoch bigint;
    v_half_life float8;
    v_pks bigint[];
    v_trace_ids text[];
    v_changes bigint;
BEGIN
    -- The learner row, share-locked until the end: a half-life change waits for this run.
    SELECT l.stats_epoch, l.half_life INTO v_epoch, v_half_life
    FROM learners AS l WHERE l.id = p_learner FOR KEY SHARE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    -- The gate: the runs were folded with this half-life and every arm has its row.
    IF v_half_life <> p_half_life
       OR (SELECT count(*) FROM posteriors AS q
           WHERE q.learner_id = p_learner AND q.arm_key = ANY(p_keys)) <> cardinality(p_keys)
    THEN
        RETURN QUERY SELECT v_half_life, false, '{{}}'::text[];
        RETURN;
    END IF;
    -- The traces: one already stored, or being stored by a concurrent caller, is skipped.
    WITH new_traces AS (
        INSERT INTO traces ({_TRACE_COLUMNS})
        SELECT {_TRACE_VALUES}
        FROM json_populate_recordset(NULL::traces, p_traces) WITH ORDINALITY AS r
        ORDER BY r.ordinality
        ON CONFLICT (learner_id, trace_id) DO NOTHING
        RETURNING id, trace_id
    )
    SELECT array_agg(n.id ORDER BY n.id), array_agg(n.trace_id ORDER BY n.id)
    INTO v_pks, v_trace_ids FROM new_traces AS n;
    IF coalesce(cardinality(v_pks), 0) <> p_runs THEN
        RETURN QUERY SELECT v_half_life, true, coalesce(v_trace_ids, '{{}}'::text[]);
        RETURN;
    END IF;
    -- Every run is new: its arms' rows, locked in code-point order of their ids.
    PERFORM 1 FROM posteriors AS q
    WHERE q.learner_id = p_learner AND q.arm_key = ANY(p_fold_key)
    ORDER BY q.arm_id COLLATE "C" FOR UPDATE;
    -- A new snapshot, taken with the rows held: the change applies to their newest version.
    -- engine.forgetting.forget in its order of operations; each arm's change found by binary
    -- search over the sorted keys.
    WITH bumped AS (
        UPDATE posteriors AS p SET (alpha, beta, pulls, rewards, last_updated) = (
            SELECT p.alpha * (p_keep)[w.i] + {_target("alpha")} * (1.0 - (p_keep)[w.i])
                       + (p_alpha_gain)[w.i],
                   p.beta * (p_keep)[w.i] + {_target("beta")} * (1.0 - (p_keep)[w.i])
                       + (p_beta_gain)[w.i],
                   p.pulls + (p_pulls)[w.i], p.rewards + (p_rewards)[w.i], p_at
            FROM (SELECT width_bucket(p.arm_key, p_fold_key) AS i) AS w)
        WHERE p.learner_id = p_learner AND p.arm_key = ANY(p_fold_key)
        RETURNING p.arm_key, p.epoch, p.pulls,
            (p_pulls)[width_bucket(p.arm_key, p_fold_key)] AS n
    ), outcomes AS (
        INSERT INTO trace_arms (trace_pk, arm_key, included, referenced, token_cost, reward,
                                epoch, seq)
        SELECT v_pks[o.run], o.arm_key, o.included, o.referenced, o.token_cost, o.reward,
               b.epoch, b.pulls - b.n + o.k
        FROM unnest(p_run, p_arm_key, p_included, p_referenced, p_token_cost, p_reward, p_k)
            AS o(run, arm_key, included, referenced, token_cost, reward, k)
        LEFT JOIN bumped AS b ON b.arm_key = o.arm_key AND o.reward IS NOT NULL
    )
    SELECT coalesce(sum(b.n), 0) INTO v_changes FROM bumped AS b;
    INSERT INTO run_stats (learner_id, stats_epoch, shard, trace_count, total_tokens, min_ts,
                           max_ts, baseline_runs, baseline_tokens, baseline_duration,
                           selected_runs, selected_tokens, selected_duration, changes,
                           offered_prompt_tokens, selected_prompt_tokens)
    VALUES (p_learner, v_epoch, p_shard, p_trace_count, p_total_tokens, p_min_ts, p_max_ts,
            p_baseline_runs, p_baseline_tokens, p_baseline_duration, p_selected_runs,
            p_selected_tokens, p_selected_duration, v_changes, p_offered_prompt_tokens,
            p_selected_prompt_tokens)
    ON CONFLICT (learner_id, stats_epoch, shard) DO UPDATE SET
        min_ts = CASE WHEN run_stats.min_ts IS NULL OR excluded.min_ts < run_stats.min_ts
                      THEN excluded.min_ts ELSE run_stats.min_ts END,
        max_ts = CASE WHEN run_stats.max_ts IS NULL OR excluded.max_ts > run_stats.max_ts
                      THEN excluded.max_ts ELSE run_stats.max_ts END,
        {("," + chr(10) + "        ").join(_saturating(c) for c in _COUNTERS)};
    RETURN QUERY SELECT v_half_life, true, v_trace_ids;
END
$body$
"""


def upgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        op.execute(FUNCTION)


def downgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        op.execute(f"DROP FUNCTION {ARGUMENT_TYPES}")
