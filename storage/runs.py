"""Runs: record_runs, the observe write path (one transaction per batch; on PostgreSQL one
call of the server-side function, retried on what an attempt that wrote nothing learnt)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

from sqlalchemy import URL, Engine, create_engine, event

from learning_bot.engine.config import Phase
from learning_bot.engine.errors import Conflict, InvalidInput
from learning_bot.engine.ports import LearnerChanged
from learning_bot.engine.posterior import now_ms
from learning_bot.engine.records import RunRecord
from learning_bot.engine.store_records import RecordResult, RunStatus
from learning_bot.storage.arm_keys import ArmKeys
from learning_bot.storage.database import (
    lost_session_state,
    schema_ready,
    sqlite_write_cursor,
    watch_pooler,
    with_retries,
    write_transaction,
)
from learning_bot.storage.hotpath import Stale, Written, record_postgres
from learning_bot.storage.pooling import PoolSettings

_MAX_ATTEMPTS = 16
"""Statements one record_runs call may take on PostgreSQL before it gives up: each attempt
that writes nothing has learnt something (the half-life, a missing arm, stored runs)."""

Settings = str | None
"""The learner settings runs were built under, as JSON (None: not checked)."""


class _Undo(Exception):
    """Rolls a transaction back when the statement did not write every new run."""

    def __init__(self, written: Written) -> None:
        super().__init__("incomplete write")
        self.written = written


def _autocommit_engine(url: URL, pool: PoolSettings) -> Engine:
    """Connections for the PostgreSQL observe statement: autocommit (the statement is its own
    transaction, no BEGIN or COMMIT round trip), no ping on checkout (a closed connection is
    replaced when it fails), integers always sent as bigint so that every call has the same
    parameter types and reuses one prepared statement (none behind a transaction pooler)."""
    from psycopg.types.numeric import Int8BinaryDumper, Int8Dumper

    engine = create_engine(
        url,
        pool_size=pool.size,
        max_overflow=pool.overflow,
        isolation_level="AUTOCOMMIT",
        connect_args={"connect_timeout": 10},
    )
    watch_pooler(engine, pool.pooler)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.adapters.register_dumper(int, Int8Dumper)
        dbapi_conn.adapters.register_dumper(int, Int8BinaryDumper)

    return engine


class Runs(ArmKeys):
    """The Store port's record_runs: which runs are new is decided here, once."""

    def record_runs(
        self, learner_id: int, runs: Sequence[RunRecord], settings: Settings = None
    ) -> RecordResult:
        """Write runs in one transaction. A trace id already stored, or given earlier in the
        same batch, changes nothing and reads as a duplicate: this is the one place that
        decides which runs are new.

        The same transaction (on PostgreSQL, the same statement) checks that every run was
        built under the learner's phase (`RunRecord.phase`) and, when `settings` (the JSON of
        the learner settings they were built under) is given, under its settings: otherwise
        nothing is written and LearnerChanged names the learner's phase."""
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
                    inserted, _, _ = self._hot.record(
                        cur, learner_id, unique, now_ms(), keys, settings
                    )
                return inserted, {}, keys
            with write_transaction(self.engine) as conn:
                remembered, keys = self._ensure_arms(conn, learner_id, arms)
                cur = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
                try:
                    inserted, _, _ = self._hot.record(
                        cur, learner_id, unique, now_ms(), keys, settings
                    )
                finally:
                    cur.close()
                return inserted, remembered, keys

        try:
            if self.dialect == "postgresql":
                inserted = self._record_postgres(learner_id, unique, arms, settings)
            else:
                inserted, remembered, keys = with_retries(attempt)
                self._remember(learner_id, remembered, keys)
        except Stale as stale:
            raise LearnerChanged(Phase(stale.phase)) from None
        new = {r.trace_id for r in inserted}
        statuses: tuple[RunStatus, ...] = tuple(
            "inserted" if first[r.trace_id] == i and r.trace_id in new else "duplicate"
            for i, r in enumerate(runs)
        )
        return RecordResult(tuple(r.trace_id for r in runs), statuses)

    def _record_postgres(
        self,
        learner_id: int,
        runs: Sequence[RunRecord],
        arms: Mapping[str, tuple[str, int]],
        settings: Settings,
    ) -> list[RunRecord]:
        """The runs (distinct trace ids) written by one statement each attempt; returns those
        that were new (Stale when they were not built under the learner's phase or settings).
        An attempt that writes nothing tells why: the learner's half-life is
        not the one the runs were folded with (fold again), an arm's row is missing (create
        it), or, in a batch, some runs were stored by someone else meanwhile (its transaction
        is rolled back; the new ones are written again without them)."""
        pending = list(runs)
        for _ in range(_MAX_ATTEMPTS):
            folded_with = self._half_lives.get(learner_id, 0.0)
            written, remembered, keys = with_retries(
                partial(self._write_postgres, learner_id, pending, arms, folded_with, settings)
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
        settings: Settings,
    ) -> tuple[Written, dict[str, tuple[str, int]], dict[str, int]]:
        """One attempt: the statement alone when every arm is known (one round trip for one
        run), else in a transaction after creating the arms' rows."""
        if self._arms_known(learner_id, arms):
            keys = self._keys[learner_id]
            return self._write_direct(learner_id, runs, keys, half_life, settings), {}, keys
        try:
            with write_transaction(self.engine) as conn:
                remembered, keys = self._ensure_arms(conn, learner_id, arms)
                raw = conn.connection.dbapi_connection
                written = record_postgres(
                    raw, learner_id, runs, now_ms(), keys, half_life, settings
                )
                if not written.complete:
                    raise _Undo(written)
        except _Undo as undo:
            return undo.written, {}, {}
        return written, remembered, keys

    def _write_direct(
        self,
        learner_id: int,
        runs: Sequence[RunRecord],
        keys: Mapping[str, int],
        half_life: float,
        settings: Settings,
    ) -> Written:
        """The statement on an autocommit connection: alone for one run (a statement is
        atomic by itself), in BEGIN ... COMMIT for several, rolled back unless complete.

        A pooled connection that the server closed (a restart) is replaced once; should the
        lost one have committed first, the second attempt reads its runs as duplicates."""
        import psycopg

        # A server started while the database was down checks (creates) the schema on the
        # first use of its engine; this statement's own connections come after that check.
        schema_ready(self.engine)
        direct = self._direct_engine()
        for attempt in range(2):
            proxy = direct.raw_connection()
            conn: Any = proxy.driver_connection
            try:
                args = (conn, learner_id, runs, now_ms(), keys, half_life, settings)
                if len(runs) == 1:
                    return record_postgres(*args)
                with conn.transaction() as tx:
                    written = record_postgres(*args)
                    if not written.complete:
                        raise psycopg.Rollback(tx)
                return written
            except psycopg.Error as exc:
                lost = isinstance(exc, psycopg.OperationalError) and (conn.broken or conn.closed)
                if lost and attempt == 0:
                    proxy.invalidate()
                    continue
                if lost_session_state(exc):
                    proxy.invalidate()  # its statement cache is wrong: never reuse it
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
                    direct = (engine, _autocommit_engine(engine.url, self._pool))
                    self._direct = direct
        return direct[1]
