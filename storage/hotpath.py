"""The observe write path in plain DBAPI calls, one SQL text per dialect.

It runs for every agent request, so it skips the ORM and SQL compilation, and touches
posterior rows in sorted arm order (PostgreSQL then never deadlocks on them). On SQLite a
batch of runs is one transaction of a few statements whatever its size; on PostgreSQL it is
one call of a server-side function (PG_RECORD), which for a single run is sent alone in
autocommit: one round trip, one transaction.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from learning_bot.engine.arms import parse_arm_id
from learning_bot.engine.errors import NotFound
from learning_bot.engine.forgetting import Fold, keep_factor
from learning_bot.engine.posterior import prior_parameters
from learning_bot.engine.records import TRACE_COLUMNS, RunRecord, record_row
from learning_bot.storage.forgetting import forget_sql
from learning_bot.storage.pooling import prepares

SHARDS = 16
"""Counter rows per learner and epoch; writers pick one at random to avoid a hot row."""

TRACES_PER_STATEMENT = 200

STATS_COLUMNS = """
INSERT INTO run_stats (learner_id, stats_epoch, shard, trace_count, total_tokens, min_ts, max_ts,
                       baseline_runs, baseline_tokens, baseline_duration,
                       selected_runs, selected_tokens, selected_duration, changes,
                       offered_prompt_tokens, selected_prompt_tokens)
"""

STATS_CONFLICT = """
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

STATS_ADD = (
    STATS_COLUMNS
    + "VALUES (?, (SELECT stats_epoch FROM learners WHERE id = ?),\n"
    + "        ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    + STATS_CONFLICT
)


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
        self.epoch_of = "SELECT stats_epoch, half_life, phase, settings FROM learners WHERE id = ?"
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
            f"UPDATE posteriors SET alpha = {forget_sql('alpha', '?', '?', '?')}, "
            f"beta = {forget_sql('beta', '?', '?', '?')}, "
            "pulls = pulls + ?, rewards = rewards + ?, "
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
        settings: str | None = None,
    ) -> tuple[list[RunRecord], list[str], int]:
        """Write the runs on SQLite; returns (inserted runs, duplicate trace ids, posterior
        changes). `keys` maps every arm id of the runs to its arm key. Raises Stale, having
        written nothing, when the runs were not built under the learner's phase or under
        `settings` (JSON; None: not checked), read in this transaction."""
        pks, half_life = self._insert_traces_sqlite(cur, learner_id, runs, settings)
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
            for arm_id, epoch, n in cur.execute(
                self.lock_epochs, (learner_id, json.dumps(ordered))
            ).fetchall():
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
        cur.executemany(self.insert_arms, arm_rows)
        if ordered:
            cur.executemany(
                self.increment,
                [_increment_row(folds[a], priors[a], at, learner_id, a) for a in ordered],
            )
        cur.execute(self.stats_add, stats)
        return inserted, duplicates, changes

    def _insert_traces_sqlite(
        self, cur: Any, learner_id: int, runs: Sequence[RunRecord], settings: str | None
    ) -> tuple[dict[str, int], float]:
        stats_epoch, half_life, phase, stored = cur.execute(self.epoch_of, (learner_id,)).fetchone()
        current = (
            settings is None
            or stored == settings
            or json.loads(stored or "null") == json.loads(settings)
        )
        if not current or built_under(runs) != phase:
            raise Stale(phase, current)
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


class Stale(Exception):
    """The runs were not built under the learner's phase and settings: nothing was written."""

    def __init__(self, phase: str, settings_current: bool) -> None:
        super().__init__(f"the learner is {phase}")
        self.phase = phase
        """The learner's phase."""
        self.settings_current = settings_current
        """Whether the settings the runs were built under are the learner's."""


MIXED = "mixed"
"""The phase sent for a batch whose runs were built under different phases: no learner has it,
so such a batch is never written as it is."""


def built_under(runs: Sequence[RunRecord]) -> str:
    """The phase every run was built under (MIXED when they differ)."""
    phase = runs[0].phase.value
    return phase if all(r.phase.value == phase for r in runs) else MIXED


