"""Gateway sessions (engine.ports.RunSessions): runs recorded at selection time and completed
arm by arm afterwards, seed priors, and a conversation's runs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, select, true, update

from learning_bot.engine.arms import parse_arm_id
from learning_bot.engine.config import Phase
from learning_bot.engine.errors import NotFound
from learning_bot.engine.ports import LearnerChanged
from learning_bot.engine.posterior import Posterior
from learning_bot.engine.records import RunRecord
from learning_bot.engine.store_records import ArmOutcome
from learning_bot.storage.arm_keys import ArmKeys
from learning_bot.storage.command_log import claim_key
from learning_bot.storage.database import reading, with_retries, write_transaction
from learning_bot.storage.forgetting import add_reward, locked_keep
from learning_bot.storage.reads import traces_with_arms
from learning_bot.storage.rewards import observation
from learning_bot.storage.schema import (
    learners,
    posteriors,
    trace_arms,
    traces,
)


class Sessions(ArmKeys):
    """The RunSessions port on SQL."""

    def record_arm_outcome(
        self,
        learner_id: int,
        arm_id: str,
        reward: float,
        *,
        referenced: bool,
        conversation: str | None,
        apply_reward: bool,
        at: int,
        once: str | None = None,
        phase: Phase | None = None,
        loaded: bool = False,
    ) -> ArmOutcome:
        """One arm's outcome, in one transaction: marked on the latest run of `conversation`
        that offered the arm and holds no outcome for it yet (referenced, and the reward with
        `apply_reward`), and, with `apply_reward`, added to the posterior at once. Without such
        a run the change is kept as an automatic observation of its own. An arm never seen
        before gets its posterior row (at its type's prior) first. With `once` (a spooled
        outcome's key), an outcome whose key was recorded before changes nothing. With `phase`
        (the phase `apply_reward` was decided under), a learner whose phase is another by now
        (changed on another replica) gets nothing written: LearnerChanged names its phase.
        With `loaded` (the arm was left out of the run, and the model loaded it through tool
        search), the run may have left the arm out, and marks it included now."""
        parsed = parse_arm_id(arm_id)
        p = posteriors.c
        t = traces.c
        a = trace_arms.c

        def run() -> tuple[ArmOutcome, dict[str, tuple[str, int]], dict[str, int]]:
            with write_transaction(self.engine) as conn:
                remembered: dict[str, tuple[str, int]] = {}
                keys: dict[str, int] = {}
                # Locks first, reads after (each statement on PostgreSQL reads what committed
                # before it): the learner row, as reset, undo and every reward take it first,
                # then the arm's posterior row. The epoch and the open run read below are then
                # those the change lands in, whatever committed while this call waited: two
                # outcomes for the same run and arm, or a reset or undo in between, cannot
                # both see a run still open or the epoch before the reset.
                if phase is not None:
                    stored = conn.execute(
                        select(learners.c.phase)
                        .where(learners.c.id == learner_id)
                        .with_for_update()
                    ).scalar()
                    if stored is None:
                        raise NotFound(f"no learner with id {learner_id}")
                    if stored != phase.value:
                        raise LearnerChanged(Phase(stored))
                keep = locked_keep(conn, learner_id) if apply_reward else 1.0
                locked = (
                    select(p.arm_key, p.epoch)
                    .where(p.learner_id == learner_id, p.arm_id == arm_id)
                    .with_for_update()
                )
                row = conn.execute(locked).first()
                if once is not None and not claim_key(conn, self._insert, once, at):
                    return self._recorded_before(conn, learner_id, arm_id), {}, {}
                if row is None:
                    remembered, keys = self._ensure_arms(
                        conn, learner_id, {arm_id: (parsed.name, 0)}
                    )
                    row = conn.execute(locked).one()
                arm_key = int(row.arm_key)
                trace_pk: int | None = None
                trace_id: str | None = None
                if conversation:
                    found = conn.execute(
                        select(t.id, t.trace_id)
                        .select_from(traces.join(trace_arms, a.trace_pk == t.id))
                        .where(
                            t.learner_id == learner_id,
                            t.conversation == conversation,
                            a.arm_key == arm_key,
                            true() if loaded else a.included == True,  # noqa: E712
                            a.reward.is_(None),
                            a.referenced == False,  # noqa: E712
                        )
                        .order_by(t.timestamp.desc(), t.id.desc())
                        .limit(1)
                    ).first()
                    if found is not None:
                        trace_pk, trace_id = int(found.id), str(found.trace_id)
                # The posterior first (forgetting as the learner's other writes do): its pull
                # count after the change orders the change for `verify`'s replay (seq), and
                # the epoch it returns is the one the change belongs to.
                if apply_reward:
                    self._bump(conn, learner_id, 1)
                    changed = add_reward(conn, learner_id, arm_id, reward, keep=keep, at=at)
                    if changed is None:
                        raise NotFound(f"unknown arm {arm_id!r}")
                    state: Any = changed
                    epoch: int | None = int(state.epoch)
                else:
                    state = conn.execute(
                        select(p.alpha, p.beta, p.pulls, p.last_updated).where(
                            p.learner_id == learner_id, p.arm_id == arm_id
                        )
                    ).one()
                    epoch = None
                seq = int(state.pulls) if apply_reward else None
                if trace_pk is not None:
                    conn.execute(
                        update(trace_arms)
                        .where(a.trace_pk == trace_pk, a.arm_key == arm_key)
                        .values(
                            **({"included": True} if loaded else {}),
                            referenced=referenced,
                            reward=reward if apply_reward else None,
                            epoch=epoch,
                            seq=seq,
                        )
                    )
                    conn.execute(update(traces).where(t.id == trace_pk).values(guard=None))
                elif apply_reward:
                    conn.execute(
                        observation(
                            learner_id,
                            arm_id,
                            epoch=epoch,
                            seq=seq,
                            reward=reward,
                            at=at,
                            source="auto",
                        )
                    )
                posterior = Posterior.trusted(
                    float(state.alpha), float(state.beta), int(state.pulls), state.last_updated
                )
                outcome = ArmOutcome(arm_id, posterior, trace_id, apply_reward)
                return outcome, remembered, keys

        outcome, remembered, keys = with_retries(run)
        self._remember(learner_id, remembered, keys)
        return outcome

    @staticmethod
    def _recorded_before(conn: Connection, learner_id: int, arm_id: str) -> ArmOutcome:
        p = posteriors.c
        row = conn.execute(
            select(p.alpha, p.beta, p.pulls, p.last_updated).where(
                p.learner_id == learner_id, p.arm_id == arm_id
            )
        ).one()
        posterior = Posterior.trusted(
            float(row.alpha), float(row.beta), int(row.pulls), row.last_updated
        )
        return ArmOutcome(arm_id, posterior, None, False)

    def boost_priors(self, learner_id: int, arm_ids: Sequence[str], alpha: float) -> int:
        """Start these arms at Beta(alpha, 1) (the seedBoost option): their prior becomes it and
        their posterior moves by the same amount, so whatever they have learnt is kept and
        `verify` still holds. Only arms never reset are touched; a second call with the same
        alpha changes nothing. Returns how many rows were changed."""
        if not arm_ids:
            return 0
        p = posteriors.c

        def run() -> int:
            with write_transaction(self.engine) as conn:
                result = conn.execute(
                    update(posteriors)
                    .where(
                        p.learner_id == learner_id,
                        p.arm_id.in_(sorted(set(arm_ids))),
                        p.epoch == 0,
                        p.prior_alpha != alpha,
                    )
                    .values(alpha=p.alpha + (alpha - p.prior_alpha), prior_alpha=alpha)
                )
                changed = int(result.rowcount or 0)
                if changed:
                    self._bump(conn, learner_id, changed)
                return changed

        return with_retries(run)

    def conversation_runs(self, learner_id: int, conversation: str, since: int) -> list[RunRecord]:
        """The runs recorded in `conversation` from `since` (ms) on, oldest first."""
        t = traces.c
        with reading(self.engine) as conn:
            rows = conn.execute(
                select(traces)
                .where(
                    t.learner_id == learner_id,
                    t.conversation == conversation,
                    t.timestamp >= since,
                )
                .order_by(t.timestamp, t.id)
                .limit(1000)
            ).all()
            return traces_with_arms(conn, rows)
