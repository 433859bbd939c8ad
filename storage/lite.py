"""LiteReader: the read side of the Store port on a SQLite file through the standard library,
for one-shot commands (`learning-bot status`) that should not pay SQLAlchemy's import.

It runs the same SQL as SqlStore (storage.queries) and never writes; anything else goes through
SqlStore."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from engine.config import Phase
from engine.errors import NotFound, Unavailable
from engine.ports import ArmRecord, LearnerState, ResetRecord, RunStats
from storage import queries
from storage.revision import HEAD_REVISION


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

    def _one(self, sql: str, *params: object) -> tuple[Any, ...] | None:
        try:
            row: tuple[Any, ...] | None = self.conn.execute(sql, params).fetchone()
            return row
        except sqlite3.Error as exc:
            raise Unavailable(f"storage is unavailable: {exc}") from None

    def open_learner(self, name: str, initial_phase: Phase) -> LearnerState:
        row = self._one(queries.LEARNER_BY_NAME, name)
        if row is None:
            raise NotReadable(f"no learner named {name!r} yet")
        return self.learner_state(int(row[0]))

    def learner_state(self, learner_id: int) -> LearnerState:
        row = self._one(queries.LEARNER_STATE, learner_id)
        if row is None:
            raise NotFound(f"no learner with id {learner_id}")
        return queries.learner_state(row)

    def load_arms(self, learner_id: int) -> dict[str, ArmRecord]:
        try:
            rows = self.conn.execute(queries.ARMS, (learner_id,)).fetchall()
        except sqlite3.Error as exc:
            raise Unavailable(f"storage is unavailable: {exc}") from None
        return queries.arm_records(rows)

    def run_stats(self, learner_id: int) -> RunStats:
        row = self._one(queries.RUN_STATS, learner_id)
        if row is None:
            raise NotFound(f"no learner with id {learner_id}")
        return queries.run_stats(row)

    def last_reset(self, learner_id: int) -> ResetRecord | None:
        return queries.reset_record(self._one(queries.LAST_RESET, learner_id))

    def close(self) -> None:
        self.conn.close()
