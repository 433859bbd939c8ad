"""What the changing use cases answer: observe, reward, reset and phase changes. Plain data;
the surfaces give it its JSON or chat shape (the reads' answers: engine.views)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from learning_bot.engine.config import Phase
    from learning_bot.engine.observation import SkipReason
    from learning_bot.engine.views import ArmView


@dataclass(frozen=True, slots=True)
class ObserveResult:
    """What observing one run did."""

    trace_id: str
    recorded: bool
    duplicate: bool
    skipped: SkipReason | None
    rewards: Mapping[str, float]
    referenced: Mapping[str, bool]
    spooled: bool = False
    """Storage was unavailable: the run waits in the local spool and is recorded later."""
    ambiguous: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Tool-call names several of the run's arms share, with their ids: such a call credits
    none of them (a call names its arm to credit it)."""

    @property
    def message(self) -> str:
        return self._message() + self._ambiguity()

    def _ambiguity(self) -> str:
        if not self.ambiguous:
            return ""
        names = "; ".join(
            f"{name!r} could be {' or '.join(ids)}" for name, ids in sorted(self.ambiguous.items())
        )
        return f"; tool calls that name no arm, credited to none: {names}"

    def _message(self) -> str:
        if self.spooled:
            return (
                f"storage is unavailable; trace {self.trace_id} was spooled and will be "
                "recorded when storage is back"
            )
        if self.duplicate:
            return f"trace {self.trace_id} was already recorded; nothing changed"
        if self.skipped is not None:
            return f"trace {self.trace_id} recorded; posteriors unchanged ({self.skipped.value})"
        return f"trace {self.trace_id} recorded; {len(self.rewards)} posterior(s) updated"


@dataclass(frozen=True, slots=True)
class RewardResult:
    arm_ids: tuple[str, ...]
    value: float
    actor: str
    reason: str | None
    trace_id: str | None
    """The run credited when no arm was named."""
    lagged: bool = True
    arms: tuple[ArmView, ...] = ()
    """The rewarded arms' posteriors after the reward."""


@dataclass(frozen=True, slots=True)
class ResetResult:
    learner: str
    reset_id: int
    arm_ids: tuple[str, ...]
    all_arms: bool
    undone: bool = False

    @property
    def reset_count(self) -> int:
        return len(self.arm_ids)


@dataclass(frozen=True, slots=True)
class PhaseChange:
    previous: Phase
    phase: Phase
    changed: bool
    warning: str | None
    bootstrapped_traces: int = 0
    bootstrapped_observations: int = 0
