"""SqlStore: the engine's Store port on SQLAlchemy 2.x, for SQLite and PostgreSQL.

Every write is one transaction. Posterior changes are atomic `SET alpha = alpha + ...`
statements over rows touched in sorted arm order, so concurrent writers never lose an update
and PostgreSQL never deadlocks on them; a trace, its arm outcomes, its observations, its
counters and its posterior changes commit together or not at all.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Mapping, Sequence
from functools import partial
from typing import Any

from sqlalchemy import (
    URL,
    Connection,
    Engine,
    bindparam,
    case,
    create_engine,
    delete,
    event,
    func,
    insert,
    literal,
    select,
    text,
    update,
)

from engine.arms import parse_arm_id
from engine.config import Phase
from engine.errors import Conflict, InvalidInput, NotFound
from engine.forgetting import fold, forget, forgetting_prior, keep_factor
from engine.ports import (
    ArmOutcome,
    ArmRecord,
    AuditEntry,
    LearnerState,
    PhaseChangeRecord,
    RecordResult,
    ResetRecord,
    RewardChange,
    RunStats,
    RunStatus,
    TimeBucket,
    VerifyProblem,
    VerifyReport,
)
from engine.posterior import Posterior, now_ms, prior_parameters
from engine.records import ArmOutcomeRecord, RunRecord, record_from_row
from engine.session_sets import SessionSet
from storage import queries
from storage.database import (
    ensure_schema_later,
    make_engine,
    reading,
    sqlite_write_cursor,
    with_retries,
    write_transaction,
)
from storage.hotpath import HotPath, Written, record_postgres, stats_params
from storage.location import default_database_url
from storage.schema import (
    audit_log as audit,
)
from storage.schema import (
    learners,
    observations,
    posteriors,
    resets,
    run_stats,
    session_sets,
    trace_arms,
    traces,
)
from storage.schema import (
    reset_snapshots as snapshots,
)
from storage.session_sets import SessionSetTable

_BOOTSTRAP_TRACES = """
SELECT t.id FROM traces t
WHERE t.learner_id = :learner AND t.phase = 'passive' AND t.guard IS NULL
  AND t.bootstrapped = :no
"""

_BOOTSTRAP_REWARDS = (
    """
UPDATE trace_arms SET
    reward = CASE WHEN referenced = :yes THEN 1.0 ELSE 0.0 END,
    epoch = (SELECT p.epoch FROM posteriors p
             WHERE p.learner_id = :learner AND p.arm_key = trace_arms.arm_key)
