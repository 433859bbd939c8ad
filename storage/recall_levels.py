"""The recall target's calibration (the RecallLevels port, engine.recall_levels): the
`recall_levels` table, the uses a learner's baseline sessions recorded, appended by every
replica in the order they are stored and bounded per learner."""

from __future__ import annotations

import math
from collections.abc import Sequence

from sqlalchemy import delete, select

from learning_bot.storage.database import reading, with_retries, write_transaction
from learning_bot.storage.schema import recall_levels
from learning_bot.storage.store_base import StoreBase

MAX_KEY_CHARS = 256
"""The session key column's width: a longer key is cut (it only tells sessions apart)."""


def _stored(level: float) -> float | None:
    """A level as its column holds it: NULL for a level no set reaches (math.inf)."""
    value = float(level)
    if math.isnan(value):
        raise ValueError("a recall level is a number or math.inf, not NaN")
    return None if math.isinf(value) else value


def _read(value: float | None) -> float:
    return math.inf if value is None else float(value)


class RecallLevelsStore(StoreBase):
    """The RecallLevels port (a part of SqlStore)."""

    def add_recall_levels(
        self, learner_id: int, uses: Sequence[tuple[float, float, str]], *, at: int, keep: int
    ) -> None:
        """Append `uses` (oldest first) at `at` (ms); the learner's uses older than its latest
        `keep` are deleted in the same write."""
        rows = [
            {
                "learner_id": learner_id,
                "level": _stored(level),
                "own": _stored(own),
                "session_key": session[:MAX_KEY_CHARS],
                "created_at": int(at),
            }
            for level, own, session in uses
        ]
        if not rows:
            return
        c = recall_levels.c
        mine = c.learner_id == learner_id

        def run() -> None:
            with write_transaction(self.engine) as conn:
                conn.execute(recall_levels.insert(), rows)
                oldest_kept = conn.execute(
                    select(c.id).where(mine).order_by(c.id.desc()).offset(max(0, keep - 1)).limit(1)
                ).scalar()
                if oldest_kept is not None:
                    conn.execute(delete(recall_levels).where(mine, c.id < oldest_kept))

        with_retries(run)

    def recall_levels(self, learner_id: int, last: int) -> list[tuple[float, float, str]]:
        """The learner's latest `last` uses, oldest first."""
        if last <= 0:
            return []
        c = recall_levels.c
        with reading(self.engine) as conn:
            rows = conn.execute(
                select(c.level, c.own, c.session_key)
                .where(c.learner_id == learner_id)
                .order_by(c.id.desc())
                .limit(last)
            ).all()
        return [(_read(level), _read(own), str(key)) for level, own, key in reversed(rows)]
