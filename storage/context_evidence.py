"""The context-aware policy's per-feature evidence in the database (the ContextStore port):
the `context_evidence` table, bounded per learner.

Each observe that carried a request context writes the cells it changed as the process holds
them (rewards and runs as of the feature's run count `tick`; the row's other cells only decayed,
which their older tick accounts for on reading), one upsert per cell in sorted key order, with
the learner's run count in its own row. Every EVICT_EVERY saves the learner's cells are counted
and, past the bound, those with the lowest ticks (features seen in the fewest runs) are deleted:
a learner holds at most max_cells + EVICT_EVERY * (cells one observe writes) rows.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import and_, delete, func, select

from engine.context_policy import EvidenceCell
from storage.database import reading, with_retries, write_transaction
from storage.schema import context_evidence
from storage.store_base import StoreBase

EVICT_EVERY = 32
"""Saves between two counts of a learner's cells (per process)."""
TICK_FEATURE = 0
"""The feature of the row that holds the learner's observation count (arm_id "")."""


class ContextEvidenceStore(StoreBase):
    """The ContextStore port (a part of SqlStore)."""

    _evidence_saves = 0

    def context_evidence(self, learner_id: int) -> tuple[list[EvidenceCell], int]:
        """Every stored cell of the learner, and its observation count."""
        c = context_evidence.c
        with reading(self.engine) as conn:
            rows = conn.execute(
                select(c.feature, c.arm_id, c.rewards, c.runs, c.tick).where(
                    c.learner_id == learner_id
                )
            ).all()
        tick = 0
        cells = []
        for feature, arm_id, rewards, runs, at in rows:
            if feature == TICK_FEATURE and arm_id == "":
                tick = int(at)
            else:
                cells.append(
                    EvidenceCell(int(feature), arm_id, float(rewards), float(runs), int(at))
                )
        return cells, tick

    def save_context_evidence(
        self, learner_id: int, cells: Sequence[EvidenceCell], tick: int, max_cells: int
    ) -> None:
        """Write the given cells and the learner's count; evict past `max_cells` now and then."""
        rows = [
            {
                "learner_id": learner_id,
                "feature": cell.feature,
                "arm_id": cell.arm_id,
                "rewards": cell.rewards,
                "runs": cell.runs,
                "tick": cell.tick,
            }
            for cell in sorted(cells, key=lambda c: (c.feature, c.arm_id))
        ]
        rows.insert(
            0,
            {
                "learner_id": learner_id,
                "feature": TICK_FEATURE,
                "arm_id": "",
                "rewards": 0.0,
                "runs": 0.0,
                "tick": tick,
            },
        )
        stmt = self._insert(context_evidence)
        stmt = stmt.on_conflict_do_update(
            index_elements=["learner_id", "feature", "arm_id"],
            set_={
                "rewards": stmt.excluded.rewards,
                "runs": stmt.excluded.runs,
                "tick": stmt.excluded.tick,
            },
        )
        self._evidence_saves += 1
        evict = self._evidence_saves % EVICT_EVERY == 0
        c = context_evidence.c

        def run() -> None:
            with write_transaction(self.engine) as conn:
                conn.execute(stmt, rows)
                if not evict:
                    return
                mine = and_(c.learner_id == learner_id, c.feature != TICK_FEATURE)
                count = conn.execute(
                    select(func.count()).select_from(context_evidence).where(mine)
                ).scalar_one()
                excess = int(count) - max_cells
                if excess <= 0:
                    return
                cut = conn.execute(
                    select(c.tick).where(mine).order_by(c.tick).offset(excess).limit(1)
                ).scalar()
                if cut is not None:
                    conn.execute(delete(context_evidence).where(mine, c.tick < cut))

        with_retries(run)

    def context_evidence_rows(self, learner_id: int) -> int:
        """The learner's stored evidence cells (its observation count's row not counted)."""
        c = context_evidence.c
        with reading(self.engine) as conn:
            return int(
                conn.execute(
                    select(func.count())
                    .select_from(context_evidence)
                    .where(c.learner_id == learner_id, c.feature != TICK_FEATURE)
                ).scalar_one()
            )
