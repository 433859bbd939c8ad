"""StoreBase: what every part of SqlStore works on (the engine and its dialect, what this
process remembers of learners and arms) and the small steps they share."""

from __future__ import annotations

import threading
from typing import Any

from sqlalchemy import Connection, Engine

from learning_bot.storage import queries
from learning_bot.storage.database import ensure_schema, ensure_schema_later, make_engine
from learning_bot.storage.hotpath import HotPath, stats_params
from learning_bot.storage.location import default_database_url
from learning_bot.storage.pooling import PoolSettings, pool_settings


class StoreBase:
    """The engine, the dialect's SQL, and the per-process memory the parts of SqlStore share;
    each part (learners, arm keys, runs, rewards, sessions, resets, bootstrap, reads, verify)
    is a mixin on it, composed by storage.store.SqlStore."""

    def __init__(
        self,
        url: str | None = None,
        *,
        auto_create: bool = True,
        pool: PoolSettings | None = None,
        upgrade_sqlite: bool = False,
        wait_for_storage: bool = True,
    ) -> None:
        """`upgrade_sqlite`: an outdated SQLite file is backed up and upgraded rather than
        refused (the serving commands; one-shot commands ask for `learning-bot db upgrade`).
        `pool`: PostgreSQL pool sizes and pooler (default: from LEARNING_BOT_DB_* variables).
        `wait_for_storage`: storage that does not answer yet leaves the schema check for its
        first use (a server starts anyway); else it is Unavailable here (a one-shot command
        fails at once, in one line)."""
        self.url = url or default_database_url()
        self._pool = pool or pool_settings()
        self.engine: Engine = make_engine(self.url, pool=self._pool)
        self.dialect = self.engine.dialect.name
        if wait_for_storage:
            ensure_schema_later(self.engine, auto_create=auto_create, upgrade_sqlite=upgrade_sqlite)
        else:
            try:
                ensure_schema(self.engine, auto_create=auto_create, upgrade_sqlite=upgrade_sqlite)
            except BaseException:
                self.engine.dispose()
                raise
        self._insert: Any
        if self.dialect == "postgresql":
            from sqlalchemy.dialects.postgresql import insert as pg_insert

            self._insert = pg_insert
        else:
            from sqlalchemy.dialects.sqlite import insert as sqlite_insert

            self._insert = sqlite_insert
        self._known: dict[int, dict[str, tuple[str, int]]] = {}
        """Per learner, arm id -> (label, token cost) as this process last wrote or read them."""
        self._keys: dict[int, dict[str, int]] = {}
        """Per learner, arm id -> arm key (storage.arm_keys)."""
        self._lock = threading.Lock()
        self._hot = HotPath(self.dialect)
        self._half_lives: dict[int, float] = {}
        """Per learner, the half-life the last write found: what runs are folded with."""
        self._names: dict[int, str] = {}
        """Learner id -> name, as this process opened or read them (spool lines name learners)."""
        self._direct: tuple[Engine, Engine] | None = None
        """(the engine it serves, autocommit engine to its database) for PostgreSQL writes."""

    def _sql(self, text: str) -> str:
        """A storage.queries text for this dialect."""
        return queries.for_postgres(text) if self.dialect == "postgresql" else text

    def _lock_order(self, column: Any) -> Any:
        """`column` to ORDER BY when locking rows: by code point everywhere (PostgreSQL's
        database collation may order ids differently from Python's `sorted`, which orders the
        upserts), so every transaction takes row locks in the same order."""
        return column.collate("C") if self.dialect == "postgresql" else column

    def _bump(self, conn: Connection, learner_id: int, changes: int) -> None:
        """Count `changes` posterior changes in the learner's counters (its version grows)."""
        conn.exec_driver_sql(self._hot.stats_add, stats_params(learner_id, [], changes))
