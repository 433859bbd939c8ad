"""LiteReader: the read-only port (engine.ports.StoreReads) on a SQLite file through the
standard library, for one-shot commands (`learning-bot status`) that should not pay
SQLAlchemy's import.

It runs the same SQL as SqlStore (storage.queries) and never writes; anything else goes through
SqlStore. Importing it imports nothing but the standard library: the rows (`*_row` methods)
serve the command line's status as they are, and the port's methods turn them into the
engine's records. A service over it is made through engine.read_only.ReadOnlyStore."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from learning_bot.storage import queries
from learning_bot.storage.revision import HEAD_REVISION

if TYPE_CHECKING:
    from learning_bot.engine.config import Phase
    from learning_bot.engine.ports import ArmRecord, LearnerState, RunStats
    from learning_bot.engine.savings import SessionUsage
    from learning_bot.engine.session_sets import SessionDecisions
    from learning_bot.engine.store_records import ResetRecord


T = TypeVar("T")


def _not_found(learner_id: int) -> Exception:
    from learning_bot.engine.errors import NotFound

    return NotFound(f"no learner with id {learner_id}")


class NotReadable(Exception):
    """The file cannot be served read-only (missing, older schema, unknown learner...)."""


def sqlite_path(url: str) -> Path | None:
    """The file of a plain `sqlite:///path` URL, or None for anything else."""
    prefix = "sqlite:///"
    if not url.startswith(prefix) or "?" in url:
        return None
    path = url[len(prefix) :]
    if not path or path.startswith((":memory:", "file:")):
        return None
    return Path(path)


class LiteReader:
    """The StoreReads port: the reads status needs, and nothing else."""

    def __init__(self, path: Path) -> None:
        if not path.is_file():
            raise NotReadable(f"{path} does not exist yet")
        try:
            self.conn = sqlite3.connect(path, timeout=30.0, check_same_thread=False)
            self.conn.execute("PRAGMA query_only = ON")
            revision = self.conn.execute(queries.SCHEMA_REVISION).fetchone()
        except sqlite3.Error as exc:
            raise NotReadable(str(exc)) from None
        if revision is None or revision[0] != HEAD_REVISION:
            self.conn.close()
            raise NotReadable("the schema is not at this version's revision")
        self.url = f"sqlite:///{path}"

    # -- rows, as sqlite3 gives them (sqlite3.Error when the file cannot be read) ---------------

    def learner_id(self, name: str) -> int | None:
        row = self.conn.execute(queries.LEARNER_BY_NAME, (name,)).fetchone()
        return None if row is None else int(row[0])

    def learner_row(self, learner_id: int) -> tuple[Any, ...] | None:
        """id, name, phase, version, half-life, settings (queries.LEARNER_STATE)."""
        row: tuple[Any, ...] | None = self.conn.execute(
            queries.LEARNER_STATE, (learner_id,)
        ).fetchone()
        return row

    def arm_rows(self, learner_id: int) -> list[tuple[Any, ...]]:
        """arm id, label, token cost, alpha, beta, pulls, last updated, arm key, base (prior
        alpha, beta, pulls), reset trace, recorded rewards (queries.ARMS)."""
        return self.conn.execute(queries.ARMS, (learner_id,)).fetchall()

    def run_stats_row(self, learner_id: int) -> tuple[Any, ...] | None:
        """The run counters of queries.RUN_STATS."""
        row: tuple[Any, ...] | None = self.conn.execute(queries.RUN_STATS, (learner_id,)).fetchone()
        return row

    def inclusion_rows(self, learner_id: int, last: int) -> list[tuple[Any, ...]]:
        """arm id, runs that included it, runs that offered it, runs that used it, over the
        latest `last` selected runs, ordered by arm id (queries.INCLUSION_SQLITE)."""
        params = (learner_id, learner_id, last)
        return self.conn.execute(queries.INCLUSION_SQLITE, params).fetchall()

    # -- the Store port's reads ----------------------------------------------------------------

    def open_learner(
        self,
        name: str,
        initial_phase: Phase,
        settings: Mapping[str, Any] | None = None,
        half_life: float = 0.0,
    ) -> LearnerState:
        found = self._read(self.learner_id, name)
        if found is None:
            raise NotReadable(f"no learner named {name!r} yet")
        return self.learner_state(found)

    def learner_state(self, learner_id: int) -> LearnerState:
        return queries.learner_state(self._learner_read(self.learner_row, learner_id))

    def load_arms(self, learner_id: int) -> dict[str, ArmRecord]:
        return queries.arm_records(self._read(self.arm_rows, learner_id))

    def session_decisions(self, learner_id: int) -> SessionDecisions:
        """As SqlStore's (storage.session_sets): what the sessions did with their sets."""

        def read() -> SessionDecisions:
            totals = self.conn.execute(queries.SESSION_DECISIONS, (learner_id,)).fetchone()
            reasons = self.conn.execute(queries.SESSION_REDRAW_REASONS, (learner_id,)).fetchall()
            decided: SessionDecisions = queries.session_decisions(totals, reasons)
            return decided

        return self._read(read)

    def session_usage(self, learner_id: int, window: int | None = None) -> list[SessionUsage]:
        """As SqlStore's (storage.session_costs): the usage status prices its cost saving from."""
        from learning_bot.engine.savings import COST_WINDOW

        window = COST_WINDOW if window is None else window
        rows = self._read(
            lambda: self.conn.execute(
                queries.SESSION_USAGE, (learner_id, learner_id, window)
            ).fetchall()
        )
        return queries.session_usages(rows)

    def run_stats(self, learner_id: int) -> RunStats:
        return queries.run_stats(self._learner_read(self.run_stats_row, learner_id))

    def last_reset(self, learner_id: int) -> ResetRecord | None:
        def read(learner: int) -> tuple[Any, ...] | None:
            row: tuple[Any, ...] | None = self.conn.execute(
                queries.LAST_RESET, (learner,)
            ).fetchone()
            return row

        return queries.reset_record(self._read(read, learner_id))

    def saved_projection(self, learner_id: int) -> tuple[str, int] | None:
        """As SqlStore's (storage.learners): the projection kept at the switch to active."""

        def read(learner: int) -> tuple[Any, ...] | None:
            row: tuple[Any, ...] | None = self.conn.execute(
                "SELECT projection, projected_at FROM learners WHERE id = ?", (learner,)
            ).fetchone()
            return row

        row = self._read(read, learner_id)
        if row is None or row[0] is None:
            return None
        return str(row[0]), int(row[1] or 0)

    def inclusion_counts(self, learner_id: int, last: int) -> dict[str, tuple[int, int, int]]:
        return queries.inclusion_counts(self._read(self.inclusion_rows, learner_id, last))

    def _read(self, read: Callable[..., T], *args: Any) -> T:
        try:
            return read(*args)
        except sqlite3.Error as exc:
            from learning_bot.engine.errors import Unavailable

            raise Unavailable(f"storage is unavailable: {exc}") from None

    def _learner_read(self, read: Callable[[int], T | None], learner_id: int) -> T:
        """The learner's row `read` finds; NotFound when there is none."""
        row = self._read(read, learner_id)
        if row is None:
            raise _not_found(learner_id)
        return row

    def close(self) -> None:
        self.conn.close()
