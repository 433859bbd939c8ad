"""The storage port: what the LearningService needs from a store, and the records it trades.

The engine defines this protocol; `storage.SqlStore` implements it with SQLAlchemy.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from learning_bot.engine.errors import Conflict

Outcome = TypeVar("Outcome")


class LearnerChanged(Conflict):
    """Runs were not recorded because the learner's phase or settings are no longer those
    they were built under (another replica changed them): nothing was written. `phase` is
    the learner's stored phase; the writer rebuilds the runs under its current state and
    records them again."""

    def __init__(self, phase: Phase) -> None:
        super().__init__(
            f"the learner's phase or settings changed (it is {phase.value} now); "
            "the runs were not recorded"
        )
        self.phase = phase


if TYPE_CHECKING:  # named in annotations only: a reader of the ports imports none of them
    from learning_bot.engine.config import Phase
    from learning_bot.engine.context_policy import EvidenceCell
    from learning_bot.engine.posterior import Posterior
    from learning_bot.engine.records import RunRecord
    from learning_bot.engine.savings import SessionUsage
    from learning_bot.engine.session_sets import SessionDecisions, SessionSet
    from learning_bot.engine.store_records import (
        ArmOutcome,
        PendingArmOutcome,
        PendingEvidence,
        PhaseChangeRecord,
        RecordResult,
        ResetRecord,
        RewardChange,
        TimeBucket,
        VerifyReport,
    )


@dataclass(frozen=True, slots=True)
class LearnerState:
    """A learner's persistent state as the store last saw it."""

    id: int
    name: str
    phase: Phase
    version: int
    """Grows with every committed posterior change, reset or phase change."""
    half_life: float = 0.0
    """The forgetting the store applies to this learner's posteriors (0: never)."""
    settings: Mapping[str, Any] | None = None
    """The learner's stored learning options (LearningConfig.to_dict without the phase), or
    None for a learner made before settings were stored."""


@dataclass(frozen=True, slots=True)
class ArmRecord:
    """A known arm: its id, label, latest token cost and current posterior."""

    arm_id: str
    label: str
    token_cost: int
    posterior: Posterior
    forgets_toward: tuple[float, float] | None = None
    """The prior forgetting pulls this arm toward (engine.forgetting.forgetting_prior); None:
    its type's prior."""
    rewards: float | None = None
    """The rewards the arm has received since its last reset, as recorded; None: not known,
    read from the posterior as pulls - (beta - 1), which holds without forgetting."""


@dataclass(frozen=True, slots=True)
class RunStats:
    """Aggregates over the traces counted by status (those since the last full reset)."""

    trace_count: int = 0
    total_tokens: int = 0
    min_timestamp: int | None = None
    max_timestamp: int | None = None
    baseline_runs: int = 0
    baseline_tokens: int = 0
    baseline_duration: int = 0
    selected_runs: int = 0
    selected_tokens: int = 0
    selected_duration: int = 0
    all_time_traces: int = 0
    offered_prompt_tokens: int = 0
    """Selected runs: the token costs of every arm the runtime offered, summed."""
    selected_prompt_tokens: int = 0
    """Selected runs: the token costs of the arms that went into the prompt, summed."""


class SpoolHealth(Protocol):
    """The local spool's state, as healthz and status report it: runs pending, bytes, whether
    it is full, and its dead letters."""

    def health(self) -> dict[str, Any]: ...


class RunWriter(Protocol):
    """Where runs are written: the Store itself, or a wrapper that spools them while storage is
    unavailable (concurrent observes are batched once, by the HTTP adapter's observe line).

    `record_runs` writes nothing and raises LearnerChanged when the runs were not built under
    the learner's stored phase (`RunRecord.phase`) or, when `settings` is given (the JSON of
    the learner settings they were built under), under its stored settings: the check is made
    in the write's own transaction, so no run is recorded under a phase that has ended."""

    def record_runs(
        self, learner_id: int, runs: Sequence[RunRecord], settings: str | None = None
    ) -> RecordResult: ...


class EvidenceSpooler(Protocol):
    """Keeps per-feature evidence in a spool while storage is down, to add it to storage after
    the runs it came from (`learner_id` None: by the learner's name)."""

    def spool_context_evidence(
        self, learner_id: int | None, learner: str, pending: PendingEvidence
    ) -> None: ...

    def spooling(self) -> bool:
        """Whether runs wait in the spool: evidence then queues behind them, in order."""
        ...


