"""ReadOnlyStore: a Store over the reads of StoreReads alone (storage.lite.LiteReader's port),
for a service that only answers status, as `learning-bot status` does on a SQLite file without
importing SQLAlchemy.

The reads StoreReads serves are passed on. A read-only service learns nothing, so the state
only learning writes (context evidence, written word forms, session sets, exploration counts,
per-session usage over time) reads as none, as a process that has observed nothing holds it;
every write, and the reads of traces, time series and verify, raise Unavailable: the command
line then opens the database through SqlStore."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from learning_bot.engine.config import Phase
from learning_bot.engine.errors import Unavailable
from learning_bot.engine.ports import (
    ArmOutcome,
    ArmRecord,
    LearnerState,
    PhaseChangeRecord,
    RecordResult,
    ResetRecord,
    RewardChange,
    RunStats,
    StoreReads,
    TimeBucket,
    VerifyReport,
)
from learning_bot.engine.records import RunRecord
from learning_bot.engine.savings import SessionUsage
from learning_bot.engine.session_sets import SessionDecisions, SessionSet

if TYPE_CHECKING:
    from learning_bot.engine.context_policy import EvidenceCell

REFUSED = "this read-only view of the database serves status only"


class ReadOnlyStore:
    """The Store port over `reads`: reads passed on, learnt state empty, writes refused."""

    def __init__(self, reads: StoreReads) -> None:
        self.reads = reads

    # -- the reads of StoreReads ---------------------------------------------------------------

    def open_learner(
        self,
        name: str,
        initial_phase: Phase,
        settings: Mapping[str, Any] | None = None,
        half_life: float = 0.0,
    ) -> LearnerState:
        return self.reads.open_learner(name, initial_phase, settings, half_life)

    def learner_state(self, learner_id: int) -> LearnerState:
        return self.reads.learner_state(learner_id)

    def load_arms(self, learner_id: int) -> dict[str, ArmRecord]:
        return self.reads.load_arms(learner_id)

    def run_stats(self, learner_id: int) -> RunStats:
        return self.reads.run_stats(learner_id)

    def last_reset(self, learner_id: int) -> ResetRecord | None:
        return self.reads.last_reset(learner_id)

    def inclusion_counts(self, learner_id: int, last: int) -> dict[str, tuple[int, int, int]]:
        return self.reads.inclusion_counts(learner_id, last)

    def session_decisions(self, learner_id: int) -> SessionDecisions:
        return self.reads.session_decisions(learner_id)

    def session_usage(self, learner_id: int, window: int | None = None) -> list[SessionUsage]:
        if window is None:
            return self.reads.session_usage(learner_id)
        return self.reads.session_usage(learner_id, window)

    def saved_projection(self, learner_id: int) -> tuple[str, int] | None:
        return self.reads.saved_projection(learner_id)

    def close(self) -> None:
        self.reads.close()

    # -- what only learning writes: none -------------------------------------------------------

    def context_evidence(self, learner_id: int) -> tuple[list[EvidenceCell], int]:
        return [], 0

    def context_evidence_state(self, learner_id: int) -> tuple[int, int]:
        return 0, 0

    def context_evidence_since(self, learner_id: int, tick: int) -> tuple[list[EvidenceCell], int]:
        return [], tick

    def context_deferrals(self, learner_id: int, arm_id: str) -> tuple[int, int]:
        return 0, 0

    def context_words(self, learner_id: int, features: Sequence[int]) -> dict[int, str]:
        return {}

    def session_set(self, learner_id: int, key: str) -> SessionSet | None:
        return None

    def left_out_runs(self, learner_id: int, window: int) -> dict[str, int]:
        return {}

    def session_usage_since(self, learner_id: int, since: int) -> list[SessionUsage]:
        return []

    # -- refused -------------------------------------------------------------------------------

    def record_runs(
        self, learner_id: int, runs: Sequence[RunRecord], settings: str | None = None
    ) -> RecordResult:
        raise Unavailable(REFUSED)

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
        raise Unavailable(REFUSED)

    def latest_run(self, learner_id: int, conversation: str) -> RunRecord | None:
        raise Unavailable(REFUSED)

    def reset(
        self, learner_id: int, arm_ids: Sequence[str] | None, *, actor: str, at: int
    ) -> ResetRecord:
        raise Unavailable(REFUSED)

    def undo_reset(self, learner_id: int, *, actor: str, at: int) -> ResetRecord:
        raise Unavailable(REFUSED)

    def set_phase(
        self, learner_id: int, phase: Phase, *, actor: str, bootstrap: bool, at: int
    ) -> PhaseChangeRecord:
        raise Unavailable(REFUSED)

    def set_half_life(self, learner_id: int, half_life: float, *, at: int) -> None:
        raise Unavailable(REFUSED)

    def set_settings(
        self, learner_id: int, settings: Mapping[str, Any], half_life: float, *, at: int
    ) -> None:
        raise Unavailable(REFUSED)

    def trace_page(self, learner_id: int, limit: int, offset: int) -> tuple[list[RunRecord], int]:
        raise Unavailable(REFUSED)

    def trace_pieces(self, learner_id: int, limit: int, offset: int) -> Iterator[list[RunRecord]]:
        raise Unavailable(REFUSED)

    def iter_traces(self, learner_id: int, *, with_arms: bool = True) -> Iterator[RunRecord]:
        raise Unavailable(REFUSED)

    def timeseries(
        self, learner_id: int, metric: str, window_ms: int, since: int | None
    ) -> list[TimeBucket]:
        raise Unavailable(REFUSED)

    def verify(self, learner_id: int) -> VerifyReport:
        raise Unavailable(REFUSED)

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
        phase: Phase | None = None,
        loaded: bool = False,
    ) -> ArmOutcome:
        raise Unavailable(REFUSED)

    def boost_priors(self, learner_id: int, arm_ids: Sequence[str], alpha: float) -> int:
        raise Unavailable(REFUSED)

    def conversation_runs(self, learner_id: int, conversation: str, since: int) -> list[RunRecord]:
        raise Unavailable(REFUSED)

    def claim_session_set(self, learner_id: int, candidate: SessionSet, idle_ms: int) -> SessionSet:
        raise Unavailable(REFUSED)

    def save_session_set(self, learner_id: int, changed: SessionSet) -> bool:
        raise Unavailable(REFUSED)

    def add_context_evidence(
        self,
        learner_id: int,
        runs: Sequence[tuple[Sequence[int], Mapping[str, float]]],
        keep: float,
        max_cells: int,
        deferrals: Mapping[str, tuple[int, int]] | None = None,
    ) -> int:
        raise Unavailable(REFUSED)

    def add_context_words(
        self, learner_id: int, counts: Mapping[tuple[int, str], int], max_features: int
    ) -> None:
        raise Unavailable(REFUSED)

    def save_projection(self, learner_id: int, projection: str, *, at: int) -> None:
        raise Unavailable(REFUSED)
