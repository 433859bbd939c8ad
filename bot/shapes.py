"""The JSON shapes of the learning layer's answers, with the original camelCase field names
(the wire types of engine.wire; README, "HTTP API"). Every surface that speaks JSON (HTTP,
MCP, exports, reply data) uses these; the engine's results stay plain data."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING, Any

from learning_bot.bot.replies import (
    Action,
    Actions,
    Column,
    CompactList,
    CompactStatus,
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
from learning_bot.engine.posterior import Confidence

if TYPE_CHECKING:
    from learning_bot.bot.replies import (
        Block,
        Explanation,
    )
    from learning_bot.engine.config import LearningConfig
    from learning_bot.engine.records import RunRecord
    from learning_bot.engine.results import ObserveResult
    from learning_bot.engine.savings import CostSavings
    from learning_bot.engine.selection import Selection
    from learning_bot.engine.session_sets import SessionDecisions
    from learning_bot.engine.store_records import TimeBucket
    from learning_bot.engine.views import ArmView, Summary
    from learning_bot.engine.wire import reports


@cache
def _encoder(wire_type: type) -> Callable[[Any], dict[str, Any]]:
    """The JSON writer of a wire type, made once. The wire types and their declarations are
    imported where a shape is built: `learning-bot status` in a terminal builds none."""
    from learning_bot.engine.wire.declare import answer_encoder

    return answer_encoder(wire_type)


_ORIGINAL_CONFIDENCE = {
    Confidence.NONE: "low",
    Confidence.LOW: "low",
    Confidence.MEDIUM: "medium",
    Confidence.HIGH: "high",
    Confidence.VERY_HIGH: "high",
}
"""The original learning layer's three confidence values (low under 5 pulls, medium under 20,
high from 20): its clients know only these."""


def _posterior(view: ArmView) -> dict[str, Any]:
    """The fields of the wire type `Posterior` for an arm (by their Python names)."""
    from learning_bot.engine.wire import reports

    low, high = view.interval
    p = view.posterior
    return {
        "arm_id": view.arm_id,
        "alpha": p.alpha,
        "beta": p.beta,
        "mean": p.mean,
        "pulls": p.pulls,
        "last_updated": p.last_updated,
        "is_seed": view.is_seed,
        "is_underexplored": view.is_underexplored,
        "credible_interval": reports.CredibleInterval(low, high),
        "confidence": _ORIGINAL_CONFIDENCE[p.confidence],
        "confidence_band": p.confidence.value,
    }


def arm_json(view: ArmView) -> dict[str, Any]:
    """A posterior as `GET posteriors` lists it (the wire type `Posterior`)."""
    from learning_bot.engine.wire import reports

    return _encoder(reports.Posterior)(reports.Posterior(**_posterior(view)))


def _explanation(explanation: Explanation, pulls: float) -> reports.Explanation:
    from learning_bot.engine.wire import reports

    lifts, deferred, loaded = explanation
    return reports.Explanation(
        depends_on=tuple(
            reports.Dependence(
                feature=lift.feature,
                rate_with=lift.rate_with,
                runs_with=lift.runs_with,
                rate_without=lift.rate_without,
                runs_without=(
                    max(pulls - lift.runs_with, 0.0) if lift.rate_without is not None else None
                ),
                text=depends_on_text(lift),
            )
            for lift in lifts
        ),
        deferred=deferred,
        loaded=loaded,
        deferred_text=deferred_text(deferred, loaded),
    )


def explanation_json(explanation: Explanation, pulls: float) -> dict[str, Any]:
    """What an arm's usefulness depends on and how often it was deferred, then loaded
    (`LearningService.context_explanation`; `pulls`: the arm's runs), each with the words
    `status arm` shows for it (the wire type `Explanation`)."""
    from learning_bot.engine.wire import reports

    return _encoder(reports.Explanation)(_explanation(explanation, pulls))


def arm_detail_json(view: ArmView, explanation: Explanation) -> dict[str, Any]:
    """One arm as `GET arms/{armId}` answers it: its posterior as `GET posteriors` lists it,
    with its explanation (the wire type `ArmDetail`)."""
    from learning_bot.engine.wire import reports

    detail = _explanation(explanation, view.posterior.pulls)
    return _encoder(reports.ArmDetail)(reports.ArmDetail(**_posterior(view), explanation=detail))


def cost_savings_json(savings: CostSavings) -> dict[str, Any]:
    """The measured prompt-cost saving: percent with its 95% interval and the sessions behind
    it, or the reason it cannot be measured (percent null)."""
    from learning_bot.engine.wire import reports

    return _encoder(reports.CostSavings)(savings)


def session_decisions_json(d: SessionDecisions) -> dict[str, Any]:
    """What the learner's sessions of the last day did with their sets."""
    from learning_bot.engine.wire import reports

    reasons = tuple(reports.RedrawReason(reason, n) for reason, n in d.by_reason)
    decisions = reports.SessionDecisions(d.sessions, d.redrawn, d.redraws, reasons, d.grown)
    return _encoder(reports.SessionDecisions)(decisions)


def summary_json(summary: Summary) -> dict[str, Any]:
    """`GET summary` (the wire type `Summary`)."""
    from learning_bot.engine.wire import reports

    cost = summary.prompt_cost_savings
    decisions = summary.session_decisions
    return _encoder(reports.Summary)(
        reports.Summary(
            trace_count=summary.trace_count,
            arm_count=summary.arm_count,
            min_timestamp=summary.min_timestamp,
            max_timestamp=summary.max_timestamp,
            total_tokens=summary.total_tokens,
            prompt_cost_savings_percent=cost.percent if cost is not None else None,
            prompt_cost_savings=None if cost is None else cost_savings_json(cost),
            prompt_savings_percent=summary.prompt_savings_percent,
            offered_avg_tokens=summary.offered_avg_tokens,
            selected_prompt_avg_tokens=summary.selected_prompt_avg_tokens,
            estimated_recall=summary.estimated_recall,
            sessions=None if decisions is None else session_decisions_json(decisions),
            accuracy=summary.accuracy,
            explore_ratio=summary.explore_ratio,
            total_reward=summary.total_reward,
            baseline=_encoder(reports.BaselineSplit)(summary),
        )
    )


def config_json(config: LearningConfig) -> dict[str, Any]:
    """`GET config`: the learner's settings (README, "Configuration"), `policy` and
    `halfLife` always (so the answer says which selection policy runs and how it forgets),
    the options a policy sets only when they differ from what it sets."""
    data = config.to_dict()
    data.pop("metaTools", None)
    data.setdefault("policy", config.policy)
    data.setdefault("halfLife", config.half_life)
    return data


def selection_json(selection: Selection) -> dict[str, Any]:
    """`POST select`'s answer (the wire type `Selection`)."""
    from learning_bot.engine.wire.runs import Selection

    return _encoder(Selection)(selection)


def observe_json(result: ObserveResult) -> dict[str, Any]:
    """`POST observe`'s answer for one run (the wire type `ObserveResult`)."""
    from learning_bot.engine.wire.runs import ObserveResult

    return _encoder(ObserveResult)(result)


def trace_json(record: RunRecord) -> dict[str, Any]:
    """A trace as `GET traces` and exports show it."""
    from learning_bot.engine.records import record_to_json

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
