"""The JSON shapes of the learning layer's answers, with the original camelCase field names
(SPEC sections 9 and 10). Every surface that speaks JSON (HTTP, MCP, exports, reply data)
uses these; the engine's results stay plain data."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.config import LearningConfig
from engine.ports import TimeBucket
from engine.posterior import Confidence
from engine.records import RunRecord, record_to_json
from engine.views import ArmView, ObserveResult, Summary

if TYPE_CHECKING:
    from engine.selection import Selection

_ORIGINAL_CONFIDENCE = {
    Confidence.NONE: "low",
    Confidence.LOW: "low",
    Confidence.MEDIUM: "medium",
    Confidence.HIGH: "high",
    Confidence.VERY_HIGH: "high",
}
"""The original learning layer's three confidence values (low under 5 pulls, medium under 20,
high from 20): its clients know only these."""


def arm_json(view: ArmView) -> dict[str, Any]:
    """A posterior as `GET posteriors` lists it."""
    low, high = view.interval
    p = view.posterior
    return {
        "armId": view.arm_id,
        "alpha": p.alpha,
        "beta": p.beta,
        "mean": p.mean,
        "pulls": p.pulls,
        "lastUpdated": p.last_updated,
        "isSeed": view.is_seed,
        "isUnderexplored": view.is_underexplored,
        "credibleInterval": {"lower": low, "upper": high},
        "confidence": _ORIGINAL_CONFIDENCE[p.confidence],
        "confidenceBand": p.confidence.value,
    }


def summary_json(summary: Summary) -> dict[str, Any]:
    """`GET summary`."""
    return {
        "traceCount": summary.trace_count,
        "armCount": summary.arm_count,
        "minTimestamp": summary.min_timestamp,
        "maxTimestamp": summary.max_timestamp,
        "totalTokens": summary.total_tokens,
        "promptSavingsPercent": summary.prompt_savings_percent,
        "offeredAvgTokens": summary.offered_avg_tokens,
        "selectedPromptAvgTokens": summary.selected_prompt_avg_tokens,
        "estimatedRecall": summary.estimated_recall,
        "accuracy": summary.accuracy,
        "exploreRatio": summary.explore_ratio,
        "totalReward": summary.total_reward,
        "baseline": {
            "baselineRuns": summary.baseline_runs,
            "selectedRuns": summary.selected_runs,
            "baselineAvgTokens": summary.baseline_avg_tokens,
            "selectedAvgTokens": summary.selected_avg_tokens,
            "tokenSavingsPercent": summary.token_savings_percent,
            "baselineAvgDuration": summary.baseline_avg_duration,
            "selectedAvgDuration": summary.selected_avg_duration,
        },
    }


def config_json(config: LearningConfig) -> dict[str, Any]:
    """`GET config`: the SPEC section 7 settings, `policy` and `halfLife` always (so the
    answer says which selection policy runs and how it forgets), the options a policy sets
    only when they differ from what it sets."""
    data = config.to_dict()
    data.pop("metaTools", None)
    data.setdefault("policy", config.policy)
    data.setdefault("halfLife", config.half_life)
    return data


def selection_json(selection: Selection) -> dict[str, Any]:
    """`POST select`'s answer."""
    return {
        "selected": list(selection.selected),
        "excluded": list(selection.excluded),
        "isBaseline": selection.is_baseline,
        "tokenBudget": selection.token_budget,
        "usedTokens": selection.used_tokens,
        "overBudget": selection.over_budget,
        "fallback": selection.fallback,
        "guidance": selection.guidance,
    }


def observe_json(result: ObserveResult) -> dict[str, Any]:
    """`POST observe`'s answer for one run."""
    return {
        "traceId": result.trace_id,
        "recorded": result.recorded,
        "duplicate": result.duplicate,
        "skipped": result.skipped.value if result.skipped else None,
        "rewards": dict(result.rewards),
        "referenced": dict(result.referenced),
        "spooled": result.spooled,
        "message": result.message,
    }


def trace_json(record: RunRecord) -> dict[str, Any]:
    """A trace as `GET traces` and exports show it."""
    return record_to_json(record, public=True)


def bucket_json(bucket: TimeBucket) -> dict[str, Any]:
    """One point of `GET timeseries`."""
    item: dict[str, Any] = {"t": bucket.t, "value": bucket.value}
    if bucket.arm_id is not None:
        item["armId"] = bucket.arm_id
    return item
