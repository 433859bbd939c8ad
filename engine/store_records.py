"""The records a store takes and answers besides a learner's state, its arms and its run
counts (engine.ports): what became of written runs, manual changes and resets, time series,
verification, the audit log, and the outcomes and evidence kept until a run completes.

Apart from engine.ports so that a process that only reads a status never builds them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeVar

if TYPE_CHECKING:
    from learning_bot.engine.config import Phase
    from learning_bot.engine.posterior import Posterior

Outcome = TypeVar("Outcome")


RunStatus = Literal["inserted", "duplicate", "spooled"]


@dataclass(frozen=True, slots=True)
class RecordResult:
    """What became of each written run, in the order the runs were given: inserted,
    duplicate (its trace id was already stored, or came earlier in the same batch: the store
    is the one place that decides), or spooled (written to the local spool while storage was
    unavailable; recorded when it is back)."""

    trace_ids: tuple[str, ...]
    statuses: tuple[RunStatus, ...]

    def _with(self, status: str) -> tuple[str, ...]:
        return tuple(t for t, s in zip(self.trace_ids, self.statuses, strict=True) if s == status)

    @property
    def inserted(self) -> tuple[str, ...]:
        return self._with("inserted")

    @property
    def duplicates(self) -> tuple[str, ...]:
        return self._with("duplicate")

    @property
    def spooled(self) -> tuple[str, ...]:
        return self._with("spooled")


@dataclass(frozen=True, slots=True)
class RewardChange:
    """One manual or bootstrap posterior change."""

    arm_id: str
    reward: float


@dataclass(frozen=True, slots=True)
class ResetRecord:
    """A reset (or its undo): which arms, by whom, when."""

    reset_id: int
    arm_ids: tuple[str, ...]
    all_arms: bool
    actor: str
    at: int
    undone: bool = False


@dataclass(frozen=True, slots=True)
class PhaseChangeRecord:
    previous: Phase
    phase: Phase
    bootstrapped_traces: int
    bootstrapped_observations: int


@dataclass(frozen=True, slots=True)
class TimeBucket:
    t: int
    value: float
    arm_id: str | None = None
    count: int = 0
    """How many traces or observations the bucket holds (sessions, for `sessionCost`)."""
    group: str | None = None
    """`baseline` or `selected` for the `sessionCost` metric."""


@dataclass(frozen=True, slots=True)
class VerifyProblem:
    arm_id: str | None
    message: str


@dataclass(frozen=True, slots=True)
class VerifyReport:
    """The result of checking posteriors against their observations, and traces for wholeness."""

    arms_checked: int
    traces_checked: int
    observations_checked: int
    problems: tuple[VerifyProblem, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        return not self.problems


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One recorded command or state change."""

    kind: str
    actor: str
    surface: str
    detail: Mapping[str, Any]
    result: str
    at: int


@dataclass(frozen=True, slots=True)
class ArmOutcome:
    """What `record_arm_outcome` did to one arm: its posterior afterwards, and the run the
    outcome was attached to (None when no recorded run of that conversation offered the arm,
    or the run already held an outcome for it)."""

    arm_id: str
    posterior: Posterior
    trace_id: str | None
    updated: bool
    """The posterior changed (the active phase); False in the passive phase."""
    spooled: bool = False
    """Storage was unavailable: the outcome waits in the spool and is recorded (once) when
    storage answers again; `posterior` is the one this process knew."""


@dataclass(frozen=True, slots=True)
class PendingArmOutcome:
    """A per-arm outcome (`RunSessions.record_arm_outcome`'s arguments) kept while storage is
    down; `key` makes its replay record it once however often the replay runs."""

    arm_id: str
    reward: float
    referenced: bool
    conversation: str | None
    apply_reward: bool
    at: int
    key: str
    phase: Phase
    loaded: bool = False
    """The arm was left out of the run, then loaded by the model through tool search."""

    def record_with(
        self, record_arm_outcome: Callable[..., Outcome], learner_id: int, **extra: Any
    ) -> Outcome:
        """The outcome written through a `record_arm_outcome` (RunSessions' or a store's that
        takes `extra` keywords too)."""
        return record_arm_outcome(
            learner_id,
            self.arm_id,
            self.reward,
            referenced=self.referenced,
            conversation=self.conversation,
            apply_reward=self.apply_reward,
            at=self.at,
            phase=self.phase,
            loaded=self.loaded,
            **extra,
        )


@dataclass(frozen=True, slots=True)
class PendingEvidence:
    """Per-feature evidence of observed runs (`ContextStore.add_context_evidence`'s arguments)
    kept while storage is down, so that runs spooled in an outage still teach the
    context-aware policy when they are written. `runs` holds each run's hashed features and
    rewards (never a message); `phase` is the learner's when observed (a learner created by
    the replay starts in it)."""

    runs: tuple[tuple[tuple[int, ...], tuple[tuple[str, float], ...]], ...]
    keep: float
    max_cells: int
    deferrals: tuple[tuple[str, int, int], ...]
    phase: Phase