WHERE included = :yes AND reward IS NULL
  AND trace_pk > (SELECT p.reset_trace_pk FROM posteriors p
                  WHERE p.learner_id = :learner AND p.arm_key = trace_arms.arm_key)
  AND trace_pk IN ("""
    + _BOOTSTRAP_TRACES
    + ")"
)

_BOOTSTRAP_INCREMENT = (
    """
UPDATE posteriors SET
    alpha = posteriors.alpha + agg.gained,
    beta = posteriors.beta + (agg.n - agg.gained),
    pulls = posteriors.pulls + agg.n,
    rewards = posteriors.rewards + agg.gained,
    last_updated = :at
FROM (SELECT ta.arm_key AS arm_key, SUM(ta.reward) AS gained, COUNT(*) AS n
      FROM trace_arms ta
      WHERE ta.reward IS NOT NULL AND ta.trace_pk IN ("""
    + _BOOTSTRAP_TRACES
    + """)
      GROUP BY ta.arm_key) AS agg
WHERE posteriors.learner_id = :learner AND posteriors.arm_key = agg.arm_key
"""
)

_CONVERGENCE = """
SELECT (at / :w) * :w AS t, arm_id, SUM(gained), COUNT(*) FROM (
    SELECT t.timestamp AS at, p.arm_id AS arm_id, ta.reward AS gained
    FROM trace_arms ta JOIN traces t ON t.id = ta.trace_pk
    JOIN posteriors p ON p.learner_id = t.learner_id AND p.arm_key = ta.arm_key
    WHERE t.learner_id = :learner AND t.timestamp >= :since AND ta.reward IS NOT NULL
    UNION ALL
    SELECT o.created_at, o.arm_id, o.reward FROM observations o
    WHERE o.learner_id = :learner AND o.created_at >= :since
) AS c GROUP BY (at / :w) * :w, arm_id ORDER BY t
"""

_CHANGES_BY_ARM = """
SELECT arm_id, epoch, SUM(gained) AS gained, SUM(n) AS n FROM (
    SELECT p.arm_id AS arm_id, ta.epoch AS epoch, ta.reward AS gained, 1 AS n
    FROM trace_arms ta JOIN traces t ON t.id = ta.trace_pk
    JOIN posteriors p ON p.learner_id = t.learner_id AND p.arm_key = ta.arm_key
    WHERE t.learner_id = :learner AND ta.reward IS NOT NULL
    UNION ALL
    SELECT o.arm_id, o.epoch, o.reward, 1 FROM observations o WHERE o.learner_id = :learner
) AS c GROUP BY arm_id, epoch
"""

_CHANGES_IN_ORDER = """
SELECT arm_id, gained, seq FROM (
    SELECT p.arm_id AS arm_id, ta.reward AS gained, ta.seq AS seq
    FROM trace_arms ta JOIN traces t ON t.id = ta.trace_pk
    JOIN posteriors p ON p.learner_id = t.learner_id AND p.arm_key = ta.arm_key
    WHERE t.learner_id = :learner AND ta.reward IS NOT NULL AND ta.epoch = p.epoch
    UNION ALL
    SELECT o.arm_id, o.reward, o.seq FROM observations o
    JOIN posteriors p ON p.learner_id = o.learner_id AND p.arm_id = o.arm_id
    WHERE o.learner_id = :learner AND o.epoch = p.epoch
) AS c ORDER BY arm_id, seq
"""


def _forget_target(side: str, type_prior: float) -> Any:
    """engine.forgetting.forgetting_prior as a SQL expression on the posterior row being
    updated (storage.hotpath writes the same rule in its statements)."""
    p = posteriors.c
    return case(
        (p.prior_pulls == 0, p.prior_alpha if side == "alpha" else p.prior_beta),
        (p.reset_trace_pk > 0, literal(1.0)),
        else_=literal(type_prior),
    )


_MAX_ATTEMPTS = 16
"""Statements one record_runs call may take on PostgreSQL before it gives up: each attempt
that writes nothing has learnt something (the half-life, a missing arm, stored runs)."""


class _Undo(Exception):
    """Rolls a transaction back when the statement did not write every new run."""

    def __init__(self, written: Written) -> None:
        super().__init__("incomplete write")
        self.written = written


def _autocommit_engine(url: URL, pool_size: int) -> Engine:
    """Connections for the PostgreSQL observe statement: autocommit (the statement is its own
    transaction, no BEGIN or COMMIT round trip), no ping on checkout (a closed connection is
    replaced when it fails), integers always sent as bigint so that every call has the same
    parameter types and reuses one prepared statement."""
    from psycopg.types.numeric import Int8BinaryDumper, Int8Dumper

    engine = create_engine(
        url,
        pool_size=pool_size,
        max_overflow=pool_size,
        isolation_level="AUTOCOMMIT",
        connect_args={"connect_timeout": 10},
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.adapters.register_dumper(int, Int8Dumper)
        dbapi_conn.adapters.register_dumper(int, Int8BinaryDumper)

    return engine


class SqlStore:
    """The Store port on a SQLAlchemy engine (SQLite file by default, PostgreSQL at scale)."""

    def __init__(
        self,
        url: str | None = None,
        *,
        auto_create: bool = True,
        pool_size: int = 8,
        upgrade_sqlite: bool = False,
    ) -> None:
        """`upgrade_sqlite`: an outdated SQLite file is backed up and upgraded rather than
        refused (the serving commands; one-shot commands ask for `learning-bot db upgrade`)."""
        self.url = url or default_database_url()
        self.engine: Engine = make_engine(self.url, pool_size=pool_size)
        self.dialect = self.engine.dialect.name
        ensure_schema_later(self.engine, auto_create=auto_create, upgrade_sqlite=upgrade_sqlite)
        self._insert: Any
        if self.dialect == "postgresql":
            from sqlalchemy.dialects.postgresql import insert as pg_insert

            self._insert = pg_insert
        else:
            from sqlalchemy.dialects.sqlite import insert as sqlite_insert

            self._insert = sqlite_insert
        self._known: dict[int, dict[str, tuple[str, int]]] = {}
        self._keys: dict[int, dict[str, int]] = {}
        self._lock = threading.Lock()
        self._hot = HotPath(self.dialect)
        self._half_lives: dict[int, float] = {}
        """Per learner, the half-life the last write found: what runs are folded with."""
        self._pool_size = pool_size
        self._direct: tuple[Engine, Engine] | None = None
        """(the engine it serves, autocommit engine to its database) for PostgreSQL writes."""
        self._session_sets = SessionSetTable(self.engine, self._insert)

    # -- learners -------------------------------------------------------------------------

    def open_learner(self, name: str, initial_phase: Phase) -> LearnerState:
        if not isinstance(name, str) or not name.strip() or len(name) > 128:
            raise InvalidInput("learner name must be 1-128 characters")

        def run() -> None:
            with write_transaction(self.engine) as conn:
                stmt = self._insert(learners).values(
                    name=name,
                    phase=Phase(initial_phase).value,
                    stats_epoch=0,
                    status_from_epoch=0,
                    created_at=now_ms(),
                )
                conn.execute(stmt.on_conflict_do_nothing(index_elements=["name"]))

        with reading(self.engine) as conn:
            row = conn.execute(select(learners.c.id).where(learners.c.name == name)).first()
        if row is None:
            with_retries(run)
            with reading(self.engine) as conn:
                row = conn.execute(select(learners.c.id).where(learners.c.name == name)).one()
        return self.learner_state(int(row.id))

    def find_learner(self, name: str) -> LearnerState | None:
        """An existing learner's state, or None; creates nothing."""
        with reading(self.engine) as conn:
            row = conn.execute(select(learners.c.id).where(learners.c.name == name)).first()
        return None if row is None else self.learner_state(int(row.id))

    def learner_names(self) -> list[str]:
        """Every learner's name, sorted."""
        with reading(self.engine) as conn:
            return [r[0] for r in conn.execute(select(learners.c.name).order_by(learners.c.name))]

    def learner_state(self, learner_id: int) -> LearnerState:
        with reading(self.engine) as conn:
            return self._state(conn, learner_id)

    def _state(self, conn: Connection, learner_id: int) -> LearnerState:
        row = conn.exec_driver_sql(self._sql(queries.LEARNER_STATE), (learner_id,)).first()
        if row is None:
            raise NotFound(f"no learner with id {learner_id}")
        state = queries.learner_state(row)
        # what PostgreSQL's observe statement folds with first (it checks it, and a stale
        # value costs one more attempt, not a wrong write)
        self._half_lives[learner_id] = state.half_life
        return state

    def _sql(self, text: str) -> str:
        return queries.for_postgres(text) if self.dialect == "postgresql" else text

    # -- arms and posteriors ----------------------------------------------------------------

    def load_arms(self, learner_id: int) -> dict[str, ArmRecord]:
        with reading(self.engine) as conn:
            rows = conn.exec_driver_sql(self._sql(queries.ARMS), (learner_id,)).all()
        out = queries.arm_records(rows)
        with self._lock:
            self._known[learner_id] = {a.arm_id: (a.label, a.token_cost) for a in out.values()}
            self._keys[learner_id] = {r[0]: int(r[7]) for r in rows}
        return out

    def _arms_known(self, learner_id: int, arms: Mapping[str, tuple[str, int]]) -> bool:
        """Every arm has its posterior row, arm key, label and cost as this process wrote them."""
        known = self._known.get(learner_id)
        keys = self._keys.get(learner_id)
        if not known or not keys:
            return False
        return all(known.get(aid) == v and aid in keys for aid, v in arms.items())

    def _ensure_arms(
        self, conn: Connection, learner_id: int, arms: Mapping[str, tuple[str, int]]
    ) -> tuple[dict[str, tuple[str, int]], dict[str, int]]:
        """Create posterior rows (at their prior, with the next free arm keys) for arms this
        process has not seen, and keep labels and token costs current. Returns what to
        remember after commit, and the arm key of every arm in `arms`."""
        known = self._known.get(learner_id, {})
        keys = dict(self._keys.get(learner_id, {}))
        missing = {aid: v for aid, v in arms.items() if known.get(aid) != v or aid not in keys}
        if not missing:
            return {}, keys
        if self.dialect == "postgresql":
            # The upsert locks the rows it touches, in order, before the hot path locks every
            # arm of the batch in the same order: upsert them all, so that no transaction
            # holds a later arm while waiting for an earlier one (a deadlock with a writer
            # that locks the whole batch in order).
            missing = dict(arms)
            # One creator at a time per learner: two that both read the same largest arm key
            # would insert rows with the same new keys and each wait for the other's
            # insertion (a deadlock). FOR NO KEY UPDATE leaves the hot path's KEY SHARE free.
            conn.execute(
                select(learners.c.id)
                .where(learners.c.id == learner_id)
                .with_for_update(key_share=True)
            )
        p = posteriors.c
        next_key = conn.execute(
            select(func.coalesce(func.max(p.arm_key), 0)).where(p.learner_id == learner_id)
        ).scalar_one()
        rows = []
        created = now_ms()
        for arm_id in sorted(missing):
            label, cost = missing[arm_id]
            a, b = prior_parameters(parse_arm_id(arm_id).type)
            next_key += 1
            rows.append(
                {
                    "learner_id": learner_id,
                    "arm_id": arm_id,
                    "arm_key": next_key,
                    "label": label,
                    "token_cost": cost,
                    "alpha": a,
                    "beta": b,
                    "pulls": 0,
                    "last_updated": None,
                    "prior_alpha": a,
                    "prior_beta": b,
                    "prior_pulls": 0,
                    "epoch": 0,
                    "reset_trace_pk": 0,
                    "created_at": created,
                    "rewards": 0.0,
                    "prior_rewards": 0.0,
                }
            )
        stmt = self._insert(posteriors)
        stmt = stmt.on_conflict_do_update(
            index_elements=["learner_id", "arm_id"],
            set_={"label": stmt.excluded.label, "token_cost": stmt.excluded.token_cost},
        )
        conn.execute(stmt, rows)
        for arm_id, key in conn.execute(
            select(p.arm_id, p.arm_key).where(
                p.learner_id == learner_id, p.arm_id.in_(sorted(missing))
            )
        ):
            keys[arm_id] = int(key)
        return missing, keys

    def _lock_order(self, column: Any) -> Any:
        """`column` to ORDER BY when locking rows: by code point everywhere (PostgreSQL's
        database collation may order ids differently from Python's `sorted`, which orders the
        upserts), so every transaction takes row locks in the same order."""
        return column.collate("C") if self.dialect == "postgresql" else column

    def _remember(
        self, learner_id: int, arms: Mapping[str, tuple[str, int]], keys: Mapping[str, int]
    ) -> None:
        if arms:
            with self._lock:
                self._known.setdefault(learner_id, {}).update(arms)
                self._keys.setdefault(learner_id, {}).update(keys)

    # -- runs ---------------------------------------------------------------------------------

    def record_runs(self, learner_id: int, runs: Sequence[RunRecord]) -> RecordResult:
        """Write runs in one transaction. A trace id already stored, or given earlier in the
        same batch, changes nothing and reads as a duplicate: this is the one place that
        decides which runs are new."""
        if not runs:
            raise InvalidInput("no runs to record")
        first: dict[str, int] = {}
        unique: list[RunRecord] = []
        for i, run in enumerate(runs):
            if run.trace_id not in first:
                first[run.trace_id] = i
                unique.append(run)
        arms: dict[str, tuple[str, int]] = {}
        for run in unique:
            for outcome in run.arms:
                arms[outcome.arm_id] = (outcome.label, outcome.token_cost)

        def attempt() -> tuple[list[RunRecord], dict[str, tuple[str, int]], dict[str, int]]:
            """SQLite: one transaction, through a raw cursor once every arm is known."""
            if self._arms_known(learner_id, arms):
                keys = self._keys[learner_id]
                with sqlite_write_cursor(self.engine) as cur:
                    inserted, _, _ = self._hot.record(cur, learner_id, unique, now_ms(), keys)
                return inserted, {}, keys
            with write_transaction(self.engine) as conn:
                remembered, keys = self._ensure_arms(conn, learner_id, arms)
                cur = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
                try:
                    inserted, _, _ = self._hot.record(cur, learner_id, unique, now_ms(), keys)
                finally:
                    cur.close()
                return inserted, remembered, keys

        if self.dialect == "postgresql":
            inserted = self._record_postgres(learner_id, unique, arms)
        else:
            inserted, remembered, keys = with_retries(attempt)
            self._remember(learner_id, remembered, keys)
        new = {r.trace_id for r in inserted}
        statuses: tuple[RunStatus, ...] = tuple(
            "inserted" if first[r.trace_id] == i and r.trace_id in new else "duplicate"
            for i, r in enumerate(runs)
        )
        return RecordResult(tuple(r.trace_id for r in runs), statuses)

    def _record_postgres(
        self, learner_id: int, runs: Sequence[RunRecord], arms: Mapping[str, tuple[str, int]]
    ) -> list[RunRecord]:
        """The runs (distinct trace ids) written by one statement each attempt; returns those
        that were new. An attempt that writes nothing tells why: the learner's half-life is
        not the one the runs were folded with (fold again), an arm's row is missing (create
        it), or, in a batch, some runs were stored by someone else meanwhile (its transaction
        is rolled back; the new ones are written again without them)."""
        pending = list(runs)
        for _ in range(_MAX_ATTEMPTS):
            folded_with = self._half_lives.get(learner_id, 0.0)
            written, remembered, keys = with_retries(
                partial(self._write_postgres, learner_id, pending, arms, folded_with)
            )
            self._remember(learner_id, remembered, keys)
            self._half_lives[learner_id] = written.half_life
            if not written.gate:
                if written.half_life == folded_with:
                    self._forget_arms(learner_id)
                continue
            if not written.complete:
                pending = [r for r in pending if r.trace_id in written.inserted]
                continue
            return [r for r in pending if r.trace_id in written.inserted]
        raise Conflict("the runs could not be recorded: the learner kept changing; try again")

    def _write_postgres(
        self,
        learner_id: int,
        runs: Sequence[RunRecord],
        arms: Mapping[str, tuple[str, int]],
        half_life: float,
    ) -> tuple[Written, dict[str, tuple[str, int]], dict[str, int]]:
        """One attempt: the statement alone when every arm is known (one round trip for one
        run), else in a transaction after creating the arms' rows."""
        if self._arms_known(learner_id, arms):
            keys = self._keys[learner_id]
            return self._write_direct(learner_id, runs, keys, half_life), {}, keys
        try:
            with write_transaction(self.engine) as conn:
                remembered, keys = self._ensure_arms(conn, learner_id, arms)
                raw = conn.connection.dbapi_connection
                written = record_postgres(raw, learner_id, runs, now_ms(), keys, half_life)
                if not written.complete:
                    raise _Undo(written)
        except _Undo as undo:
            return undo.written, {}, {}
        return written, remembered, keys

    def _write_direct(
        self, learner_id: int, runs: Sequence[RunRecord], keys: Mapping[str, int], half_life: float
    ) -> Written:
        """The statement on an autocommit connection: alone for one run (a statement is
        atomic by itself), in BEGIN ... COMMIT for several, rolled back unless complete.

        A pooled connection that the server closed (a restart) is replaced once; should the
        lost one have committed first, the second attempt reads its runs as duplicates."""
        import psycopg

        direct = self._direct_engine()
        for attempt in range(2):
            proxy = direct.raw_connection()
            conn: Any = proxy.driver_connection
            try:
                if len(runs) == 1:
                    return record_postgres(conn, learner_id, runs, now_ms(), keys, half_life)
                with conn.transaction() as tx:
                    written = record_postgres(conn, learner_id, runs, now_ms(), keys, half_life)
                    if not written.complete:
                        raise psycopg.Rollback(tx)
                return written
            except psycopg.OperationalError:
                if attempt == 0 and (conn.broken or conn.closed):
                    proxy.invalidate()
                    continue
                raise
            finally:
                proxy.close()
        raise AssertionError("unreachable")

    def _direct_engine(self) -> Engine:
        """Autocommit connections to the database `self.engine` serves (made on first use,
        again should the engine be replaced)."""
        engine = self.engine
        direct = self._direct
        if direct is None or direct[0] is not engine:
            with self._lock:
                direct = self._direct
                if direct is None or direct[0] is not engine:
                    if direct is not None:
                        direct[1].dispose()
                    direct = (engine, _autocommit_engine(engine.url, self._pool_size))
                    self._direct = direct
        return direct[1]

    def _forget_arms(self, learner_id: int) -> None:
        """Drop what this process knows of the learner's arms (a row it knew is gone)."""
        with self._lock:
            self._known.pop(learner_id, None)
            self._keys.pop(learner_id, None)

    def record_rewards(
        self,
        learner_id: int,
        changes: Sequence[RewardChange],
        *,
        actor: str,
        reason: str | None,
        trace_id: str | None,
        at: int,
    ) -> int:
        """Apply manual (lagged) rewards atomically; every arm must already be known."""
        if not changes:
            raise InvalidInput("no rewards to record")
        ordered = sorted(changes, key=lambda c: c.arm_id)

        def run() -> int:
            with write_transaction(self.engine) as conn:
                trace_pk = None
                if trace_id is not None:
                    trace_pk = conn.execute(
                        select(traces.c.id).where(
                            traces.c.learner_id == learner_id, traces.c.trace_id == trace_id
                        )
                    ).scalar()
                p = posteriors.c
                keep = self._keep(conn, learner_id)
                for change in ordered:
                    r = change.reward
                    if keep != 1.0:
                        pa, pb = prior_parameters(parse_arm_id(change.arm_id).type)
                        values = {
                            "alpha": p.alpha * keep
                            + _forget_target("alpha", pa) * (1.0 - keep)
                            + r,
                            "beta": p.beta * keep
                            + _forget_target("beta", pb) * (1.0 - keep)
                            + (1.0 - r),
                        }
                    else:
                        values = {"alpha": p.alpha + r, "beta": p.beta + (1.0 - r)}
                    found = conn.execute(
                        update(posteriors)
                        .where(p.learner_id == learner_id, p.arm_id == change.arm_id)
                        .values(**values, pulls=p.pulls + 1, rewards=p.rewards + r, last_updated=at)
                        .returning(p.epoch, p.pulls)
                    ).first()
                    if found is None:
                        raise NotFound(f"unknown arm {change.arm_id!r}")
                    epoch, seq = found
                    conn.execute(
                        insert(observations).values(
                            learner_id=learner_id,
                            arm_id=change.arm_id,
                            epoch=epoch,
                            reward=change.reward,
                            source="manual",
                            lagged=True,
                            actor=actor,
                            reason=reason,
                            trace_pk=trace_pk,
                            created_at=at,
                            seq=seq,
                        )
                    )
                self._bump(conn, learner_id, len(ordered))
                return len(ordered)

        return with_retries(run)

    def _keep(self, conn: Connection, learner_id: int) -> float:
        """The learner's forgetting factor, read (and its row locked) in this transaction."""
        half_life = conn.execute(
            select(learners.c.half_life).where(learners.c.id == learner_id).with_for_update()
        ).scalar()
        if half_life is None:
            raise NotFound(f"no learner with id {learner_id}")
        return keep_factor(float(half_life))

    def set_half_life(self, learner_id: int, half_life: float, *, at: int) -> None:
        """Make `half_life` the learner's forgetting. A change rebases every posterior (its
        base becomes its current value, in a new epoch), so `verify` replays each arm's later
        changes with the new factor from there; resets and undo work as before."""
        keep_factor(half_life)  # validates

        def run() -> None:
            with write_transaction(self.engine) as conn:
                current = conn.execute(
                    select(learners.c.half_life)
                    .where(learners.c.id == learner_id)
                    .with_for_update()
                ).scalar()
                if current is None:
                    raise NotFound(f"no learner with id {learner_id}")
                if float(current) == float(half_life):
                    return
                p = posteriors.c
                arms = conn.execute(
                    select(p.arm_id)
                    .where(p.learner_id == learner_id)
                    .order_by(self._lock_order(p.arm_id))
                    .with_for_update()
                ).all()
                conn.execute(
                    update(learners)
                    .where(learners.c.id == learner_id)
                    .values(half_life=float(half_life))
                )
                conn.execute(
                    update(posteriors)
                    .where(p.learner_id == learner_id)
                    .values(
                        prior_alpha=p.alpha,
                        prior_beta=p.beta,
                        prior_pulls=p.pulls,
                        prior_rewards=p.rewards,
                        epoch=p.epoch + 1,
                    )
                )
                self._bump(conn, learner_id, max(1, len(arms)))

        with_retries(run)

    def inclusion_counts(self, learner_id: int, last: int) -> dict[str, tuple[int, int, int]]:
        sql = queries.INCLUSION_SQLITE if self.dialect == "sqlite" else self._sql(queries.INCLUSION)
        with reading(self.engine) as conn:
            rows = conn.exec_driver_sql(sql, (learner_id, learner_id, last)).all()
        return queries.inclusion_counts(rows)

    def _bump(self, conn: Connection, learner_id: int, changes: int) -> None:
        conn.exec_driver_sql(self._hot.stats_add, stats_params(learner_id, [], changes))

    def latest_run(self, learner_id: int, conversation: str) -> RunRecord | None:
        t = traces.c
        with reading(self.engine) as conn:
            row = conn.execute(
                select(traces)
                .where(t.learner_id == learner_id, t.conversation == conversation)
                .order_by(t.timestamp.desc(), t.id.desc())
                .limit(1)
            ).first()
            if row is None:
                return None
            return self._traces_with_arms(conn, [row])[0]

    # -- runs completed arm by arm (engine.ports.RunSessions) ----------------------------------

    def record_arm_outcome(
        self,
        learner_id: int,
        arm_id: str,
        reward: float,
        *,
        referenced: bool,
        conversation: str | None,
        apply_reward: bool,
        at: int,
    ) -> ArmOutcome:
        """One arm's outcome, in one transaction: marked on the latest run of `conversation`
        that offered the arm and holds no outcome for it yet (referenced, and the reward with
        `apply_reward`), and, with `apply_reward`, added to the posterior at once. Without such
        a run the change is kept as an automatic observation of its own. An arm never seen
        before gets its posterior row (at its type's prior) first."""
        parsed = parse_arm_id(arm_id)
        p = posteriors.c
        t = traces.c
        a = trace_arms.c

        def run() -> tuple[ArmOutcome, dict[str, tuple[str, int]], dict[str, int]]:
            with write_transaction(self.engine) as conn:
                remembered: dict[str, tuple[str, int]] = {}
                keys: dict[str, int] = {}
                row = conn.execute(
                    select(p.arm_key, p.epoch).where(p.learner_id == learner_id, p.arm_id == arm_id)
                ).first()
                if row is None:
                    remembered, keys = self._ensure_arms(
                        conn, learner_id, {arm_id: (parsed.name, 0)}
                    )
                    row = conn.execute(
                        select(p.arm_key, p.epoch).where(
                            p.learner_id == learner_id, p.arm_id == arm_id
                        )
                    ).one()
                arm_key, epoch = int(row.arm_key), int(row.epoch)
                trace_pk: int | None = None
                trace_id: str | None = None
                if conversation:
                    found = conn.execute(
                        select(t.id, t.trace_id)
                        .select_from(traces.join(trace_arms, a.trace_pk == t.id))
                        .where(
                            t.learner_id == learner_id,
                            t.conversation == conversation,
                            a.arm_key == arm_key,
                            a.included == True,  # noqa: E712
                            a.reward.is_(None),
                            a.referenced == False,  # noqa: E712
                        )
                        .order_by(t.timestamp.desc(), t.id.desc())
                        .limit(1)
                    ).first()
                    if found is not None:
                        trace_pk, trace_id = int(found.id), str(found.trace_id)
                # The posterior first (forgetting as the learner's other writes do): its pull
                # count after the change orders the change for `verify`'s replay (seq).
                values: dict[str, Any] = {"arm_key": p.arm_key}
                if apply_reward:
                    keep = self._keep(conn, learner_id)
                    if keep != 1.0:
                        pa, pb = prior_parameters(parsed.type)
                        values = {
                            "alpha": p.alpha * keep
                            + _forget_target("alpha", pa) * (1.0 - keep)
                            + reward,
                            "beta": p.beta * keep
                            + _forget_target("beta", pb) * (1.0 - keep)
                            + (1.0 - reward),
                        }
                    else:
                        values = {"alpha": p.alpha + reward, "beta": p.beta + (1.0 - reward)}
                    values.update(pulls=p.pulls + 1, rewards=p.rewards + reward, last_updated=at)
                    self._bump(conn, learner_id, 1)
                state = conn.execute(
                    update(posteriors)
                    .where(p.learner_id == learner_id, p.arm_id == arm_id)
                    .values(**values)
                    .returning(p.alpha, p.beta, p.pulls, p.last_updated)
                ).one()
                seq = int(state.pulls) if apply_reward else None
                if trace_pk is not None:
                    conn.execute(
                        update(trace_arms)
                        .where(a.trace_pk == trace_pk, a.arm_key == arm_key)
                        .values(
                            referenced=referenced,
                            reward=reward if apply_reward else None,
                            epoch=epoch if apply_reward else None,
                            seq=seq,
                        )
                    )
                    conn.execute(update(traces).where(t.id == trace_pk).values(guard=None))
                elif apply_reward:
                    conn.execute(
                        insert(observations).values(
                            learner_id=learner_id,
                            arm_id=arm_id,
                            epoch=epoch,
                            reward=reward,
                            source="auto",
                            lagged=False,
                            actor=None,
                            reason=None,
                            trace_pk=None,
                            created_at=at,
                            seq=seq,
                        )
                    )
                posterior = Posterior.trusted(
                    float(state.alpha), float(state.beta), int(state.pulls), state.last_updated
                )
                outcome = ArmOutcome(arm_id, posterior, trace_id, apply_reward)
                return outcome, remembered, keys

        outcome, remembered, keys = with_retries(run)
        self._remember(learner_id, remembered, keys)
        return outcome

    def boost_priors(self, learner_id: int, arm_ids: Sequence[str], alpha: float) -> int:
        """Start these arms at Beta(alpha, 1) (the seedBoost option): their prior becomes it and
        their posterior moves by the same amount, so whatever they have learnt is kept and
        `verify` still holds. Only arms never reset are touched; a second call with the same
        alpha changes nothing. Returns how many rows were changed."""
        if not arm_ids:
            return 0
        p = posteriors.c

        def run() -> int:
            with write_transaction(self.engine) as conn:
                result = conn.execute(
                    update(posteriors)
                    .where(
                        p.learner_id == learner_id,
                        p.arm_id.in_(sorted(set(arm_ids))),
                        p.epoch == 0,
                        p.prior_alpha != alpha,
                    )
                    .values(alpha=p.alpha + (alpha - p.prior_alpha), prior_alpha=alpha)
                )
                changed = int(result.rowcount or 0)
                if changed:
                    self._bump(conn, learner_id, changed)
                return changed

        return with_retries(run)

    def conversation_runs(self, learner_id: int, conversation: str, since: int) -> list[RunRecord]:
        """The runs recorded in `conversation` from `since` (ms) on, oldest first."""
        t = traces.c
        with reading(self.engine) as conn:
            rows = conn.execute(
                select(traces)
                .where(
                    t.learner_id == learner_id,
                    t.conversation == conversation,
                    t.timestamp >= since,
                )
                .order_by(t.timestamp, t.id)
                .limit(1000)
            ).all()
            return self._traces_with_arms(conn, rows)

    # -- session sets (SPEC section 4a) -------------------------------------------------------

    def session_set(self, learner_id: int, key: str) -> SessionSet | None:
        return self._session_sets.get(learner_id, key)

    def claim_session_set(self, learner_id: int, candidate: SessionSet, idle_ms: int) -> SessionSet:
        return self._session_sets.claim(learner_id, candidate, idle_ms)

    def save_session_set(self, learner_id: int, changed: SessionSet) -> bool:
        return self._session_sets.save(learner_id, changed)

    # -- resets -------------------------------------------------------------------------------

    def reset(
        self, learner_id: int, arm_ids: Sequence[str] | None, *, actor: str, at: int
    ) -> ResetRecord:
        wanted = None if arm_ids is None else sorted(set(arm_ids))
        if wanted is not None and not wanted:
            raise InvalidInput("no arms to reset")

        def run() -> ResetRecord:
            with write_transaction(self.engine) as conn:
                return self._reset(conn, learner_id, wanted, actor, at)

        return with_retries(run)

    def _reset(
        self, conn: Connection, learner_id: int, wanted: list[str] | None, actor: str, at: int
    ) -> ResetRecord:
        p = posteriors.c
        learner = conn.execute(
            select(learners.c.stats_epoch, learners.c.status_from_epoch)
            .where(learners.c.id == learner_id)
            .with_for_update()
        ).one()
        query = select(posteriors).where(p.learner_id == learner_id)
        if wanted is not None:
            query = query.where(p.arm_id.in_(wanted))
        rows = conn.execute(query.order_by(self._lock_order(p.arm_id)).with_for_update()).all()
        if wanted is not None:
            found = {r.arm_id for r in rows}
            unknown = [a for a in wanted if a not in found]
            if unknown:
                raise NotFound(f"unknown arm(s): {', '.join(unknown[:10])}; nothing was reset")
        all_arms = wanted is None
        last_trace = conn.execute(
            select(func.coalesce(func.max(traces.c.id), 0)).where(traces.c.learner_id == learner_id)
        ).scalar_one()
        reset_id = conn.execute(
            insert(resets)
            .values(
                learner_id=learner_id,
                all_arms=all_arms,
                arm_ids=json.dumps([r.arm_id for r in rows]),
                actor=actor,
                created_at=at,
                previous_status_from_epoch=learner.status_from_epoch,
            )
            .returning(resets.c.id)
        ).scalar_one()
        if rows:
            conn.execute(
                insert(snapshots),
                [
                    {
                        "reset_id": reset_id,
                        "arm_id": r.arm_id,
                        "alpha": r.alpha,
                        "beta": r.beta,
                        "pulls": r.pulls,
                        "last_updated": r.last_updated,
                        "prior_alpha": r.prior_alpha,
                        "prior_beta": r.prior_beta,
                        "prior_pulls": r.prior_pulls,
                        "epoch": r.epoch,
                        "reset_trace_pk": r.reset_trace_pk,
                        "rewards": r.rewards,
                        "prior_rewards": r.prior_rewards,
                    }
                    for r in rows
                ],
            )
            stmt = update(posteriors).where(p.learner_id == learner_id)
            if wanted is not None:
                stmt = stmt.where(p.arm_id.in_(wanted))
            conn.execute(
                stmt.values(
                    alpha=1.0,
                    beta=1.0,
                    pulls=0,
                    last_updated=None,
                    prior_alpha=1.0,
                    prior_beta=1.0,
                    prior_pulls=0,
                    rewards=0.0,
                    prior_rewards=0.0,
                    epoch=p.epoch + 1,
                    reset_trace_pk=last_trace,
                )
            )
        if all_arms:
            conn.execute(
                update(learners)
                .where(learners.c.id == learner_id)
                .values(
                    stats_epoch=learners.c.stats_epoch + 1,
                    status_from_epoch=learners.c.stats_epoch + 1,
                )
            )
        self._bump(conn, learner_id, max(1, len(rows)))
        return ResetRecord(int(reset_id), tuple(r.arm_id for r in rows), all_arms, actor, at)

    def last_reset(self, learner_id: int) -> ResetRecord | None:
        with reading(self.engine) as conn:
            row = conn.exec_driver_sql(self._sql(queries.LAST_RESET), (learner_id,)).first()
        return queries.reset_record(row)

    def undo_reset(self, learner_id: int, *, actor: str, at: int) -> ResetRecord:
        def run() -> ResetRecord:
            with write_transaction(self.engine) as conn:
                return self._undo(conn, learner_id, actor, at)

        return with_retries(run)

    def _undo(self, conn: Connection, learner_id: int, actor: str, at: int) -> ResetRecord:
        conn.execute(
            select(learners.c.id).where(learners.c.id == learner_id).with_for_update()
        ).one()
        row = conn.execute(
            select(resets)
            .where(resets.c.learner_id == learner_id, resets.c.undone_at.is_(None))
            .order_by(resets.c.id.desc())
            .limit(1)
        ).first()
        if row is None:
            raise Conflict("there is no reset to undo")
        p = posteriors.c
        snaps = conn.execute(
            select(snapshots).where(snapshots.c.reset_id == row.id).order_by(snapshots.c.arm_id)
        ).all()
        arm_ids = [s.arm_id for s in snaps]
        if arm_ids:
            conn.execute(
                select(p.arm_id)
                .where(p.learner_id == learner_id, p.arm_id.in_(arm_ids))
                .order_by(self._lock_order(p.arm_id))
                .with_for_update()
            ).all()
        current = {
            r.arm_id: r
            for r in conn.execute(
                select(posteriors).where(p.learner_id == learner_id, p.arm_id.in_(arm_ids))
            )
        }
        changes = []
        for snap in snaps:
            # Since the reset (and any later, undone ones) the arm is Beta(1, 1) plus what it
            # learnt; keep that learning on top of the state the reset replaced.
            now = current[snap.arm_id]
            alpha = snap.alpha + (now.alpha - 1.0)
            beta = snap.beta + (now.beta - 1.0)
            pulls = snap.pulls + now.pulls
            rewards = snap.rewards + now.rewards
            changes.append(
                {
                    "b_arm": snap.arm_id,
                    "b_alpha": alpha,
                    "b_beta": beta,
                    "b_pulls": pulls,
                    "b_rewards": rewards,
                    "b_updated": now.last_updated or snap.last_updated,
                    "b_trace": snap.reset_trace_pk,
                }
            )
        if changes:  # one statement for every arm (executemany), not one round trip each
            conn.execute(
                update(posteriors)
                .where(p.learner_id == learner_id, p.arm_id == bindparam("b_arm"))
                .values(
                    alpha=bindparam("b_alpha"),
                    beta=bindparam("b_beta"),
                    pulls=bindparam("b_pulls"),
                    last_updated=bindparam("b_updated"),
                    prior_alpha=bindparam("b_alpha"),
                    prior_beta=bindparam("b_beta"),
                    prior_pulls=bindparam("b_pulls"),
                    rewards=bindparam("b_rewards"),
                    prior_rewards=bindparam("b_rewards"),
                    epoch=p.epoch + 1,
                    reset_trace_pk=bindparam("b_trace"),
                ),
                changes,
            )
        conn.execute(
            update(resets).where(resets.c.id == row.id).values(undone_at=at, undone_by=actor)
        )
        if row.all_arms:
            conn.execute(
                update(learners)
                .where(learners.c.id == learner_id)
                .values(status_from_epoch=row.previous_status_from_epoch)
            )
        self._bump(conn, learner_id, max(1, len(snaps)))
        return ResetRecord(int(row.id), tuple(arm_ids), bool(row.all_arms), actor, at, True)

    # -- phase --------------------------------------------------------------------------------

    def set_phase(
        self, learner_id: int, phase: Phase, *, actor: str, bootstrap: bool, at: int
    ) -> PhaseChangeRecord:
        def run() -> PhaseChangeRecord:
            with write_transaction(self.engine) as conn:
                previous = Phase(
                    conn.execute(
                        select(learners.c.phase)
                        .where(learners.c.id == learner_id)
                        .with_for_update()
                    ).scalar_one()
                )
                conn.execute(
                    update(learners).where(learners.c.id == learner_id).values(phase=phase.value)
                )
                n_traces = n_obs = 0
                if bootstrap and phase is Phase.ACTIVE and previous is Phase.PASSIVE:
                    n_traces, n_obs = self._bootstrap(conn, learner_id, at)
                self._bump(conn, learner_id, max(1, n_obs))
                return PhaseChangeRecord(previous, phase, n_traces, n_obs)

        return with_retries(run)

    def _bootstrap(self, conn: Connection, learner_id: int, at: int) -> tuple[int, int]:
        """Fold the traces recorded while passive into the posteriors: their included arms
        get the rewards they would have had (passive runs include every arm)."""
        params = {"learner": learner_id, "at": at, "yes": True, "no": False}
        p = posteriors.c
        conn.execute(
            select(p.arm_id)
            .where(p.learner_id == learner_id)
            .order_by(self._lock_order(p.arm_id))
            .with_for_update()
        ).all()
        n_traces = conn.execute(
            text(f"SELECT COUNT(*) FROM ({_BOOTSTRAP_TRACES}) AS b"), params
        ).scalar_one()
        n_obs = conn.execute(text(_BOOTSTRAP_REWARDS), params).rowcount or 0
        keep = self._keep(conn, learner_id)
        if keep == 1.0:
            conn.execute(text(_BOOTSTRAP_INCREMENT), params)
        else:
            self._bootstrap_forgetting(conn, learner_id, keep, at)
        t = traces.c
        conn.execute(
            update(traces)
            .where(
                t.learner_id == learner_id,
                t.phase == Phase.PASSIVE.value,
                t.bootstrapped.is_(False),
            )
            .values(bootstrapped=True)
        )
        return int(n_traces), int(n_obs)

    def _bootstrap_forgetting(
        self, conn: Connection, learner_id: int, keep: float, at: int
    ) -> None:
        """The bootstrap's rewards applied arm by arm in trace order with forgetting, each
        change numbered (`seq`) for `verify`."""
        params = {"learner": learner_id, "no": False}
        rows = conn.execute(
            text(
                "SELECT ta.trace_pk, ta.arm_key, ta.reward FROM trace_arms ta "
                "WHERE ta.reward IS NOT NULL AND ta.trace_pk IN ("
                + _BOOTSTRAP_TRACES
                + ") ORDER BY ta.arm_key, ta.trace_pk"
            ),
            params,
        ).all()
        if not rows:
            return
        p = posteriors.c
        arms = {
            int(r.arm_key): r
            for r in conn.execute(
                select(
                    p.arm_key,
                    p.arm_id,
                    p.alpha,
                    p.beta,
                    p.pulls,
                    p.prior_alpha,
                    p.prior_beta,
                    p.prior_pulls,
                    p.reset_trace_pk,
                ).where(p.learner_id == learner_id)
            )
        }
        by_arm: dict[int, list[tuple[int, float]]] = {}
        for trace_pk, arm_key, reward in rows:
            by_arm.setdefault(int(arm_key), []).append((int(trace_pk), float(reward)))
        seqs: list[dict[str, Any]] = []
        updates: list[dict[str, Any]] = []
        for arm_key, changes in by_arm.items():
            arm = arms[arm_key]
            f = fold((r for _, r in changes), keep)
            pa, pb = forgetting_prior(
                prior_parameters(parse_arm_id(arm.arm_id).type),
                float(arm.prior_alpha),
                float(arm.prior_beta),
                int(arm.prior_pulls),
                int(arm.reset_trace_pk),
            )
            for k, (trace_pk, _) in enumerate(changes, start=1):
                seqs.append({"pk": trace_pk, "key": arm_key, "seq": int(arm.pulls) + k})
            updates.append(
                {
                    "key": arm_key,
                    "a": forget(float(arm.alpha), pa, f.keep, f.alpha_gain),
                    "b": forget(float(arm.beta), pb, f.keep, f.beta_gain),
                    "n": int(arm.pulls) + f.pulls,
                    "r": f.rewards,
                }
            )
        conn.execute(
            text("UPDATE trace_arms SET seq = :seq WHERE trace_pk = :pk AND arm_key = :key"),
            seqs,
        )
        conn.execute(
            text(
                "UPDATE posteriors SET alpha = :a, beta = :b, pulls = :n, "
                "rewards = rewards + :r, last_updated = :at "
                "WHERE learner_id = :learner AND arm_key = :key"
            ),
            [{**u, "at": at, "learner": learner_id} for u in updates],
        )

    # -- reading ------------------------------------------------------------------------------

    def run_stats(self, learner_id: int) -> RunStats:
        with reading(self.engine) as conn:
            row = conn.exec_driver_sql(self._sql(queries.RUN_STATS), (learner_id,)).first()
        if row is None:
            raise NotFound(f"no learner with id {learner_id}")
        return queries.run_stats(row)

    def trace_page(self, learner_id: int, limit: int, offset: int) -> tuple[list[RunRecord], int]:
        t = traces.c
        with reading(self.engine) as conn:
            rows = conn.execute(
                select(traces)
                .where(t.learner_id == learner_id)
                .order_by(t.timestamp.desc(), t.id.desc())
                .limit(limit)
                .offset(offset)
            ).all()
            page = self._traces_with_arms(conn, rows)
        return page, self.run_stats(learner_id).all_time_traces

    def iter_traces(self, learner_id: int, batch: int = 1000) -> Iterator[RunRecord]:
        t = traces.c
        after = 0
        while True:
            with reading(self.engine) as conn:
                rows = conn.execute(
                    select(traces)
                    .where(t.learner_id == learner_id, t.id > after)
                    .order_by(t.id)
                    .limit(batch)
                ).all()
                if not rows:
                    return
                page = self._traces_with_arms(conn, rows)
            after = rows[-1].id
            yield from page

    def _traces_with_arms(self, conn: Connection, rows: Sequence[Any]) -> list[RunRecord]:
        if not rows:
            return []
        pks = [r.id for r in rows]
        by_trace: dict[int, list[ArmOutcomeRecord]] = {pk: [] for pk in pks}
        a = trace_arms.c
        p = posteriors.c
        learner_id = rows[0].learner_id
        arm_rows = conn.execute(
            select(
                a.trace_pk,
                p.arm_id,
                p.label,
                a.included,
                a.referenced,
                a.token_cost,
                a.reward,
            )
            .select_from(
                trace_arms.join(posteriors, (p.learner_id == learner_id) & (p.arm_key == a.arm_key))
            )
            .where(a.trace_pk.in_(pks))
            .order_by(a.trace_pk, p.arm_id)
        ).all()
        for r in arm_rows:
            by_trace[r.trace_pk].append(
                ArmOutcomeRecord(
                    r.arm_id,
                    r.label,
                    bool(r.included),
                    bool(r.referenced),
                    int(r.token_cost),
                    r.reward,
                )
            )
        return [record_from_row(r, tuple(by_trace[r.id])) for r in rows]

    def timeseries(
        self, learner_id: int, metric: str, window_ms: int, since: int | None
    ) -> list[TimeBucket]:
        if window_ms <= 0:
            raise InvalidInput("window must be positive")
        with reading(self.engine) as conn:
            if metric == "tokens":
                t = traces.c
                bucket = (t.timestamp // window_ms) * window_ms
                query = select(bucket.label("t"), func.sum(t.usage_total), func.count()).where(
                    t.learner_id == learner_id
                )
                if since is not None:
                    query = query.where(t.timestamp >= since)
                rows = conn.execute(query.group_by(bucket).order_by(bucket)).all()
                return [TimeBucket(int(r[0]), float(r[1] or 0), None, int(r[2])) for r in rows]
            if metric == "convergence":
                rows = conn.execute(
                    text(_CONVERGENCE),
                    {"learner": learner_id, "w": window_ms, "since": since or 0},
                ).all()
                return [
                    TimeBucket(int(r[0]), float(r[2] or 0) / max(1, int(r[3])), r[1], int(r[3]))
                    for r in rows
                ]
        raise InvalidInput(f"unknown metric {metric!r}; expected tokens or convergence")

    # -- verify ---------------------------------------------------------------------------------

    def verify(self, learner_id: int) -> VerifyReport:
        """Prove that every posterior equals its base since its last reset plus the changes
        recorded in its current epoch, that every trace is whole, and that the counters
        match the traces."""
        p = posteriors.c
        problems: list[VerifyProblem] = []
        with reading(self.engine, snapshot=True) as conn:
            sums = {
                (r.arm_id, int(r.epoch)): (float(r.gained or 0.0), int(r.n))
                for r in conn.execute(text(_CHANGES_BY_ARM), {"learner": learner_id})
            }
            rows = conn.execute(select(posteriors).where(p.learner_id == learner_id)).all()
            half_life = conn.execute(
                select(learners.c.half_life).where(learners.c.id == learner_id)
            ).scalar()
            keep = keep_factor(float(half_life or 0.0))
            replayed = self._replay(conn, learner_id, rows, keep, problems) if keep != 1 else {}
            n_obs = 0
            for r in rows:
                gained, n = sums.get((r.arm_id, int(r.epoch)), (0.0, 0))
                n_obs += n
                want_alpha = r.prior_alpha + gained
                want_beta = r.prior_beta + (n - gained)
                if keep != 1.0:
                    want_alpha, want_beta = replayed.get(r.arm_id, (r.prior_alpha, r.prior_beta))
                tol = 1e-6 * (1 + n)
                if abs(r.alpha - want_alpha) > tol or abs(r.beta - want_beta) > tol:
                    problems.append(
                        VerifyProblem(
                            r.arm_id,
                            f"posterior Beta({r.alpha:.6g}, {r.beta:.6g}) but its base plus "
                            f"{n} recorded change(s) give Beta({want_alpha:.6g}, "
                            f"{want_beta:.6g})",
                        )
                    )
                want_rewards = r.prior_rewards + gained
                if abs(r.rewards - want_rewards) > tol:
                    problems.append(
                        VerifyProblem(
                            r.arm_id,
                            f"{r.rewards:.6g} rewards recorded but its base's "
                            f"{r.prior_rewards:.6g} plus {n} recorded change(s) give "
                            f"{want_rewards:.6g}",
                        )
                    )
                if r.pulls != r.prior_pulls + n:
                    problems.append(
                        VerifyProblem(
                            r.arm_id, f"{r.pulls} pulls but {r.prior_pulls} + {n} changes"
                        )
                    )
                if r.alpha <= 0 or r.beta <= 0:
                    problems.append(VerifyProblem(r.arm_id, "alpha and beta must be positive"))
            t = traces.c
            n_traces = conn.execute(
                select(func.count()).select_from(traces).where(t.learner_id == learner_id)
            ).scalar_one()
            armless = conn.execute(
                select(func.count())
                .select_from(traces)
                .where(
                    t.learner_id == learner_id,
                    ~select(trace_arms.c.trace_pk).where(trace_arms.c.trace_pk == t.id).exists(),
                )
            ).scalar_one()
            if armless:
                problems.append(VerifyProblem(None, f"{armless} trace(s) have no arm outcomes"))
            unknown = conn.execute(
                select(func.count(func.distinct(trace_arms.c.arm_key)))
                .select_from(trace_arms.join(traces, traces.c.id == trace_arms.c.trace_pk))
                .where(
                    t.learner_id == learner_id,
                    ~select(p.arm_id)
                    .where(p.learner_id == learner_id, p.arm_key == trace_arms.c.arm_key)
                    .exists(),
                )
            ).scalar_one()
            if unknown:
                problems.append(
                    VerifyProblem(None, f"{unknown} arm(s) appear in traces without a posterior")
                )
            stats = conn.exec_driver_sql(self._sql(queries.RUN_STATS), (learner_id,)).first()
        if stats is None:
            raise NotFound(f"no learner with id {learner_id}")
        counted = queries.run_stats(stats).all_time_traces
        if counted != n_traces:
            problems.append(
                VerifyProblem(None, f"counters say {counted} traces, the table holds {n_traces}")
            )
        return VerifyReport(len(rows), int(n_traces), n_obs, tuple(problems))

    def _replay(
        self,
        conn: Connection,
        learner_id: int,
        rows: Sequence[Any],
        keep: float,
        problems: list[VerifyProblem],
    ) -> dict[str, tuple[float, float]]:
        """Each arm's base with its current epoch's changes applied in the order they were
        (`seq`), forgetting as the writes did: the posterior every arm must hold."""
        base = {r.arm_id: r for r in rows}
        changes: dict[str, list[tuple[float, int | None]]] = {}
        for arm_id, gained, seq in conn.execute(text(_CHANGES_IN_ORDER), {"learner": learner_id}):
            changes.setdefault(arm_id, []).append((float(gained), seq))
        out: dict[str, tuple[float, float]] = {}
        for arm_id, items in changes.items():
            r = base[arm_id]
            want = list(range(int(r.prior_pulls) + 1, int(r.prior_pulls) + len(items) + 1))
            if [s for _, s in items] != want:
                problems.append(
                    VerifyProblem(arm_id, "its recorded changes are not numbered in order")
                )
            pa, pb = forgetting_prior(
                prior_parameters(parse_arm_id(arm_id).type),
                float(r.prior_alpha),
                float(r.prior_beta),
                int(r.prior_pulls),
                int(r.reset_trace_pk),
            )
            alpha, beta = float(r.prior_alpha), float(r.prior_beta)
            for gained, _ in items:
                alpha = forget(alpha, pa, keep, gained)
                beta = forget(beta, pb, keep, 1.0 - gained)
            out[arm_id] = (alpha, beta)
        return out

    # -- audit --------------------------------------------------------------------------------

    def record_audit(self, learner_id: int, entry: AuditEntry) -> None:
        def run() -> None:
            with write_transaction(self.engine) as conn:
                conn.execute(
                    insert(audit).values(
                        learner_id=learner_id,
                        kind=entry.kind,
                        actor=entry.actor,
                        surface=entry.surface,
                        detail=json.dumps(dict(entry.detail), default=str),
                        result=entry.result,
                        created_at=entry.at,
                    )
                )

        with_retries(run)

    def audit_log(self, learner_id: int, limit: int = 50) -> list[AuditEntry]:
        with reading(self.engine) as conn:
            rows = conn.execute(
                select(audit)
                .where(audit.c.learner_id == learner_id)
                .order_by(audit.c.id.desc())
                .limit(limit)
            ).all()
        return [
            AuditEntry(r.kind, r.actor, r.surface, json.loads(r.detail), r.result, r.created_at)
            for r in rows
        ]

    def delete_learner_data(self, learner_id: int) -> None:
        """Remove every trace, observation and posterior of a learner (used by tests/tools)."""
        with write_transaction(self.engine) as conn:
            for table in (observations, run_stats, posteriors, audit, session_sets):
                conn.execute(delete(table).where(table.c.learner_id == learner_id))
            # Outcomes first: no key ties them to their trace (migration 0008).
            conn.execute(
                delete(trace_arms).where(
                    trace_arms.c.trace_pk.in_(
                        select(traces.c.id).where(traces.c.learner_id == learner_id)
                    )
                )
            )
            conn.execute(delete(traces).where(traces.c.learner_id == learner_id))

    def close(self) -> None:
        self.engine.dispose()
        if self._direct is not None:
            self._direct[1].dispose()


__all__ = ["SqlStore"]