PG_RECORD_PARAMS: tuple[tuple[str, str], ...] = (
    ("learner", "bigint"),
    ("half_life", "float8"),
    ("phase", "text"),
    ("settings", "text"),
    ("keys", "int[]"),
    ("traces", "json"),
    ("fold_key", "int[]"),
    ("runs", "bigint"),
    ("at", "bigint"),
    ("keep", "float8[]"),
    ("prior_alpha", "float8[]"),
    ("alpha_gain", "float8[]"),
    ("prior_beta", "float8[]"),
    ("beta_gain", "float8[]"),
    ("pulls", "int[]"),
    ("rewards", "float8[]"),
    ("run", "int[]"),
    ("arm_key", "int[]"),
    ("included", "bool[]"),
    ("referenced", "bool[]"),
    ("token_cost", "int[]"),
    ("reward", "float8[]"),
    ("k", "int[]"),
    ("shard", "bigint"),
    ("trace_count", "bigint"),
    ("total_tokens", "bigint"),
    ("min_ts", "bigint"),
    ("max_ts", "bigint"),
    ("baseline_runs", "bigint"),
    ("baseline_tokens", "bigint"),
    ("baseline_duration", "bigint"),
    ("selected_runs", "bigint"),
    ("selected_tokens", "bigint"),
    ("selected_duration", "bigint"),
    ("offered_prompt_tokens", "bigint"),
    ("selected_prompt_tokens", "bigint"),
)
"""The parameters of `learning_bot_record_runs`, in its order, with their types."""

PG_RECORD = (
    "SELECT learner_phase, settings_current, learner_half_life, gate_passed, inserted_trace_ids "
    "FROM learning_bot_record_runs("
    + ", ".join(f"${i}::{kind}" for i, (_, kind) in enumerate(PG_RECORD_PARAMS, start=1))
    + ")"
)
"""Runs, their outcomes, posterior changes and counters in one call of the server-side
function `learning_bot_record_runs` (PostgreSQL; made by migration 0009, which holds its body,
replaced by 0010 to insert `usage_cache_write` and by 0016 to gate on the phase and settings:
changing what it does takes a new migration that replaces it, and HEAD_REVISION with it).

In order: the learner row (share-locked, so a phase or half-life change waits for this call or
this call sees it); the gate (the runs were built under the learner's phase and under its
settings when they are given, the half-life is the one the caller folded with and every arm
key has its posterior row, else nothing is written); the traces (a trace id already stored, or being
stored by a concurrent caller, is skipped: ON CONFLICT waits for the other transaction); then,
only when every run was new, the posterior rows locked in code-point order of their ids (as
every other writer locks them: no deadlock), updated by engine.forgetting.forget in its order
of operations, the outcomes with the epoch and order (`seq`) of each change, and the counters,
whose `changes` are the posterior changes made. Returns the learner's phase, whether the
settings were current, its half-life, whether the gate passed and the trace ids inserted; no
row when there is no such learner.

Each step is a statement of its own with its own snapshot, so the update starts after the rows
are locked and applies to their newest versions: a single statement would have rechecked every
row a concurrent writer had just changed, while holding the rest. Posterior rows are reached by
key through index scans and each arm's change by binary search over the sorted keys
(width_bucket), never by a join against posteriors: the plans stay linear in the arms even
while the table has no statistics yet (a new database)."""


_STATS_NAMES = (
    "shard",
    "trace_count",
    "total_tokens",
    "min_ts",
    "max_ts",
    "baseline_runs",
    "baseline_tokens",
    "baseline_duration",
    "selected_runs",
    "selected_tokens",
    "selected_duration",
)
_OFFERED_NAMES = ("offered_prompt_tokens", "selected_prompt_tokens")


@dataclass(frozen=True, slots=True)
class Written:
    """What the PostgreSQL statement did."""

    half_life: float
    """The learner's half-life as the statement found it."""
    gate: bool
    """The runs were built under the learner's phase and settings, the half-life was the one
    they were folded with and every arm had its row."""
    inserted: frozenset[str]
    """Trace ids inserted."""
    runs: int

    @property
    def complete(self) -> bool:
        """Everything the statement did is to be kept: the gate passed and either every run
        was new (all written) or none was (nothing written)."""
        return self.gate and len(self.inserted) in (0, self.runs)


@lru_cache(maxsize=65536)
def _prior(arm_id: str) -> tuple[float, float]:
    return prior_parameters(parse_arm_id(arm_id).type)


_PER_RUN = tuple(c for c in TRACE_COLUMNS if c not in ("learner_id", "stats_epoch", "bootstrapped"))
"""The `traces` columns that differ between runs, sent as one JSON object per run (the function
fills in the other three)."""

_TRACE_INDEXES = [TRACE_COLUMNS.index(c) for c in _PER_RUN]


