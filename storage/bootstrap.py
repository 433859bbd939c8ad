"""Phase changes, and the bootstrap that folds the runs recorded while passive into the
posteriors when a learner goes active."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, select, text, update

from learning_bot.engine.config import Phase
from learning_bot.engine.forgetting import fold, forget
from learning_bot.engine.store_records import PhaseChangeRecord
from learning_bot.storage.database import with_retries, write_transaction
from learning_bot.storage.forgetting import forgets_toward, locked_keep
from learning_bot.storage.schema import learners, posteriors, traces
from learning_bot.storage.store_base import StoreBase

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


class Bootstrap(StoreBase):
    """set_phase of the Store port, with its bootstrap."""

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
        n_obs = conn.execute(text(_BOOTSTRAP_REWARDS), params).rowcount or 0
        # The runs whose arms were folded: a run recorded before an arm's reset gives that arm
        # nothing, so a run before a full reset is marked as bootstrapped but not counted.
        n_traces = conn.execute(
            text(
                "SELECT COUNT(DISTINCT ta.trace_pk) FROM trace_arms ta "
                "WHERE ta.reward IS NOT NULL AND ta.trace_pk IN (" + _BOOTSTRAP_TRACES + ")"
            ),
            params,
        ).scalar_one()
        keep = locked_keep(conn, learner_id)
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
            pa, pb = forgets_toward(arm)
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
