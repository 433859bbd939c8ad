"""Resets and their undo: arms returned to Beta(1, 1) with a snapshot of what they held, and
the snapshot restored (keeping what was learnt since). A reset clears the arms' context
evidence and deferral counts too, kept for the undo of the last reset
(storage.context_evidence)."""

from __future__ import annotations

import json
from collections.abc import Sequence

from sqlalchemy import Connection, bindparam, func, insert, select, update

from learning_bot.engine.errors import Conflict, InvalidInput, NotFound
from learning_bot.engine.store_records import ResetRecord
from learning_bot.storage import queries
from learning_bot.storage.context_evidence import clear_evidence, restore_evidence
from learning_bot.storage.database import reading, with_retries, write_transaction
from learning_bot.storage.schema import learners, posteriors, resets, traces
from learning_bot.storage.schema import reset_snapshots as snapshots
from learning_bot.storage.store_base import StoreBase


class Resets(StoreBase):
    """reset, undo_reset and last_reset of the Store port."""

    def reset(
        self, learner_id: int, arm_ids: Sequence[str] | None, *, actor: str, at: int
    ) -> ResetRecord:
        wanted = None if arm_ids is None else sorted(set(arm_ids))
        if wanted is not None and not wanted:
            raise InvalidInput("no arms to reset")

        def run() -> ResetRecord:
            with write_transaction(self.engine) as conn:
                return self._reset(conn, learner_id, wanted, actor, at)

        return with_retries(run)

    def _reset(
        self, conn: Connection, learner_id: int, wanted: list[str] | None, actor: str, at: int
    ) -> ResetRecord:
        p = posteriors.c
        learner = conn.execute(
            select(learners.c.stats_epoch, learners.c.status_from_epoch)
            .where(learners.c.id == learner_id)
            .with_for_update()
        ).one()
        query = select(posteriors).where(p.learner_id == learner_id)
        if wanted is not None:
            query = query.where(p.arm_id.in_(wanted))
        rows = conn.execute(query.order_by(self._lock_order(p.arm_id)).with_for_update()).all()
        if wanted is not None:
            found = {r.arm_id for r in rows}
            unknown = [a for a in wanted if a not in found]
            if unknown:
                raise NotFound(f"unknown arm(s): {', '.join(unknown[:10])}; nothing was reset")
        all_arms = wanted is None
        last_trace = conn.execute(
            select(func.coalesce(func.max(traces.c.id), 0)).where(traces.c.learner_id == learner_id)
        ).scalar_one()
        reset_id = conn.execute(
            insert(resets)
            .values(
                learner_id=learner_id,
                all_arms=all_arms,
                arm_ids=json.dumps([r.arm_id for r in rows]),
                actor=actor,
                created_at=at,
                previous_status_from_epoch=learner.status_from_epoch,
            )
            .returning(resets.c.id)
        ).scalar_one()
        if rows:
            conn.execute(
                insert(snapshots),
                [
                    {
                        "reset_id": reset_id,
                        "arm_id": r.arm_id,
                        "alpha": r.alpha,
                        "beta": r.beta,
                        "pulls": r.pulls,
                        "last_updated": r.last_updated,
                        "prior_alpha": r.prior_alpha,
                        "prior_beta": r.prior_beta,
                        "prior_pulls": r.prior_pulls,
                        "epoch": r.epoch,
                        "reset_trace_pk": r.reset_trace_pk,
                        "rewards": r.rewards,
                        "prior_rewards": r.prior_rewards,
                    }
                    for r in rows
                ],
            )
            stmt = update(posteriors).where(p.learner_id == learner_id)
            if wanted is not None:
                stmt = stmt.where(p.arm_id.in_(wanted))
            conn.execute(
                stmt.values(
                    alpha=1.0,
                    beta=1.0,
                    pulls=0,
                    last_updated=None,
                    prior_alpha=1.0,
                    prior_beta=1.0,
                    prior_pulls=0,
                    rewards=0.0,
                    prior_rewards=0.0,
                    epoch=p.epoch + 1,
                    reset_trace_pk=last_trace,
                )
            )
        # the arms' context evidence and deferral counts go too (kept for the undo)
        clear_evidence(conn, self._insert, learner_id, wanted, int(reset_id))
        if all_arms:
            conn.execute(
                update(learners)
                .where(learners.c.id == learner_id)
                .values(
                    stats_epoch=learners.c.stats_epoch + 1,
                    status_from_epoch=learners.c.stats_epoch + 1,
                )
            )
        self._bump(conn, learner_id, max(1, len(rows)))
        return ResetRecord(int(reset_id), tuple(r.arm_id for r in rows), all_arms, actor, at)

    def last_reset(self, learner_id: int) -> ResetRecord | None:
        with reading(self.engine) as conn:
            row = conn.exec_driver_sql(self._sql(queries.LAST_RESET), (learner_id,)).first()
        return queries.reset_record(row)

    def undo_reset(self, learner_id: int, *, actor: str, at: int) -> ResetRecord:
        def run() -> ResetRecord:
            with write_transaction(self.engine) as conn:
                return self._undo(conn, learner_id, actor, at)

        return with_retries(run)

    def _undo(self, conn: Connection, learner_id: int, actor: str, at: int) -> ResetRecord:
        conn.execute(
            select(learners.c.id).where(learners.c.id == learner_id).with_for_update()
        ).one()
        row = conn.execute(
            select(resets)
            .where(resets.c.learner_id == learner_id, resets.c.undone_at.is_(None))
            .order_by(resets.c.id.desc())
            .limit(1)
        ).first()
        if row is None:
            raise Conflict("there is no reset to undo")
        p = posteriors.c
        snaps = conn.execute(
            select(snapshots).where(snapshots.c.reset_id == row.id).order_by(snapshots.c.arm_id)
        ).all()
        arm_ids = [s.arm_id for s in snaps]
        if arm_ids:
            conn.execute(
                select(p.arm_id)
                .where(p.learner_id == learner_id, p.arm_id.in_(arm_ids))
                .order_by(self._lock_order(p.arm_id))
                .with_for_update()
            ).all()
        current = {
            r.arm_id: r
            for r in conn.execute(
                select(posteriors).where(p.learner_id == learner_id, p.arm_id.in_(arm_ids))
            )
        }
        changes = []
        for snap in snaps:
            # Since the reset (and any later, undone ones) the arm is Beta(1, 1) plus what it
            # learnt; keep that learning on top of the state the reset replaced.
            now = current[snap.arm_id]
            alpha = snap.alpha + (now.alpha - 1.0)
            beta = snap.beta + (now.beta - 1.0)
            pulls = snap.pulls + now.pulls
            rewards = snap.rewards + now.rewards
            changes.append(
                {
                    "b_arm": snap.arm_id,
                    "b_alpha": alpha,
                    "b_beta": beta,
                    "b_pulls": pulls,
                    "b_rewards": rewards,
                    "b_updated": now.last_updated or snap.last_updated,
                    "b_trace": snap.reset_trace_pk,
                }
            )
        if changes:  # one statement for every arm (executemany), not one round trip each
            conn.execute(
                update(posteriors)
                .where(p.learner_id == learner_id, p.arm_id == bindparam("b_arm"))
                .values(
                    alpha=bindparam("b_alpha"),
                    beta=bindparam("b_beta"),
                    pulls=bindparam("b_pulls"),
                    last_updated=bindparam("b_updated"),
                    prior_alpha=bindparam("b_alpha"),
                    prior_beta=bindparam("b_beta"),
                    prior_pulls=bindparam("b_pulls"),
                    rewards=bindparam("b_rewards"),
                    prior_rewards=bindparam("b_rewards"),
                    epoch=p.epoch + 1,
                    reset_trace_pk=bindparam("b_trace"),
                ),
                changes,
            )
        conn.execute(
            update(resets).where(resets.c.id == row.id).values(undone_at=at, undone_by=actor)
        )
        restore_evidence(conn, self._insert, learner_id, int(row.id))
        if row.all_arms:
            conn.execute(
                update(learners)
                .where(learners.c.id == learner_id)
                .values(status_from_epoch=row.previous_status_from_epoch)
            )
        self._bump(conn, learner_id, max(1, len(snaps)))
        return ResetRecord(int(row.id), tuple(arm_ids), bool(row.all_arms), actor, at, True)
