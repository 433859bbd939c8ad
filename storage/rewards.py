"""Rewards and half-life: manual (lagged) rewards applied with forgetting, and changing the
forgetting itself (which rebases every posterior)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, Insert, insert, select, update

from learning_bot.engine.errors import InvalidInput, NotFound
from learning_bot.engine.forgetting import keep_factor
from learning_bot.engine.store_records import RewardChange
from learning_bot.storage.database import with_retries, write_transaction
from learning_bot.storage.forgetting import add_reward, locked_half_life, locked_keep
from learning_bot.storage.schema import learners, observations, posteriors, traces
from learning_bot.storage.store_base import StoreBase


def observation(
    learner_id: int,
    arm_id: str,
    *,
    epoch: int | None,
    seq: int | None,
    reward: float,
    at: int,
    source: str,
    lagged: bool = False,
    actor: str | None = None,
    reason: str | None = None,
    trace_pk: int | None = None,
) -> Insert:
    """The INSERT of one row of an arm's reward history (`observations`): `source` "auto"
    (observed) or "manual" (a lagged reward, with its actor, reason and run)."""
    return insert(observations).values(
        learner_id=learner_id,
        arm_id=arm_id,
        epoch=epoch,
        reward=reward,
        source=source,
        lagged=lagged,
        actor=actor,
        reason=reason,
        trace_pk=trace_pk,
        created_at=at,
        seq=seq,
    )


class Rewards(StoreBase):
    """record_rewards and set_half_life of the Store port."""

    def record_rewards(
        self,
        learner_id: int,
        changes: Sequence[RewardChange],
        *,
        actor: str,
        reason: str | None,
        trace_id: str | None,
        at: int,
    ) -> int:
        """Apply manual (lagged) rewards atomically; every arm must already be known."""
        if not changes:
            raise InvalidInput("no rewards to record")
        ordered = sorted(changes, key=lambda c: c.arm_id)

        def run() -> int:
            with write_transaction(self.engine) as conn:
                trace_pk = None
                if trace_id is not None:
                    trace_pk = conn.execute(
                        select(traces.c.id).where(
                            traces.c.learner_id == learner_id, traces.c.trace_id == trace_id
                        )
                    ).scalar()
                keep = locked_keep(conn, learner_id)
                for change in ordered:
                    found = add_reward(
                        conn, learner_id, change.arm_id, change.reward, keep=keep, at=at
                    )
                    if found is None:
                        raise NotFound(f"unknown arm {change.arm_id!r}")
                    epoch, seq = found.epoch, found.pulls
                    conn.execute(
                        observation(
                            learner_id,
                            change.arm_id,
                            epoch=epoch,
                            seq=seq,
                            reward=change.reward,
                            at=at,
                            source="manual",
                            lagged=True,
                            actor=actor,
                            reason=reason,
                            trace_pk=trace_pk,
                        )
                    )
                self._bump(conn, learner_id, len(ordered))
                return len(ordered)

        return with_retries(run)

    def set_half_life(self, learner_id: int, half_life: float, *, at: int) -> None:
        """Make `half_life` the learner's forgetting. A change rebases every posterior (its
        base becomes its current value, in a new epoch), so `verify` replays each arm's later
        changes with the new factor from there; resets and undo work as before."""
        keep_factor(half_life)  # validates

        def run() -> None:
            with write_transaction(self.engine) as conn:
                self._rebase_half_life(conn, learner_id, half_life)

        with_retries(run)

    def set_settings(
        self, learner_id: int, settings: Mapping[str, Any], half_life: float, *, at: int
    ) -> None:
        """Store the learner's learning options and its half-life together (a new half-life
        rebases its posteriors as `set_half_life` does)."""
        keep_factor(half_life)  # validates
        stored = json.dumps(dict(settings), sort_keys=True, separators=(",", ":"), allow_nan=False)

        def run() -> None:
            with write_transaction(self.engine) as conn:
                self._rebase_half_life(conn, learner_id, half_life)
                conn.execute(
                    update(learners).where(learners.c.id == learner_id).values(settings=stored)
                )
                self._bump(conn, learner_id, 1)

        with_retries(run)

    def _rebase_half_life(self, conn: Connection, learner_id: int, half_life: float) -> None:
        if locked_half_life(conn, learner_id) == float(half_life):
            return
        p = posteriors.c
        arms = conn.execute(
            select(p.arm_id)
            .where(p.learner_id == learner_id)
            .order_by(self._lock_order(p.arm_id))
            .with_for_update()
        ).all()
        conn.execute(
            update(learners).where(learners.c.id == learner_id).values(half_life=float(half_life))
        )
        conn.execute(
            update(posteriors)
            .where(p.learner_id == learner_id)
            .values(
                prior_alpha=p.alpha,
                prior_beta=p.beta,
                prior_pulls=p.pulls,
                prior_rewards=p.rewards,
                epoch=p.epoch + 1,
            )
        )
        self._bump(conn, learner_id, max(1, len(arms)))
