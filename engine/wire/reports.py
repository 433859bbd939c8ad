"""The wire types of the learning API's reads: the summary, settings, posteriors, an arm's
explanation, traces, time series, health and the phase's projection."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from learning_bot.engine.config import PACKINGS, POLICIES
from learning_bot.engine.observation import SkipReason
from learning_bot.engine.wire.declare import PHASES, Answer, wire, wire_type
from learning_bot.engine.wire.runs import Usage


@wire_type()
@dataclass(frozen=True)
class CostSavings:
    """The measured prompt-cost saving: percent with its 95% interval and the sessions behind
    it, or the reason it cannot be measured (percent null)."""

    percent: float | None = wire(required=False)
    low: float | None = wire(required=False)
    high: float | None = wire(required=False)
    sessions: int = wire(required=False)
    selected_sessions: int = wire("selectedSessions", required=False)
    baseline_sessions: int = wire("baselineSessions", required=False)
    selected_cost_per_run: float | None = wire("selectedCostPerRun", required=False)
    baseline_cost_per_run: float | None = wire("baselineCostPerRun", required=False)
    reason: str | None = wire(required=False)


@wire_type()
@dataclass(frozen=True)
class RedrawReason:
    reason: str = wire()
    sessions: int = wire()


@wire_type()
@dataclass(frozen=True)
class SessionDecisions:
    """What the learner's sessions of the last day did with their sets."""

    sessions: int = wire(required=False)
    redrawn: int = wire(required=False)
    redraws: int = wire(required=False)
    by_reason: tuple[RedrawReason, ...] = wire("byReason", required=False)
    grown: int = wire(required=False)


@wire_type(required="all")
@dataclass(frozen=True)
class BaselineSplit:
    baseline_runs: int = wire("baselineRuns")
    selected_runs: int = wire("selectedRuns")
    baseline_avg_tokens: float | None = wire("baselineAvgTokens")
    selected_avg_tokens: float | None = wire("selectedAvgTokens")
    token_savings_percent: float | None = wire("tokenSavingsPercent")
    baseline_avg_duration: float | None = wire("baselineAvgDuration")
    selected_avg_duration: float | None = wire("selectedAvgDuration")


@wire_type(
    required=("traceCount", "armCount", "minTimestamp", "maxTimestamp", "totalTokens", "baseline")
)
@dataclass(frozen=True)
class Summary(Answer):
    """`GET summary`'s answer (OpenAPI `Summary`); None where a figure cannot be computed."""

    trace_count: int = wire("traceCount")
    arm_count: int = wire("armCount", default=0)
    min_timestamp: int | None = wire("minTimestamp", default=None)
    max_timestamp: int | None = wire("maxTimestamp", default=None)
    total_tokens: int = wire("totalTokens", default=0)
    prompt_cost_savings_percent: float | None = wire("promptCostSavingsPercent", default=None)
    prompt_cost_savings: Mapping[str, Any] | None = wire(
        "promptCostSavings", default=None, shape=CostSavings
    )
    prompt_savings_percent: float | None = wire("promptSavingsPercent", default=None)
    offered_avg_tokens: float | None = wire("offeredAvgTokens", default=None)
    selected_prompt_avg_tokens: float | None = wire("selectedPromptAvgTokens", default=None)
    estimated_recall: float | None = wire("estimatedRecall", default=None)
    sessions: Mapping[str, Any] | None = wire(
        default=None,
        shape=SessionDecisions,
        doc="What the learner's sessions of the last day did with their sets: how many were "
        "drawn again while live, the sessions per reason of their latest redraw, and how many "
        "took on tools outside their cached prefix (grown: a non-empty `added`)",
    )
    """What the sessions of the last day did with their sets (redrawn, and why)."""
    accuracy: float | None = wire(default=None)
    explore_ratio: float | None = wire("exploreRatio", default=None)
    total_reward: float = wire("totalReward", default=0.0)
    baseline: Mapping[str, Any] = wire(default_factory=dict, shape=BaselineSplit)


