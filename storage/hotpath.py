"""The observe write path in plain DBAPI calls, one SQL text per dialect.

It runs for every agent request, so it skips the ORM and SQL compilation: a batch of runs
is one transaction of six statements whatever its size, each touching its rows in sorted
arm order (PostgreSQL then never deadlocks on posterior rows).
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from typing import Any

from engine.records import TRACE_COLUMNS, RunRecord, record_row

SHARDS = 16
"""Counter rows per learner and epoch; writers pick one at random to avoid a hot row."""

TRACES_PER_STATEMENT = 200

STATS_ADD = """
INSERT INTO run_stats (learner_id, stats_epoch, shard, trace_count, total_tokens, min_ts, max_ts,
                       baseline_runs, baseline_tokens, baseline_duration,
                       selected_runs, selected_tokens, selected_duration, changes)
VALUES (?, (SELECT stats_epoch FROM learners WHERE id = ?), ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
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
    changes = run_stats.changes + excluded.changes
"""


class HotPath:
    """Dialect-specific SQL for recording runs through a raw DBAPI cursor."""

    def __init__(self, dialect: str) -> None:
        self.postgres = dialect == "postgresql"
        mark = "%s" if self.postgres else "?"
        self.mark = mark
        self.stats_add = STATS_ADD.replace("?", mark)
        self.epoch_of = "SELECT stats_epoch FROM learners WHERE id = ?".replace("?", mark)
        if self.postgres:
            self.lock_epochs = (
                "SELECT arm_id, epoch FROM posteriors WHERE learner_id = %s "
                'AND arm_id = ANY(%s) ORDER BY arm_id COLLATE "C" FOR UPDATE'
            )
            self.insert_arms = (
                "INSERT INTO trace_arms (trace_pk, arm_key, included, referenced, token_cost, "
                "reward, epoch) SELECT * FROM unnest(%s::bigint[], %s::integer[], "
                "%s::boolean[], %s::boolean[], %s::integer[], %s::float8[], %s::integer[])"
            )
            self.increment = (
                "UPDATE posteriors AS p SET alpha = p.alpha + d.da, beta = p.beta + d.db, "
                "pulls = p.pulls + d.n, last_updated = %s "
                "FROM unnest(%s::varchar[], %s::float8[], %s::float8[], %s::integer[]) "
                "AS d(arm_id, da, db, n) WHERE p.learner_id = %s AND p.arm_id = d.arm_id"
            )
        else:
            self.lock_epochs = (
                "SELECT arm_id, epoch FROM posteriors WHERE learner_id = ? "
                "AND arm_id IN (SELECT value FROM json_each(?))"
            )
            self.insert_arms = (
                "INSERT INTO trace_arms (trace_pk, arm_key, included, referenced, token_cost, "
                "reward, epoch) VALUES (?, ?, ?, ?, ?, ?, ?)"
            )
            self.increment = (
                "UPDATE posteriors SET alpha = alpha + ?, beta = beta + ?, pulls = pulls + ?, "
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
            pks = self._insert_traces_pg(cur, learner_id, runs)
        else:
            pks = self._insert_traces_sqlite(cur, learner_id, runs)
        inserted = [run for run in runs if run.trace_id in pks]
        duplicates = [run.trace_id for run in runs if run.trace_id not in pks]
        if not inserted:
            return inserted, duplicates, 0
        gains = _gains(inserted)
        ordered = sorted(gains)
        epochs: dict[str, int] = {}
        if ordered:
            ids: Any = ordered if self.postgres else json.dumps(ordered)
            epochs = dict(cur.execute(self.lock_epochs, (learner_id, ids)).fetchall())
        arm_rows = [
            (
                pks[run.trace_id],
                keys[o.arm_id],
                o.included,
                o.referenced,
                o.token_cost,
                o.reward,
                epochs[o.arm_id] if o.reward is not None else None,
            )
            for run in inserted
            for o in run.arms
        ]
        changes = int(sum(g[2] for g in gains.values()))
        stats = stats_params(learner_id, inserted, changes)
        if self.postgres:
            with cur.copy(
                "COPY trace_arms (trace_pk, arm_key, included, referenced, token_cost, reward, "
                "epoch) FROM STDIN"
            ) as copy:
                for row in arm_rows:
                    copy.write_row(row)
            if ordered:
                cur.execute(
                    f"WITH bumped AS ({self.increment} RETURNING 1) {self.stats_add}",
                    (
                        at,
                        ordered,
                        [gains[a][0] for a in ordered],
                        [gains[a][1] for a in ordered],
                        [int(gains[a][2]) for a in ordered],
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
                [(gains[a][0], gains[a][1], int(gains[a][2]), at, learner_id, a) for a in ordered],
            )
        cur.execute(self.stats_add, stats)
        return inserted, duplicates, changes

    def _insert_traces_sqlite(
        self, cur: Any, learner_id: int, runs: Sequence[RunRecord]
    ) -> dict[str, int]:
        stats_epoch = cur.execute(self.epoch_of, (learner_id,)).fetchone()[0]
        pks: dict[str, int] = {}
        for start in range(0, len(runs), TRACES_PER_STATEMENT):
            chunk = runs[start : start + TRACES_PER_STATEMENT]
            params: list[Any] = []
            for run in chunk:
                params.extend(record_row(learner_id, run, stats_epoch))
            cur.execute(self.trace_insert(len(chunk)), params)
            for pk, trace_id in cur.fetchall():
                pks[trace_id] = int(pk)
        return pks

    def _insert_traces_pg(
        self, cur: Any, learner_id: int, runs: Sequence[RunRecord]
    ) -> dict[str, int]:
        """Known trace ids, the counters' epoch and new ids in one round trip, then COPY.

        A concurrent transaction inserting the same trace id makes COPY fail with a unique
        violation; the caller reruns the transaction, which then sees the id as known."""
        trace_ids = [run.trace_id for run in runs]
        stats_epoch, known, ids = cur.execute(
            "SELECT l.stats_epoch, "
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
        return pks


def _gains(runs: Sequence[RunRecord]) -> dict[str, list[float]]:
    """Per arm: [alpha gain, beta gain, pulls] over the runs' rewards."""
    gains: dict[str, list[float]] = {}
    for run in runs:
        for outcome in run.arms:
            r = outcome.reward
            if r is None:
                continue
            g = gains.get(outcome.arm_id)
            if g is None:
                gains[outcome.arm_id] = [r, 1.0 - r, 1.0]
            else:
                g[0] += r
                g[1] += 1.0 - r
                g[2] += 1.0
    return gains


def stats_params(learner_id: int, runs: Sequence[RunRecord], changes: int) -> tuple[Any, ...]:
    """Parameters of STATS_ADD: counters for `runs` plus `changes` posterior changes."""
    base_runs = base_tokens = base_duration = 0
    sel_runs = sel_tokens = sel_duration = 0
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
    )