class ArmOutcomeWriter(Protocol):
    """Records a per-arm outcome, or spools it while storage is down (for a learner storage
    has not opened yet, `learner_id` None, by the learner's name)."""

    def record_or_spool_arm_outcome(
        self, learner_id: int | None, learner: str, pending: PendingArmOutcome
    ) -> ArmOutcome | None:
        """The outcome as recorded, or None when it was spooled."""
        ...


class RunSessions(Protocol):
    """Runs recorded at selection time and completed arm by arm afterwards, as agent gateways
    that report one outcome per arm do (OpenClaw's learning backend calls)."""

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
    ) -> ArmOutcome: ...

    def boost_priors(self, learner_id: int, arm_ids: Sequence[str], alpha: float) -> int: ...

    def conversation_runs(
        self, learner_id: int, conversation: str, since: int
    ) -> list[RunRecord]: ...


class SessionSets(Protocol):
    """Session-stable selection's shared state: the set each session's first select decided
    (engine.session_selection), kept in storage so that every replica answers a session
    alike."""

    def session_set(self, learner_id: int, key: str) -> SessionSet | None: ...

    def claim_session_set(
        self, learner_id: int, candidate: SessionSet, idle_ms: int
    ) -> SessionSet: ...

    def save_session_set(self, learner_id: int, changed: SessionSet) -> bool: ...


class SessionDecisionCounts(Protocol):
    """What a learner's sessions of the last day did with their sets, for status."""

    def session_decisions(self, learner_id: int) -> SessionDecisions: ...


class ContextStore(Protocol):
    """The context-aware policy's per-feature evidence (engine.context_policy) and deferral
    counts, kept per learner under a bound on its cells and shared by every replica: writes add
    to what is stored."""

    def context_evidence(self, learner_id: int) -> tuple[list[EvidenceCell], int]: ...

    def context_evidence_state(self, learner_id: int) -> tuple[int, int]: ...

    def context_evidence_since(
        self, learner_id: int, tick: int
    ) -> tuple[list[EvidenceCell], int]: ...

    def add_context_evidence(
        self,
        learner_id: int,
        runs: Sequence[tuple[Sequence[int], Mapping[str, float]]],
        keep: float,
        max_cells: int,
        deferrals: Mapping[str, tuple[int, int]] | None = None,
    ) -> int: ...

    def context_deferrals(self, learner_id: int, arm_id: str) -> tuple[int, int]: ...


class ContextWords(Protocol):
    """The forms a learner's message word features were written in, with how often each was
    seen (engine.feature_words), shared by every replica: writes add to the stored counts;
    at most `max_features` features are kept."""

    def add_context_words(
        self, learner_id: int, counts: Mapping[tuple[int, str], int], max_features: int
    ) -> None: ...

    def context_words(self, learner_id: int, features: Sequence[int]) -> dict[int, str]: ...


class RecallLevels(Protocol):
    """The recall target's calibration (engine.recall_target.RecallCalibration): the uses of
    the learner's baseline sessions, each as (level, own level, session key), appended by
    every replica and read back by a restarted process or another replica
    (engine.recall_levels). Part of the Store port."""

    def add_recall_levels(
        self, learner_id: int, uses: Sequence[tuple[float, float, str]], *, at: int, keep: int
    ) -> None:
        """Append `uses` (oldest first; math.inf for a level no set reaches) at `at` (ms);
        past the latest `keep` of the learner's the older ones may go."""
        ...

    def recall_levels(self, learner_id: int, last: int) -> list[tuple[float, float, str]]:
        """The learner's latest `last` uses, oldest first."""
        ...


class LeftOutRuns(Protocol):
    """Per arm, the learner's latest runs since its last inclusion: the exploration bound's
    count across replicas and restarts (engine.exploration)."""

    def left_out_runs(self, learner_id: int, window: int) -> dict[str, int]: ...


class SessionUsages(Protocol):
    """The usage of a learner's latest active runs summed per session, for the measured
    prompt-cost saving (engine.savings)."""

    def session_usage(self, learner_id: int, window: int = ...) -> list[SessionUsage]: ...


class SessionUsageSince(Protocol):
    """The usage of a learner's active runs since a time, summed per session with its start:
    the cost-per-session chart."""

    def session_usage_since(self, learner_id: int, since: int) -> list[SessionUsage]: ...


class ProjectionStore(Protocol):
    """The projection made when a learner was switched to active (engine.projection's JSON),
    kept with the learner so status can show what was projected beside what is achieved."""

    def save_projection(self, learner_id: int, projection: str, *, at: int) -> None: ...

    def saved_projection(self, learner_id: int) -> tuple[str, int] | None:
        """The JSON and when it was saved (ms), or None."""
        ...