@wire_type(
    required=(
        "enabled",
        "phase",
        "strategy",
        "tokenBudget",
        "baselineRate",
        "minPulls",
        "seedArmIds",
        "policy",
        "halfLife",
    )
)
@dataclass(frozen=True)
class Config:
    """`GET config`: the learner's settings."""

    enabled: bool = wire()
    phase: str = wire(enum=PHASES)
    strategy: str = wire(enum=["thompson"])
    token_budget: int = wire("tokenBudget")
    baseline_rate: float = wire("baselineRate")
    min_pulls: int = wire("minPulls")
    seed_arm_ids: tuple[str, ...] = wire("seedArmIds")
    policy: str = wire(enum=list(POLICIES))
    half_life: float = wire("halfLife")
    packing: str = wire(enum=list(PACKINGS))
    min_score: float = wire("minScore")
    exploration: float = wire()
    pooled_prior: bool = wire("pooledPrior")
    seed_boost: float = wire("seedBoost")
    recall_target: float = wire("recallTarget")


@wire_type(required="all")
@dataclass(frozen=True)
class CredibleInterval:
    lower: float = wire()
    upper: float = wire()


@wire_type(required="all")
@dataclass(frozen=True)
class Posterior:
    """An arm's posterior, as `GET posteriors` lists it."""

    arm_id: str = wire("armId")
    alpha: float = wire()
    beta: float = wire()
    mean: float = wire()
    pulls: int = wire()
    last_updated: int | None = wire("lastUpdated")
    is_seed: bool = wire("isSeed")
    is_underexplored: bool = wire("isUnderexplored")
    credible_interval: CredibleInterval = wire("credibleInterval")
    confidence: str = wire(enum=["low", "medium", "high"])
    confidence_band: str = wire(
        "confidenceBand", enum=["none", "low", "medium", "high", "very high"]
    )


@wire_type(required="all")
@dataclass(frozen=True)
class Dependence:
    """A request feature the arm's rate of use differs under."""

    feature: str = wire(
        doc="What the feature is (\"the message mentions 'file'\"), or a hashed feature"
    )
    rate_with: float = wire("rateWith")
    runs_with: float = wire("runsWith")
    rate_without: float | None = wire("rateWithout")
    runs_without: float | None = wire("runsWithout")
    text: str = wire(doc="The line `status arm` shows for it")


@wire_type(required="all")
@dataclass(frozen=True)
class Explanation:
    """What an arm's usefulness depends on, and how often it was deferred, then loaded."""

    depends_on: tuple[Dependence, ...] = wire(
        "dependsOn",
        doc="The request features the arm's rate of use differs most under (each seen in at "
        "least 3 of its runs), largest difference first",
    )
    deferred: int = wire(
        doc="Runs that left this tool out while their runtime reported what it loaded (tool "
        "search), counted by this server process"
    )
    loaded: int = wire(doc="Of those runs, the ones that loaded it")
    deferred_text: str | None = wire(
        "deferredText", doc="The line `status arm` shows for them (null: never deferred)"
    )


@wire_type(required="all")
@dataclass(frozen=True)
class ArmDetail(Posterior):
    """One arm as `GET arms/{armId}` answers it: its posterior, with its explanation."""

    explanation: Explanation = wire()


@wire_type(required="all")
@dataclass(frozen=True)
class TraceArm:
    arm_id: str = wire("armId")
    included: bool = wire()
    referenced: bool = wire()
    token_cost: int = wire("tokenCost")


@wire_type(required="all")
@dataclass(frozen=True)
class Trace:
    """A run as `GET traces` and exports show it."""

    trace_id: str = wire("traceId")
    run_id: str = wire("runId")
    session_id: str = wire("sessionId")
    session_key: str = wire("sessionKey")
    timestamp: int = wire()
    provider: str = wire()
    model: str = wire()
    channel: str = wire()
    is_baseline: bool = wire("isBaseline")
    context: Mapping[str, Any] = wire()
    arms: tuple[TraceArm, ...] = wire()
    usage: Usage = wire()
    duration_ms: int = wire("durationMs")
    system_prompt_chars: int = wire("systemPromptChars")
    aborted: bool = wire()
    error: str | None = wire()


