"""StoreWriter: the ObservationWriter that writes straight to the store, for a service given no
spooling writer: runs and per-arm outcomes go to storage at once (Unavailable while it is
down), and evidence storage could not take is not kept (the next check reads storage's)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from learning_bot.engine.errors import Unavailable
from learning_bot.engine.ports import (
    RunSessions,
    RunWriter,
)

if TYPE_CHECKING:
    from learning_bot.engine.records import RunRecord
    from learning_bot.engine.store_records import (
        ArmOutcome,
        PendingArmOutcome,
        PendingEvidence,
        RecordResult,
    )


class DirectStorage(RunWriter, RunSessions, Protocol):
    """What the writer writes to (parts of the Store port)."""


class StoreWriter:
    """Writes runs and per-arm outcomes to `store`."""

    def __init__(self, store: DirectStorage) -> None:
        self.store = store

    def record_runs(
        self, learner_id: int, runs: Sequence[RunRecord], settings: str | None = None
    ) -> RecordResult:
        return self.store.record_runs(learner_id, runs, settings)

    def spooling(self) -> bool:
        """Never: nothing waits here."""
        return False

    def spool_context_evidence(
        self, learner_id: int | None, learner: str, pending: PendingEvidence
    ) -> None:
        """Evidence is not kept without a spool."""

    def record_or_spool_arm_outcome(
        self, learner_id: int | None, learner: str, pending: PendingArmOutcome
    ) -> ArmOutcome | None:
        """The outcome as recorded; Unavailable for a learner storage has not opened."""
        if learner_id is None:
            raise Unavailable(f"storage is unavailable: learner {learner!r} is not open yet")
        return pending.record_with(self.store.record_arm_outcome, learner_id)