class StoreReads(SessionDecisionCounts, SessionUsages, Protocol):
    """What status reads of a learner: its state, posteriors, run counters, last reset,
    inclusion counts, session decisions, session usage and kept projection. The read-only
    port: storage.lite.LiteReader serves it on a SQLite file without SQLAlchemy, and every
    Store serves it too."""

    def open_learner(
        self,
        name: str,
        initial_phase: Phase,
        settings: Mapping[str, Any] | None = None,
        half_life: float = 0.0,
    ) -> LearnerState:
        """The learner named `name`, created with `settings` and `half_life` when it does not
        exist; an existing learner's stored settings are never changed here."""
        ...

    def learner_state(self, learner_id: int) -> LearnerState: ...

    def load_arms(self, learner_id: int) -> dict[str, ArmRecord]: ...

    def run_stats(self, learner_id: int) -> RunStats: ...

    def last_reset(self, learner_id: int) -> ResetRecord | None: ...

    def inclusion_counts(self, learner_id: int, last: int) -> dict[str, tuple[int, int, int]]:
        """arm id -> (runs that included it, runs that offered it, runs that included it
        and used it) over the working runs (no guard) among the last `last` active selected
        runs counted by status."""
        ...

    def saved_projection(self, learner_id: int) -> tuple[str, int] | None:
        """The JSON and when it was saved (ms), or None (ProjectionStore)."""
        ...

    def close(self) -> None: ...


class Store(
    StoreReads,
    RunSessions,
    SessionSets,
    ContextStore,
    ContextWords,
    LeftOutRuns,
    SessionUsageSince,
    ProjectionStore,
    RecallLevels,
    Protocol,
):
    """Persistence the LearningService needs: every read of StoreReads, the parts above, and
    the writes below; every write method is one atomic transaction. storage.SqlStore
    implements all of it."""

    def record_runs(
        self, learner_id: int, runs: Sequence[RunRecord], settings: str | None = None
    ) -> RecordResult:
        """See RunWriter.record_runs."""
        ...

    def record_rewards(
        self,
        learner_id: int,
        changes: Sequence[RewardChange],
        *,
        actor: str,
        reason: str | None,
        trace_id: str | None,
        at: int,
    ) -> int: ...

    def latest_run(self, learner_id: int, conversation: str) -> RunRecord | None: ...

    def reset(
        self, learner_id: int, arm_ids: Sequence[str] | None, *, actor: str, at: int
    ) -> ResetRecord: ...

    def undo_reset(self, learner_id: int, *, actor: str, at: int) -> ResetRecord: ...

    def set_phase(
        self, learner_id: int, phase: Phase, *, actor: str, bootstrap: bool, at: int
    ) -> PhaseChangeRecord: ...

    def set_half_life(self, learner_id: int, half_life: float, *, at: int) -> None:
        """Make `half_life` the forgetting applied to every later change of the learner's
        posteriors (a change rebases every posterior, so `verify` replays each from its
        value at the change)."""
        ...

    def set_settings(
        self, learner_id: int, settings: Mapping[str, Any], half_life: float, *, at: int
    ) -> None:
        """Store the learner's learning options and its half-life in one transaction (a new
        half-life rebases its posteriors as `set_half_life` does)."""
        ...

    def trace_page(
        self, learner_id: int, limit: int, offset: int
    ) -> tuple[list[RunRecord], int]: ...

    def trace_pieces(self, learner_id: int, limit: int, offset: int) -> Iterator[list[RunRecord]]:
        """The page `trace_page` reads, in pieces bounded by their size in memory (not by
        their number of traces): what a streamed answer holds at once."""
        ...

    def iter_traces(self, learner_id: int, *, with_arms: bool = True) -> Iterator[RunRecord]:
        """Every trace, oldest first, read in pieces bounded by their size in memory;
        `with_arms` off leaves the arm outcomes unread."""
        ...

    def timeseries(
        self, learner_id: int, metric: str, window_ms: int, since: int | None
    ) -> list[TimeBucket]: ...

    def verify(self, learner_id: int) -> VerifyReport: ...


class ObservationWriter(RunWriter, EvidenceSpooler, ArmOutcomeWriter, Protocol):
    """Where the service writes what it observes: runs, per-arm outcomes and per-feature
    evidence. storage.spool.SpoolingStore keeps them in a local spool while storage is down;
    engine.store_writer.StoreWriter writes them straight to the store."""
