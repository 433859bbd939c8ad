"""What the exploration bound (engine.exploration) reads of the stored runs: per arm, how many
of the learner's latest active-phase runs came after its last inclusion."""

from __future__ import annotations

from bisect import bisect_left, bisect_right

from sqlalchemy import and_, case, func, select

from learning_bot.storage.database import reading
from learning_bot.storage.schema import posteriors, trace_arms, traces
from learning_bot.storage.store_base import StoreBase


class ExplorationStore(StoreBase):
    """The LeftOutRuns port (a part of SqlStore)."""

    def left_out_runs(self, learner_id: int, window: int) -> dict[str, int]:
        """Per arm offered in the learner's latest `window` active-phase runs (every replica's),
        how many of those runs came after the last one that included it; for an arm none of
        them included, how many came from its first appearance on. Two reads: the runs' ids,
        then one row per arm (the outcomes of those runs, grouped in the database)."""
        if window <= 0:
            return {}
        t, ta, p = traces.c, trace_arms.c, posteriors.c
        with reading(self.engine) as conn:
            ids = sorted(
                conn.execute(
                    select(t.id)
                    .where(t.learner_id == learner_id, t.phase == "active")
                    .order_by(t.id.desc())
                    .limit(window)
                ).scalars()
            )
            if not ids:
                return {}
            rows = conn.execute(
                select(
                    p.arm_id,
                    func.max(case((ta.included, ta.trace_pk))),
                    func.min(ta.trace_pk),
                )
                .select_from(
                    trace_arms.join(traces, t.id == ta.trace_pk).join(
                        posteriors, and_(p.learner_id == t.learner_id, p.arm_key == ta.arm_key)
                    )
                )
                .where(t.learner_id == learner_id, t.phase == "active", ta.trace_pk >= ids[0])
                .group_by(p.arm_id)
            ).all()
        n = len(ids)
        out = {}
        for arm_id, last, first in rows:
            if last is not None:
                out[arm_id] = n - bisect_right(ids, int(last))
            else:
                out[arm_id] = n - bisect_left(ids, int(first))
        return out
