"""Learners: opened (or created) by name, listed, and their state read."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from sqlalchemy import Connection, select, update

from learning_bot.engine.config import Phase
from learning_bot.engine.errors import InvalidInput, NotFound
from learning_bot.engine.ports import LearnerState
from learning_bot.engine.posterior import now_ms
from learning_bot.storage import queries
from learning_bot.storage.database import reading, with_retries, write_transaction
from learning_bot.storage.schema import learners
from learning_bot.storage.store_base import StoreBase


class Learners(StoreBase):
    """The learner rows: open by name, list, read state."""

    def open_learner(
        self,
        name: str,
        initial_phase: Phase,
        settings: Mapping[str, Any] | None = None,
        half_life: float = 0.0,
    ) -> LearnerState:
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
                    half_life=float(half_life),
                    settings=None if settings is None else _settings_json(settings),
                )
                conn.execute(stmt.on_conflict_do_nothing(index_elements=["name"]))

        with reading(self.engine) as conn:
            row = conn.execute(select(learners.c.id).where(learners.c.name == name)).first()
        if row is None:
            with_retries(run)
            with reading(self.engine) as conn:
                row = conn.execute(select(learners.c.id).where(learners.c.name == name)).one()
        return self.learner_state(int(row.id))

    def save_projection(self, learner_id: int, projection: str, *, at: int) -> None:
        """Keep the projection shown at the learner's switch to active (engine.ports'
        ProjectionStore), replacing the one kept before."""

        def run() -> None:
            with write_transaction(self.engine) as conn:
                conn.execute(
                    update(learners)
                    .where(learners.c.id == learner_id)
                    .values(projection=projection, projected_at=at)
                )

        with_retries(run)

    def saved_projection(self, learner_id: int) -> tuple[str, int] | None:
        c = learners.c
        with reading(self.engine) as conn:
            row = conn.execute(
                select(c.projection, c.projected_at).where(c.id == learner_id)
            ).first()
        if row is None or row[0] is None:
            return None
        return str(row[0]), int(row[1] or 0)

    def learner_names(self) -> list[str]:
        """Every learner's name, sorted."""
        with reading(self.engine) as conn:
            return [r[0] for r in conn.execute(select(learners.c.name).order_by(learners.c.name))]

    def learner_name(self, learner_id: int) -> str | None:
        """The name of a learner this process has opened or read (no query: the spool asks
        while storage is down), or None."""
        return self._names.get(learner_id)

    def learner_state(self, learner_id: int) -> LearnerState:
        with reading(self.engine) as conn:
            return self._state(conn, learner_id)

    def _state(self, conn: Connection, learner_id: int) -> LearnerState:
        row = conn.exec_driver_sql(self._sql(queries.LEARNER_STATE), (learner_id,)).first()
        if row is None:
            raise NotFound(f"no learner with id {learner_id}")
        state = queries.learner_state(row)
        self._names[learner_id] = state.name
        # what PostgreSQL's observe statement folds with first (it checks it, and a stale
        # value costs one more attempt, not a wrong write)
        self._half_lives[learner_id] = state.half_life
        return state


def _settings_json(settings: Mapping[str, Any]) -> str:
    """A learner's settings as stored: compact JSON with sorted keys."""
    return json.dumps(dict(settings), sort_keys=True, separators=(",", ":"), allow_nan=False)
