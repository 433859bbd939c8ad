"""The JSON shapes of the learning layer's answers, with the original camelCase field names
(SPEC sections 9 and 10). Every surface that speaks JSON (HTTP, MCP, exports, reply data)
uses these; the engine's results stay plain data."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from learning_bot.bot.replies import (
    Action,
    Actions,
    Block,
    Column,
    CompactList,
    CompactStatus,
    Explanation,
    Fields,
    Heading,
    Reply,
    ReplyKind,
    Table,
    Text,
    Visibility,
    deferred_text,
    depends_on_text,
)
from learning_bot.engine.config import LearningConfig
from learning_bot.engine.ports import TimeBucket
from learning_bot.engine.posterior import Confidence
from learning_bot.engine.records import RunRecord, record_to_json
from learning_bot.engine.savings import CostSavings
from learning_bot.engine.session_sets import SessionDecisions
from learning_bot.engine.views import ArmView, ObserveResult, Summary

if TYPE_CHECKING:
    from learning_bot.engine.selection import Selection

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


def explanation_json(explanation: Explanation, pulls: float) -> dict[str, Any]:
    """What an arm's usefulness depends on and how often it was deferred, then loaded
    (`LearningService.context_explanation`; `pulls`: the arm's runs), each with the words
    `status arm` shows for it."""
    lifts, deferred, loaded = explanation
    return {
        "dependsOn": [
            {
                "feature": lift.feature,
                "rateWith": lift.rate_with,
                "runsWith": lift.runs_with,
                "rateWithout": lift.rate_without,
                "runsWithout": (
                    max(pulls - lift.runs_with, 0.0) if lift.rate_without is not None else None
                ),
                "text": depends_on_text(lift),
            }
            for lift in lifts
        ],
        "deferred": deferred,
        "loaded": loaded,
        "deferredText": deferred_text(deferred, loaded),
    }


def arm_detail_json(view: ArmView, explanation: Explanation) -> dict[str, Any]:
    """One arm as `GET arms/{armId}` answers it: its posterior as `GET posteriors` lists it,
    with its explanation."""
    return {**arm_json(view), "explanation": explanation_json(explanation, view.posterior.pulls)}


def cost_savings_json(cost: CostSavings) -> dict[str, Any]:
    """The measured prompt-cost saving: percent with its 95% interval and the sessions behind
    it, or the reason it cannot be measured (percent null)."""
    return {
        "percent": cost.percent,
        "low": cost.low,
        "high": cost.high,
        "sessions": cost.sessions,
        "selectedSessions": cost.selected_sessions,
        "baselineSessions": cost.baseline_sessions,
        "selectedCostPerRun": cost.selected_cost_per_run,
        "baselineCostPerRun": cost.baseline_cost_per_run,
        "reason": cost.reason,
    }


def session_decisions_json(d: SessionDecisions) -> dict[str, Any]:
    """What the learner's sessions of the last day did with their sets."""
    return {
        "sessions": d.sessions,
        "redrawn": d.redrawn,
        "redraws": d.redraws,
        "byReason": [{"reason": reason, "sessions": n} for reason, n in d.by_reason],
        "grown": d.grown,
    }


def summary_json(summary: Summary) -> dict[str, Any]:
    """`GET summary`."""
    cost = summary.prompt_cost_savings
    decisions = summary.session_decisions
    return {
        "traceCount": summary.trace_count,
        "armCount": summary.arm_count,
        "minTimestamp": summary.min_timestamp,
        "maxTimestamp": summary.max_timestamp,
        "totalTokens": summary.total_tokens,
        "promptCostSavingsPercent": cost.percent if cost is not None else None,
        "promptCostSavings": None if cost is None else cost_savings_json(cost),
        "promptSavingsPercent": summary.prompt_savings_percent,
        "offeredAvgTokens": summary.offered_avg_tokens,
        "selectedPromptAvgTokens": summary.selected_prompt_avg_tokens,
        "estimatedRecall": summary.estimated_recall,
        "sessions": None if decisions is None else session_decisions_json(decisions),
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
        "deferred": list(selection.deferred),
        "isBaseline": selection.is_baseline,
        "tokenBudget": selection.token_budget,
        "usedTokens": selection.used_tokens,
        "overBudget": selection.over_budget,
        "fallback": selection.fallback,
        "guidance": selection.guidance,
        "added": list(selection.added),
        "session": selection.session,
        "sessionReason": selection.session_reason or None,
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
        "ambiguous": {name: list(ids) for name, ids in result.ambiguous.items()},
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
    if bucket.group is not None:
        item["group"] = bucket.group
        item["sessions"] = bucket.count
    return item


# -- replies ---------------------------------------------------------------------------------


def reply_json(reply: Reply) -> dict[str, Any]:
    """A reply as the HTTP surface sends it, the bus stores it and `--url` reads it."""
    return {
        "kind": reply.kind.value,
        "summary": reply.summary,
        "visibility": reply.visibility.value,
        "blocks": [block_json(b) for b in reply.blocks],
        "data": reply_data_json(reply),
    }


def reply_data_json(reply: Reply) -> dict[str, Any]:
    """A reply's machine-readable details (what `--json` prints): its data, then its typed
    fields under their wire names."""
    data = dict(reply.data)
    if reply.usage is not None:
        data["usage"] = list(reply.usage)
    if reply.detail is not None:
        data["detail"] = reply.detail
    if reply.dashboard_url is not None:
        data["dashboardUrl"] = reply.dashboard_url
    if reply.compact is not None:
        data["compact"] = compact_json(reply.compact)
    if reply.cancelled:
        data["cancelled"] = True
    if reply.replaces_prompt:
        data["replacesPrompt"] = True
    if reply.confirmed_by is not None:
        data["by"] = reply.confirmed_by
    if reply.arm_names is not None:
        data["arms"] = [list(pair) for pair in reply.arm_names]
    return data


def reply_from_json(data: dict[str, Any]) -> Reply:
    """reply_json read back. A detail not of its typed shape stays in `data` as it came."""
    details = dict(data.get("data") or {})
    usage = _take(details, "usage", _strings)
    compact = _compact_from_json(details.get("compact"))
    if compact is not None:
        del details["compact"]
    replaces = _take(details, "replacesPrompt", _true) is True
    by = _take(details, "by", _string) if replaces else None
    detail = _take(details, "detail", _string)
    link = _take(details, "dashboardUrl", _string)
    cancelled = _take(details, "cancelled", _true) is True
    names = _take(details, "arms", _name_pairs)
    return Reply(
        kind=ReplyKind(data["kind"]),
        blocks=tuple(block_from_json(b) for b in data["blocks"]),
        summary=data["summary"],
        visibility=Visibility(data["visibility"]),
        data=details,
        usage=None if usage is None else tuple(usage),
        detail=detail,
        dashboard_url=link,
        compact=compact,
        cancelled=cancelled,
        replaces_prompt=replaces,
        confirmed_by=by,
        arm_names=None if names is None else tuple((a, b) for a, b in names),
    )


def _take(details: dict[str, Any], key: str, fits: Callable[[object], bool]) -> Any:
    """details[key], taken out of them, when it fits its typed field; else None."""
    return details.pop(key) if key in details and fits(details[key]) else None


def _string(value: object) -> bool:
    return isinstance(value, str)


def _true(value: object) -> bool:
    return value is True


def _name_pairs(value: object) -> bool:
    """(arm id, label) pairs; not an empty list, which may be a reward's arms (arm_json)."""
    return isinstance(value, list) and bool(value) and all(_strings(pair, 2) for pair in value)


def compact_json(compact: CompactStatus) -> dict[str, Any]:
    """A compact status under `data.compact`."""
    return {
        "headline": [list(pair) for pair in compact.headline],
        "lists": [
            {"title": entry.title, "items": [list(pair) for pair in entry.items]}
            for entry in compact.lists
        ],
        "more": compact.more,
    }


def _compact_from_json(value: object) -> CompactStatus | None:
    """compact_json read back; None when the value is not of its shape."""
    if not isinstance(value, dict) or set(value) != {"headline", "lists", "more"}:
        return None
    headline, lists, more = value["headline"], value["lists"], value["more"]
    if not (
        isinstance(headline, list)
        and all(_strings(pair, 2) for pair in headline)
        and isinstance(lists, list)
        and all(
            isinstance(entry, dict)
            and set(entry) == {"title", "items"}
            and isinstance(entry["title"], str)
            and isinstance(entry["items"], list)
            and all(_strings(pair, 2) for pair in entry["items"])
            for entry in lists
        )
        and isinstance(more, str)
    ):
        return None
    return CompactStatus(
        tuple((k, v) for k, v in headline),
        tuple(
            CompactList(entry["title"], tuple((k, v) for k, v in entry["items"])) for entry in lists
        ),
        more,
    )


def _strings(value: object, count: int | None = None) -> bool:
    """A list of strings (of `count` of them, when given)."""
    return (
        isinstance(value, list)
        and (count is None or len(value) == count)
        and all(isinstance(item, str) for item in value)
    )


def block_json(block: Block) -> dict[str, Any]:
    if isinstance(block, Heading):
        return {"type": "heading", "text": block.text, "badge": block.badge}
    if isinstance(block, Text):
        return {"type": "text", "text": block.text, "muted": block.muted}
    if isinstance(block, Fields):
        return {"type": "fields", "items": [list(i) for i in block.items]}
    if isinstance(block, Table):
        return {
            "type": "table",
            "title": block.title,
            "columns": [{"name": c.name, "align": c.align} for c in block.columns],
            "rows": [list(r) for r in block.rows],
        }
    return {
        "type": "actions",
        "actions": [
            {
                "label": a.label,
                "command": a.command,
                "token": a.token,
                "style": a.style,
                "confirmText": a.confirm_text,
            }
            for a in block.actions
        ],
    }


def block_from_json(data: dict[str, Any]) -> Block:
    kind = data["type"]
    if kind == "heading":
        return Heading(data["text"], data.get("badge"))
    if kind == "text":
        return Text(data["text"], bool(data.get("muted")))
    if kind == "fields":
        return Fields(tuple((str(k), str(v)) for k, v in data["items"]))
    if kind == "table":
        return Table(
            tuple(Column(c["name"], c["align"]) for c in data["columns"]),
            tuple(tuple(str(x) for x in r) for r in data["rows"]),
            data.get("title"),
        )
    return Actions(
        tuple(
            Action(a["label"], a["command"], a["token"], a["style"], a.get("confirmText"))
            for a in data["actions"]
        )
    )