def _numbers(values: Sequence[float | bool | None]) -> str:
    """A PostgreSQL array literal of numbers, booleans and NULLs, written by Python's own list
    repr: a float is its shortest repr, which PostgreSQL reads back to the same double (both
    round correctly); True and False read as booleans; None becomes NULL."""
    return "{" + repr(values)[1:-1].replace("None", "NULL") + "}"


def postgres_params(
    learner_id: int,
    runs: Sequence[RunRecord],
    at: int,
    keys: Mapping[str, int],
    half_life: float,
    settings: str | None = None,
) -> dict[str, Any]:
    """The parameters of PG_RECORD for `runs` (distinct trace ids), folded as if every run is
    new with `half_life` (the statement checks both), built under their phase and `settings`
    (JSON; None: not checked): the traces as one JSON document (the
    json module writes it in C), everything else as numbers in array literals."""
    folds = _folds(runs, keep_factor(half_life))
    traces = []
    run_of: list[int] = []
    key_of: list[int] = []
    included: list[bool] = []
    referenced: list[bool] = []
    cost: list[int] = []
    reward: list[float | None] = []
    k_of: list[int | None] = []
    seen: dict[str, int] = {}
    for number, run in enumerate(runs, start=1):
        row = record_row(learner_id, run, 0)
        traces.append(dict(zip(_PER_RUN, [row[i] for i in _TRACE_INDEXES], strict=True)))
        for o in run.arms:
            k = None
            if o.reward is not None:
                k = seen[o.arm_id] = seen.get(o.arm_id, 0) + 1
            run_of.append(number)
            key_of.append(keys[o.arm_id])
            included.append(o.included)
            referenced.append(o.referenced)
            cost.append(o.token_cost)
            reward.append(o.reward)
            k_of.append(k)
    # The folded changes in arm key order: the statement finds an arm's by binary search.
    by_key = sorted(
        (keys[a], f.keep, f.alpha_gain, f.beta_gain, f.pulls, f.rewards, *_prior(a))
        for a, f in folds.items()
    )
    columns = [list(column) for column in zip(*by_key, strict=True)] or [[]] * 8
    fold_key, keep, alpha_gain, beta_gain, pulls, rewards, prior_alpha, prior_beta = columns
    stats = stats_params(learner_id, runs, 0)
    params: dict[str, Any] = {
        "learner": learner_id,
        "half_life": half_life,
        "phase": built_under(runs),
        "settings": settings,
        "at": at,
        "runs": len(runs),
        "traces": json.dumps(traces, ensure_ascii=False, allow_nan=False),
        "keys": _numbers(sorted(set(key_of))),
        "fold_key": _numbers(fold_key),
        "keep": _numbers(keep),
        "alpha_gain": _numbers(alpha_gain),
        "beta_gain": _numbers(beta_gain),
        "pulls": _numbers(pulls),
        "rewards": _numbers(rewards),
        "prior_alpha": _numbers(prior_alpha),
        "prior_beta": _numbers(prior_beta),
        "run": _numbers(run_of),
        "arm_key": _numbers(key_of),
        "included": _numbers(included),
        "referenced": _numbers(referenced),
        "token_cost": _numbers(cost),
        "reward": _numbers(reward),
        "k": _numbers(k_of),
    }
    params.update(zip(_STATS_NAMES, stats[2:13], strict=True))
    params.update(zip(_OFFERED_NAMES, stats[14:], strict=True))
    return params


def record_postgres(
    conn: Any,
    learner_id: int,
    runs: Sequence[RunRecord],
    at: int,
    keys: Mapping[str, int],
    half_life: float,
    settings: str | None = None,
) -> Written:
    """Run PG_RECORD for `runs` (distinct trace ids) on a psycopg connection, prepared (unless
    the connection goes through a transaction-mode pooler, storage.pooling). Alone in
    autocommit it is one transaction; with several runs some may turn out stored already
    (Written.complete is then false) and the caller rolls its transaction back. Raises Stale
    when the runs were not built under the learner's phase or `settings`: nothing was written."""
    import psycopg

    params = postgres_params(learner_id, runs, at, keys, half_life, settings)
    with psycopg.RawCursor(conn) as cur:
        row = cur.execute(
            PG_RECORD, [params[name] for name, _ in PG_RECORD_PARAMS], prepare=prepares(conn)
        ).fetchone()
    if row is None:
        raise NotFound(f"no learner with id {learner_id}")
    phase, current, found, gate, inserted = row
    if not gate and (not current or phase != params["phase"]):
        raise Stale(phase, bool(current))
    return Written(float(found), bool(gate), frozenset(inserted), len(runs))


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
        f.rewards,
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