@wire_type(documented=False)
@dataclass(frozen=True)
class StoredTraceArm(TraceArm):
    """An arm of a stored run: as the API shows it, with its label and the reward the run
    applied to it."""

    label: str = wire()
    reward: float | None = wire()


@wire_type(documented=False)
@dataclass(frozen=True)
class StoredTrace(Trace):
    """A run as the spool keeps it while storage is down (engine.records): as the API shows
    it, with what observing it decided."""

    arms: tuple[StoredTraceArm, ...] = wire()
    conversation: str = wire()
    phase: str = wire(enum=PHASES)
    guard: str | None = wire(enum=[r.value for r in SkipReason])


@wire_type(required="all")
@dataclass(frozen=True)
class TracePage:
    traces: tuple[Trace, ...] = wire()
    total: int = wire()


@wire_type(required=("t", "value"))
@dataclass(frozen=True)
class Bucket:
    """One point of `GET timeseries`."""

    t: int = wire()
    value: float = wire()
    arm_id: str = wire("armId")
    group: str = wire(enum=["baseline", "selected"])
    sessions: int = wire()


@wire_type(required="all")
@dataclass(frozen=True)
class Timeseries:
    buckets: tuple[Bucket, ...] = wire()


@wire_type(required=())
@dataclass(frozen=True)
class SpoolHealth:
    pending: bool = wire()
    bytes: int = wire()
    full: bool = wire()
    dead_letters: int = wire("deadLetters")
    dead_letter_file: str | None = wire("deadLetterFile")


@wire_type(required=("ok", "database"))
@dataclass(frozen=True)
class Health:
    ok: bool = wire()
    database: str = wire()
    learner: str = wire()
    error: str = wire()
    spool: SpoolHealth = wire()


@wire_type(required=("tokenBudget", "recall", "recallLow", "recallHigh", "tokenSavingsPercent"))
@dataclass(frozen=True)
class ProjectedSetting:
    """One setting of a projection (engine.projection_report.SettingProjection.to_json)."""

    token_budget: int = wire("tokenBudget")
    recall: float = wire()
    recall_low: float = wire("recallLow")
    recall_high: float = wire("recallHigh")
    prompt_cost_savings_percent: float | None = wire("promptCostSavingsPercent")
    cost_low: float | None = wire("costLow")
    cost_high: float | None = wire("costHigh")
    token_savings_percent: float = wire("tokenSavingsPercent")
    tokens_low: float = wire("tokensLow")
    tokens_high: float = wire("tokensHigh")
    current: bool = wire()


@wire_type(required=("runs", "sessions", "settings", "suggested"))
@dataclass(frozen=True)
class Projection:
    runs: int = wire()
    sessions: int = wire()
    settings: tuple[ProjectedSetting, ...] = wire()
    suggested: ProjectedSetting | None = wire(
        doc="the least-cost setting keeping 95% of the components used"
    )
    left_out: Mapping[str, int] = wire("leftOut", doc="runs read but not replayed, by why")


@wire_type(required=("phase",))
@dataclass(frozen=True)
class PhaseView:
    phase: str = wire(enum=PHASES)
    projection: Projection = wire()
    reason: str = wire(
        doc="why there is no projection (too few runs recorded with every component, ...)"
    )
    projected_at_switch: Mapping[str, Any] | None = wire(
        "projectedAtSwitch",
        doc="active: the projection kept when the learner went active (its setting's "
        "figures, with the runs it was made from and when), to set beside what status "
        "measures now",
    )


@wire_type(required=("learners",))
@dataclass(frozen=True)
class Learners:
    learners: tuple[str, ...] = wire()
