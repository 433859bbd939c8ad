"""The observe write path in plain DBAPI calls, one SQL text per dialect.

It runs for every agent request, so it skips the ORM and SQL compilation: a batch of runs
is one transaction of six statements whatever its size, each touching its rows in sorted
arm order (PostgreSQL then never deadlocks on posterior rows).
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Mapping, Sequence
from typing import Any

from engine.arms import parse_arm_id
from engine.forgetting import Fold, keep_factor
from engine.posterior import prior_parameters
from engine.records import TRACE_COLUMNS, RunRecord, record_row

SHARDS = 16
"""Counter rows per learner and epoch; writers pick one at random to avoid a hot row."""

TRACES_PER_STATEMENT = 200

STATS_ADD = """
INSERT INTO run_stats (learner_id, stats_epoch, shard, trace_count, total_tokens, min_ts, max_ts,
                       baseline_runs, baseline_tokens, baseline_duration,
                       selected_runs, selected_tokens, selected_duration, changes,
                       offered_prompt_tokens, selected_prompt_tokens)
VALUES (?, (SELECT stats_epoch FROM learners WHERE id = ?),
        ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (learner_id, stats_epoch, shard) DO UPDATE SET
    trace_count = run_stats.trace_count + excluded.trace_count,
    total_tokens = run_stats.total_tokens + excluded.total_tokens,
    min_ts = CASE WHEN run_stats.min_ts IS NULL OR excluded.min_ts < run_stats.min_ts
                  THEN excluded.min_ts ELSE run_stats.min_ts END,
    max_ts = CASE WHEN run_stats.max_ts IS NULL OR excluded.max_ts > run_stats.max_ts
                  THEN excluded.max_ts ELSE run_stats.max_ts END,
    baseline_runs = run_stats.baseline_runs + excluded.baseline_runs,
    baseline_tokens = run_stats.baseline_tokens + excluded.baseline_tokens,
    baseline_duration = run_stats.baseline_duration + excluded.baseline_duration,
    selected_runs = run_stats.selected_runs + excluded.selected_runs,
    selected_tokens = run_stats.selected_tokens + excluded.selected_tokens,
    selected_duration = run_stats.selected_duration + excluded.selected_duration,
    changes = run_stats.changes + excluded.changes,
    offered_prompt_tokens = run_stats.offered_prompt_tokens + excluded.offered_prompt_tokens,
    selected_prompt_tokens = run_stats.selected_prompt_tokens + excluded.selected_prompt_tokens
"""


COUNTER_CAP = (2**63 - 1) // 1024
"""Each counter row saturates here: 16 shards in 64 epochs still sum inside a signed 64-bit
integer (the reads add the rows up), and at most 10^12 per run it takes 9,000 runs of the
largest size to reach it in one row."""

_SUM = re.compile(r"(\w+) = run_stats\.(\w+) \+ excluded\.(\w+)")


def saturating(sql: str) -> str:
    """`x = run_stats.x + excluded.x` becomes a sum that stops at COUNTER_CAP instead of
    overflowing (a `bigint out of range` on PostgreSQL, an integer overflow on SQLite)."""

    def cap(match: re.Match[str]) -> str:
        column, left, right = match.groups()
        return (
            f"{column} = CASE WHEN run_stats.{left} > {COUNTER_CAP} - excluded.{right} "
            f"THEN {COUNTER_CAP} ELSE run_stats.{left} + excluded.{right} END"
        )

    return _SUM.sub(cap, sql)


class HotPath:
    """Dialect-specific SQL for recording runs through a raw DBAPI cursor."""

    def __init__(self, dialect: str) -> None:
        self.postgres = dialect == "postgresql"
        mark = "%s" if self.postgres else "?"
        self.mark = mark
        self.stats_add = saturating(STATS_ADD).replace("?", mark)
        self.epoch_of = "SELECT stats_epoch, half_life FROM learners WHERE id = ?".replace(
            "?", mark
        )
        if self.postgres:
            self.lock_epochs = (
                "SELECT arm_id, epoch, pulls FROM posteriors WHERE learner_id = %s "
                'AND arm_id = ANY(%s) ORDER BY arm_id COLLATE "C" FOR UPDATE'
            )
            self.insert_arms = (
                "INSERT INTO trace_arms (trace_pk, arm_key, included, referenced, token_cost, "
                "reward, epoch, seq) SELECT * FROM unnest(%s::bigint[], %s::integer[], "
                "%s::boolean[], %s::boolean[], %s::integer[], %s::float8[], %s::integer[], "
                "%s::integer[])"
            )
            # engine.forgetting.forget, in the same order of operations
            self.increment = (
                "UPDATE posteriors AS p SET "
                f"alpha = p.alpha * d.f + {target('p.', 'alpha', 'd.ta')} * (1.0 - d.f) + d.da, "
                f"beta = p.beta * d.f + {target('p.', 'beta', 'd.tb')} * (1.0 - d.f) + d.db, "
                "pulls = p.pulls + d.n, last_updated = %s "
                "FROM unnest(%s::varchar[], %s::float8[], %s::float8[], %s::integer[], "
                "%s::float8[], %s::float8[], %s::float8[]) "
                "AS d(arm_id, da, db, n, f, ta, tb) "
                "WHERE p.learner_id = %s AND p.arm_id = d.arm_id"
            )
        else:
            self.lock_epochs = (
                "SELECT arm_id, epoch, pulls FROM posteriors WHERE learner_id = ? "
                "AND arm_id IN (SELECT value FROM json_each(?))"
            )
            self.insert_arms = (
                "INSERT INTO trace_arms (trace_pk, arm_key, included, referenced, token_cost, "
                "reward, epoch, seq) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
            )
            # engine.forgetting.forget, in the same order of operations
            self.increment = (
                f"UPDATE posteriors SET alpha = alpha * ? + {target('', 'alpha', '?')} "
                f"* (1.0 - ?) + ?, beta = beta * ? + {target('', 'beta', '?')} * (1.0 - ?) + ?, "
                "pulls = pulls + ?, "
                "last_updated = ? WHERE learner_id = ? AND arm_id = ?"
            )
        row = "(" + ", ".join([mark] * len(TRACE_COLUMNS)) + ")"
        self._trace_prefix = f"INSERT INTO traces ({', '.join(TRACE_COLUMNS)}) VALUES "
        self._trace_suffix = " ON CONFLICT (learner_id, trace_id) DO NOTHING RETURNING id, trace_id"
        self._row = row
        self._trace_sql: dict[int, str] = {}

    def trace_insert(self, rows: int) -> str:
        sql = self._trace_sql.get(rows)
        if sql is None:
            sql = self._trace_prefix + ", ".join([self._row] * rows) + self._trace_suffix
            self._trace_sql[rows] = sql
        return sql

    def record(
        self,
        cur: Any,
        learner_id: int,
        runs: Sequence[RunRecord],
        at: int,
        keys: Mapping[str, int],
    ) -> tuple[list[RunRecord], list[str], int]:
        """Write the runs; returns (inserted runs, duplicate trace ids, posterior changes).
        `keys` maps every arm id of the runs to its arm key."""
        if self.postgres:
            pks, half_life = self._insert_traces_pg(cur, learner_id, runs)
        else:
            pks, half_life = self._insert_traces_sqlite(cur, learner_id, runs)
        inserted = [run for run in runs if run.trace_id in pks]
        duplicates = [run.trace_id for run in runs if run.trace_id not in pks]
        if not inserted:
            return inserted, duplicates, 0
        keep = keep_factor(float(half_life or 0.0))
        folds = _folds(inserted, keep)
        ordered = sorted(folds)
        epochs: dict[str, int] = {}
        pulls: dict[str, int] = {}
        if ordered:
            ids: Any = ordered if self.postgres else json.dumps(ordered)
            for arm_id, epoch, n in cur.execute(self.lock_epochs, (learner_id, ids)).fetchall():
                epochs[arm_id] = epoch
                pulls[arm_id] = int(n)
        arm_rows: list[tuple[Any, ...]] = []
        for run in inserted:
            pk = pks[run.trace_id]
            for o in run.arms:
                epoch = seq = None
                if o.reward is not None:
                    epoch = epochs[o.arm_id]
                    seq = pulls[o.arm_id] = pulls[o.arm_id] + 1
                key = keys[o.arm_id]
                arm_rows.append(
                    (pk, key, o.included, o.referenced, o.token_cost, o.reward, epoch, seq)
                )
        priors = {a: prior_parameters(parse_arm_id(a).type) for a in ordered}
        changes = sum(f.pulls for f in folds.values())
        stats = stats_params(learner_id, inserted, changes)
        if self.postgres:
            with cur.copy(
                "COPY trace_arms (trace_pk, arm_key, included, referenced, token_cost, reward, "
                "epoch, seq) FROM STDIN"
            ) as copy:
                for row in arm_rows:
                    copy.write_row(row)
            if ordered:
                cur.execute(
                    f"WITH bumped AS ({self.increment} RETURNING 1) {self.stats_add}",
                    (
                        at,
                        ordered,
                        [folds[a].alpha_gain for a in ordered],
                        [folds[a].beta_gain for a in ordered],
                        [folds[a].pulls for a in ordered],
                        [folds[a].keep for a in ordered],
                        [priors[a][0] for a in ordered],
                        [priors[a][1] for a in ordered],
                        learner_id,
                        *stats,
                    ),
                )
            else:
                cur.execute(self.stats_add, stats)
            return inserted, duplicates, changes
        cur.executemany(self.insert_arms, arm_rows)
        if ordered:
            cur.executemany(
                self.increment,
                [_increment_row(folds[a], priors[a], at, learner_id, a) for a in ordered],
            )
        cur.execute(self.stats_add, stats)
        return inserted, duplicates, changes

    def _insert_traces_sqlite(
        self, cur: Any, learner_id: int, runs: Sequence[RunRecord]
    ) -> tuple[dict[str, int], float]:
        stats_epoch, half_life = cur.execute(self.epoch_of, (learner_id,)).fetchone()
        pks: dict[str, int] = {}
        for start in range(0, len(runs), TRACES_PER_STATEMENT):
            chunk = runs[start : start + TRACES_PER_STATEMENT]
            params: list[Any] = []
            for run in chunk:
                params.extend(record_row(learner_id, run, stats_epoch))
            cur.execute(self.trace_insert(len(chunk)), params)
            for pk, trace_id in cur.fetchall():
                pks[trace_id] = int(pk)
        return pks, half_life

    def _insert_traces_pg(
        self, cur: Any, learner_id: int, runs: Sequence[RunRecord]
    ) -> tuple[dict[str, int], float]:
        """Known trace ids, the counters' epoch, the half-life and new ids in one round trip,
        then COPY.

        A concurrent transaction inserting the same trace id makes COPY fail with a unique
        violation; the caller reruns the transaction, which then sees the id as known."""
        trace_ids = [run.trace_id for run in runs]
        stats_epoch, half_life, known, ids = cur.execute(
            "SELECT l.stats_epoch, l.half_life, "
            "ARRAY(SELECT trace_id FROM traces WHERE learner_id = %s AND trace_id = ANY(%s)), "
            "ARRAY(SELECT nextval('traces_id_seq') FROM generate_series(1, %s)) "
            "FROM learners l WHERE l.id = %s",
            (learner_id, trace_ids, len(runs), learner_id),
        ).fetchone()
        seen = set(known)
        fresh = [run for run in runs if run.trace_id not in seen]
        pks = {run.trace_id: int(pk) for run, pk in zip(fresh, ids, strict=False)}
        if fresh:
            with cur.copy(f"COPY traces (id, {', '.join(TRACE_COLUMNS)}) FROM STDIN") as copy:
                for run in fresh:
                    copy.write_row((pks[run.trace_id], *record_row(learner_id, run, stats_epoch)))
        return pks, half_life


def target(row: str, side: str, type_prior: str) -> str:
    """engine.forgetting.forgetting_prior in SQL, on the row being updated (`row`: its alias
    and a dot, or nothing); `type_prior` is the bound value of the arm type's prior."""
    return (
        f"(CASE WHEN {row}prior_pulls = 0 THEN {row}prior_{side} "
        f"WHEN {row}reset_trace_pk > 0 THEN 1.0 ELSE {type_prior} END)"
    )


def _folds(runs: Sequence[RunRecord], keep: float) -> dict[str, Fold]:
    """Per arm: the runs' rewards, in order, folded into one forgetting step."""
    folds: dict[str, Fold] = {}
    for run in runs:
        for outcome in run.arms:
            r = outcome.reward
            if r is None:
                continue
            f = folds.get(outcome.arm_id)
            if f is None:
                f = folds[outcome.arm_id] = Fold()
            f.add(r, keep)
    return folds


def _increment_row(
    f: Fold, prior: tuple[float, float], at: int, learner_id: int, arm_id: str
) -> tuple[Any, ...]:
    k = f.keep
    return (
        k,
        prior[0],
        k,
        f.alpha_gain,
        k,
        prior[1],
        k,
        f.beta_gain,
        f.pulls,
        at,
        learner_id,
        arm_id,
    )


def stats_params(learner_id: int, runs: Sequence[RunRecord], changes: int) -> tuple[Any, ...]:
    """Parameters of STATS_ADD: counters for `runs` plus `changes` posterior changes."""
    base_runs = base_tokens = base_duration = 0
    sel_runs = sel_tokens = sel_duration = 0
    offered = kept = 0
    total = 0
    low: int | None = None
    high: int | None = None
    for r in runs:
        tokens = r.usage.total
        total += tokens
        if r.is_baseline:
            base_runs += 1
            base_tokens += tokens
            base_duration += r.duration_ms
        else:
            sel_runs += 1
            sel_tokens += tokens
            sel_duration += r.duration_ms
            offered += r.offered_tokens
            kept += r.selected_tokens
        low = r.timestamp if low is None or r.timestamp < low else low
        high = r.timestamp if high is None or r.timestamp > high else high
    return (
        learner_id,
        learner_id,
        random.randrange(SHARDS),
        len(runs),
        total,
        low,
        high,
        base_runs,
        base_tokens,
        base_duration,
        sel_runs,
        sel_tokens,
        sel_duration,
        changes,
        offered,
        kept,
    )
