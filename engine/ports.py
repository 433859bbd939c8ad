"""The storage port: what the LearningService needs from a store, and the records it trades.

The engine defines this protocol; `storage.SqlStore` implements it with SQLAlchemy.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from engine.config import Phase
from engine.observation import SkipReason, Usage
from engine.posterior import Posterior


class ObservationSource(enum.StrEnum):
    """Where a posterior change came from."""

    AUTO = "auto"
    MANUAL = "manual"
    BOOTSTRAP = "bootstrap"


@dataclass(frozen=True, slots=True)
class LearnerState:
    """A learner's persistent state as the store last saw it."""

    id: int
    name: str
    phase: Phase
    version: int
    """Grows with every committed posterior change, reset or phase change."""


@dataclass(frozen=True, slots=True)
class ArmRecord:
    """A known arm: its id, label, latest token cost and current posterior."""

    arm_id: str
    label: str
    token_cost: int
    posterior: Posterior


class ArmOutcomeRecord(NamedTuple):
    """One arm of one stored run (a NamedTuple: runs carry many, built on the hot path)."""

    arm_id: str
    label: str
    included: bool
    referenced: bool
    token_cost: int
    reward: float | None
    """The posterior update this run applied to the arm, or None."""


@dataclass(frozen=True, slots=True)
class RunRecord:
    """A run as it is written: the trace, its arms' outcomes and its rewards."""

    trace_id: str
    run_id: str
    session_id: str
    session_key: str
    channel: str
    conversation: str
    timestamp: int
    provider: str
    model: str
    is_baseline: bool
    phase: Phase
    guard: SkipReason | None
    """Why this run updates nothing even in the active phase (aborted, error,
    conversational), or None."""
    usage: Usage
    duration_ms: int
    system_prompt_chars: int
    aborted: bool
    error: str | None
    context: Mapping[str, Any]
    arms: tuple[ArmOutcomeRecord, ...]


@dataclass(frozen=True, slots=True)
class StoredTrace:
    """A trace as read back (the SPEC section 9 trace fields)."""

    trace_id: str
    run_id: str
    session_id: str
    session_key: str
    channel: str
    conversation: str
    timestamp: int
    provider: str
    model: str
    is_baseline: bool
    phase: Phase
    guard: SkipReason | None
    usage: Usage
    duration_ms: int
    system_prompt_chars: int
    aborted: bool
    error: str | None
    context: Mapping[str, Any]
    arms: tuple[ArmOutcomeRecord, ...]


@dataclass(frozen=True, slots=True)
class RecordResult:
    """Which of the written runs were new and which were already stored."""

    inserted: tuple[str, ...]
    duplicates: tuple[str, ...]
    version: int = 0
    spooled: tuple[str, ...] = ()
    """Written to the local spool while storage was unavailable; recorded when it is back."""

    def statuses(self) -> dict[str, str]:
        out = dict.fromkeys(self.inserted, "inserted")
        out.update(dict.fromkeys(self.duplicates, "duplicate"))
        out.update(dict.fromkeys(self.spooled, "spooled"))
        return out


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


@dataclass(frozen=True, slots=True)
class TimeBucket:
    t: int
    value: float
    arm_id: str | None = None
    count: int = 0
    """How many traces or observations the bucket holds."""


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


class Store(Protocol):
    """Persistence the LearningService needs; every write method is one atomic transaction."""

    def open_learner(self, name: str, initial_phase: Phase) -> LearnerState: ...

    def learner_state(self, learner_id: int) -> LearnerState: ...

    def load_arms(self, learner_id: int) -> dict[str, ArmRecord]: ...

    def record_runs(self, learner_id: int, runs: Sequence[RunRecord]) -> RecordResult: ...

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

    def latest_run(self, learner_id: int, conversation: str) -> StoredTrace | None: ...

    def reset(
        self, learner_id: int, arm_ids: Sequence[str] | None, *, actor: str, at: int
    ) -> ResetRecord: ...

    def undo_reset(self, learner_id: int, *, actor: str, at: int) -> ResetRecord: ...

    def last_reset(self, learner_id: int) -> ResetRecord | None: ...

    def set_phase(
        self, learner_id: int, phase: Phase, *, actor: str, bootstrap: bool, at: int
    ) -> PhaseChangeRecord: ...

    def run_stats(self, learner_id: int) -> RunStats: ...

    def trace_page(
        self, learner_id: int, limit: int, offset: int
    ) -> tuple[list[StoredTrace], int]: ...

    def iter_traces(self, learner_id: int, batch: int = 1000) -> Iterator[StoredTrace]: ...

    def timeseries(
        self, learner_id: int, metric: str, window_ms: int, since: int | None
    ) -> list[TimeBucket]: ...

    def verify(self, learner_id: int) -> VerifyReport: ...

    def record_audit(self, learner_id: int, entry: AuditEntry) -> None: ...

    def audit_log(self, learner_id: int, limit: int = 50) -> list[AuditEntry]: ...

    def close(self) -> None: ...


# -- the command bus's shared state (idempotency, confirmations, command audit) ----------


@dataclass(frozen=True, slots=True)
class Claim:
    """The state of an idempotency key: new (claimed now), done (with its reply) or running."""

    new: bool
    reply: str | None = None
    """The stored reply as JSON, once the first execution finished."""


@dataclass(frozen=True, slots=True)
class PendingConfirmation:
    token: str
    learner: str
    actor_id: str
    surface: str
    command: str
    """The command to run on confirmation, as JSON."""
    summary: str
    created_at: int
    expires_at: int
    used_at: int | None = None
    used_by: str | None = None
    outcome: str | None = None
    """The reply the confirmation produced, as JSON."""


class CommandStore(Protocol):
    def claim_command(self, key: str, at: int) -> Claim: ...

    def finish_command(self, key: str, reply: str) -> None: ...

    def release_command(self, key: str) -> None: ...

    def create_confirmation(self, confirmation: PendingConfirmation) -> None: ...

    def get_confirmation(self, token: str) -> PendingConfirmation | None: ...

    def use_confirmation(self, token: str, actor_id: str, at: int) -> bool:
        """Mark the confirmation used; False when it already was (exactly-once)."""
        ...

    def finish_confirmation(self, token: str, outcome: str) -> None: ...

    def record_command_audit(self, learner: str, entry: AuditEntry) -> None: ...

    def hit_rate_limit(self, key: str, window_ms: int, at: int) -> int:
        """Count one more command for `key` in the window holding `at`; the count so far."""
        ...
