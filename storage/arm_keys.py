"""Arm keys: each arm's posterior row made on first sight (at its type's prior, with the next
free arm key), and what this process remembers of them so the hot path can skip the check."""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy import Connection, func, select

from learning_bot.engine.arms import parse_arm_id
from learning_bot.engine.ports import ArmRecord
from learning_bot.engine.posterior import now_ms, prior_parameters
from learning_bot.storage import queries
from learning_bot.storage.database import reading
from learning_bot.storage.schema import learners, posteriors
from learning_bot.storage.store_base import StoreBase


class ArmKeys(StoreBase):
    """Arms, their keys and posteriors: loaded, created when new, remembered per process."""

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

    def _remember(
        self, learner_id: int, arms: Mapping[str, tuple[str, int]], keys: Mapping[str, int]
    ) -> None:
        if arms:
            with self._lock:
                self._known.setdefault(learner_id, {}).update(arms)
                self._keys.setdefault(learner_id, {}).update(keys)

    def _forget_arms(self, learner_id: int) -> None:
        """Drop what this process knows of the learner's arms (a row it knew is gone)."""
        with self._lock:
            self._known.pop(learner_id, None)
            self._keys.pop(learner_id, None)
