"""What the reads answer: arm views, the status summary and the status. Plain data; the
surfaces give it its JSON or chat shape (the results of observe, reward, reset and phase
changes: engine.results)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from learning_bot.engine.metrics import token_savings_percent

if TYPE_CHECKING:
    from learning_bot.engine.config import LearningConfig, Phase
    from learning_bot.engine.ports import RunStats
    from learning_bot.engine.posterior import Confidence, Posterior
    from learning_bot.engine.savings import CostSavings
    from learning_bot.engine.session_sets import SessionDecisions
    from learning_bot.engine.starvation import StarvedArm
    from learning_bot.engine.store_records import ResetRecord


@dataclass(frozen=True, slots=True)
class ArmView:
    """An arm's posterior with everything status and the API show about it."""

    arm_id: str
    label: str
    token_cost: int
    posterior: Posterior
    is_seed: bool
    is_underexplored: bool
    rewards: float | None = None
    """The rewards the arm has received since its last reset, as recorded (None: not known)."""

    @property
    def mean(self) -> float:
        return self.posterior.mean

    @property
    def interval(self) -> tuple[float, float]:
        return self.posterior.credible_interval()

    @property
    def confidence(self) -> Confidence:
        return self.posterior.confidence


@dataclass(frozen=True, slots=True)
class Summary:
    """`GET summary` (docs/http-api.md): traces since the last full reset, tokens, the
    baseline split."""

    trace_count: int
    arm_count: int
    min_timestamp: int | None
    max_timestamp: int | None
    total_tokens: int
    baseline_runs: int
    selected_runs: int
    baseline_avg_tokens: float | None
    selected_avg_tokens: float | None
    token_savings_percent: float | None
    baseline_avg_duration: float | None
    selected_avg_duration: float | None
    offered_avg_tokens: float | None = None
    """Per selected run: prompt tokens of every arm the runtime offered (what an agent
    without the learning layer sends)."""
    selected_prompt_avg_tokens: float | None = None
    """Per selected run: prompt tokens of the arms selection kept."""
    prompt_savings_percent: float | None = None
    """100 x (1 - selected_prompt_avg_tokens / offered_avg_tokens) (docs/chat-commands.md)."""
    estimated_recall: float | None = None
    """The estimated share of the components the model used that selection kept."""
    total_reward: float = 0.0
    """The rewards every arm has received since its last reset (automatic and manual)."""
    accuracy: float | None = None
    """total_reward / the observations behind it: the share of observations that were
    rewarded (None before the first)."""
    explore_ratio: float | None = None
    """The share of baseline runs among the runs counted (None without runs)."""
    prompt_cost_savings: CostSavings | None = None
    """The prompt cost per run of selected sessions against baseline sessions, as the provider
    billed it (engine.savings); its `percent` is None, with a reason, when it cannot be
    measured."""
    session_decisions: SessionDecisions | None = None
    """What the learner's sessions did with their sets: how many were drawn again while live,
    and why (engine.session_review); None when the store keeps no session sets."""


def _avg(total: int, n: int) -> float | None:
    return total / n if n else None


def summarise(
    stats: RunStats,
    arm_count: int,
    estimated_recall: float | None = None,
    total_pulls: int = 0,
    total_reward: float = 0.0,
    prompt_cost_savings: CostSavings | None = None,
) -> Summary:
    """The summary of a learner's run counters (and the estimated recall, metrics), and of
    its arms' evidence (`total_pulls` observations that brought `total_reward`)."""
    b_avg = _avg(stats.baseline_tokens, stats.baseline_runs)
    s_avg = _avg(stats.selected_tokens, stats.selected_runs)
    savings = token_savings_percent(b_avg, s_avg)
    if savings is not None and not math.isfinite(savings):
        savings = None
    offered = _avg(stats.offered_prompt_tokens, stats.selected_runs)
    kept = _avg(stats.selected_prompt_tokens, stats.selected_runs)
    prompt_savings = 100.0 * (1.0 - kept / offered) if offered and kept is not None else None
    return Summary(
        trace_count=stats.trace_count,
        arm_count=arm_count,
        min_timestamp=stats.min_timestamp,
        max_timestamp=stats.max_timestamp,
        total_tokens=stats.total_tokens,
        baseline_runs=stats.baseline_runs,
        selected_runs=stats.selected_runs,
        baseline_avg_tokens=b_avg,
        selected_avg_tokens=s_avg,
        token_savings_percent=savings,
        baseline_avg_duration=_avg(stats.baseline_duration, stats.baseline_runs),
        selected_avg_duration=_avg(stats.selected_duration, stats.selected_runs),
        offered_avg_tokens=offered,
        selected_prompt_avg_tokens=kept,
        prompt_savings_percent=prompt_savings,
        estimated_recall=estimated_recall,
        total_reward=total_reward,
        accuracy=total_reward / total_pulls if total_pulls else None,
        explore_ratio=_avg(stats.baseline_runs, stats.baseline_runs + stats.selected_runs),
        prompt_cost_savings=prompt_cost_savings,
    )


@dataclass(frozen=True, slots=True)
class Status:
    """Everything `/learning status` shows (docs/chat-commands.md, "What status shows"), as data."""

    learner: str
    phase: Phase
    config: LearningConfig
    summary: Summary
    top: tuple[ArmView, ...]
    bottom: tuple[ArmView, ...]
    """The lowest means, lowest first; empty unless there are more than `top` arms. Seed
    arms are left out: they are never excluded, so they are no candidates for exclusion."""
    last_reset: ResetRecord | None
    seeds_left_out: int = 0
    """How many seed arms the bottom list passed over."""
    starved: tuple[StarvedArm, ...] = ()
    """Useful arms that selection now leaves out of nearly every run (engine.starvation)."""

    @property
    def empty(self) -> bool:
        return self.summary.trace_count == 0
