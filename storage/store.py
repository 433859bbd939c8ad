"""SqlStore: the engine's Store port on SQLAlchemy 2.x, for SQLite and PostgreSQL.

Every write is one transaction. Posterior changes are atomic `SET alpha = alpha + ...`
statements over rows touched in sorted arm order, so concurrent writers never lose an update
and PostgreSQL never deadlocks on them; a trace, its arm outcomes, its observations, its
counters and its posterior changes commit together or not at all.

Each concept is a module of its own, a mixin on storage.store_base.StoreBase; SqlStore
composes them. They share one engine and one per-process memory of learners and arms, so a
call goes straight to the method that does the work (the observe path has no extra hop), and
replacing `engine` (as a test of a database gone mid-life does) reaches every part at once.
"""

from __future__ import annotations

from sqlalchemy import delete, select

from learning_bot.storage.arm_keys import ArmKeys
from learning_bot.storage.bootstrap import Bootstrap
from learning_bot.storage.context_evidence import ContextEvidenceStore
from learning_bot.storage.context_words import ContextWordsStore
from learning_bot.storage.database import write_transaction
from learning_bot.storage.exploration import ExplorationStore
from learning_bot.storage.learners import Learners
from learning_bot.storage.reads import Reads
from learning_bot.storage.recall_levels import RecallLevelsStore
from learning_bot.storage.resets import Resets
from learning_bot.storage.rewards import Rewards
from learning_bot.storage.runs import Runs
from learning_bot.storage.schema import (
    audit_log,
    context_evidence,
    context_words,
    observations,
    posteriors,
    recall_levels,
    run_stats,
    session_sets,
    trace_arms,
    traces,
)
from learning_bot.storage.session_costs import SessionCosts
from learning_bot.storage.session_sets import SessionSetStore
from learning_bot.storage.sessions import Sessions
from learning_bot.storage.verify import Verify


class SqlStore(
    Learners,
    Runs,
    Rewards,
    Sessions,
    SessionSetStore,
    ContextEvidenceStore,
    ContextWordsStore,
    RecallLevelsStore,
    ExplorationStore,
    SessionCosts,
    Resets,
    Bootstrap,
    Verify,
    Reads,
    ArmKeys,
):
    """The Store, RunSessions and SessionSets ports on a SQLAlchemy engine (SQLite file by default,
    PostgreSQL at scale)."""

    def delete_learner_data(self, learner_id: int) -> None:
        """Remove every trace, observation and posterior of a learner (used by tests/tools)."""
        with write_transaction(self.engine) as conn:
            for table in (
                observations,
                run_stats,
                posteriors,
                audit_log,
                session_sets,
                context_evidence,
                context_words,
                recall_levels,
            ):
                conn.execute(delete(table).where(table.c.learner_id == learner_id))
            # Outcomes first: no key ties them to their trace (migration 0008).
            conn.execute(
                delete(trace_arms).where(
                    trace_arms.c.trace_pk.in_(
                        select(traces.c.id).where(traces.c.learner_id == learner_id)
                    )
                )
            )
            conn.execute(delete(traces).where(traces.c.learner_id == learner_id))

    def close(self) -> None:
        self.engine.dispose()
        if self._direct is not None:
            self._direct[1].dispose()


__all__ = ["SqlStore"]
