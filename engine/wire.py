"""JSON shapes with the original camelCase field names (SPEC sections 9 and 10), both ways."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from engine.arms import Arm
from engine.errors import InvalidInput
from engine.observation import ReportedArm, RunReport, ToolCall, Usage
from engine.ports import StoredTrace


def trace_to_dict(trace: StoredTrace) -> dict[str, Any]:
    return {
        "traceId": trace.trace_id,
        "runId": trace.run_id,
        "sessionId": trace.session_id,
        "sessionKey": trace.session_key,
        "timestamp": trace.timestamp,
        "provider": trace.provider,
        "model": trace.model,
        "channel": trace.channel,
        "isBaseline": trace.is_baseline,
        "context": dict(trace.context),
        "arms": [
            {
                "armId": a.arm_id,
                "included": a.included,
                "referenced": a.referenced,
                "tokenCost": a.token_cost,
            }
            for a in trace.arms
        ],
        "usage": trace.usage.to_dict(),
        "durationMs": trace.duration_ms,
        "systemPromptChars": trace.system_prompt_chars,
        "aborted": trace.aborted,
        "error": trace.error,
    }


def _get(data: Mapping[str, Any], camel: str, snake: str, default: Any = None) -> Any:
    if camel in data:
        return data[camel]
    return data.get(snake, default)


def _field(data: Mapping[str, Any], camel: str, snake: str, kind: type, default: Any) -> Any:
    value = _get(data, camel, snake, default)
    if value is None and default is None:
        return None
    if kind is int:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InvalidInput(f"{camel} must be a whole number")
        if isinstance(value, float) and (not math.isfinite(value) or not value.is_integer()):
            raise InvalidInput(f"{camel} must be a whole number")
        return int(value)
    if not isinstance(value, kind):
        raise InvalidInput(f"{camel} must be a {kind.__name__}")
    return value


_ARM_CACHE: dict[tuple[str, int, str, str | None], Arm] = {}
_ARM_CACHE_SIZE = 8192


def arm_from_dict(data: Any, where: str = "arms[]") -> ReportedArm:
    """{armId, tokenCost, label?, content?, included?} -> ReportedArm.

    Inventories repeat request after request, so a well-formed arm is looked up in a cache of
    Arm objects (they are immutable); anything unusual takes the validating path."""
    if type(data) is dict:
        arm_id = data.get("armId", data.get("arm_id"))
        cost = data.get("tokenCost", data.get("token_cost", 0))
        label = data.get("label", "")
        content = data.get("content")
        included = data.get("included", True)
        if (
            type(arm_id) is str
            and type(cost) is int
            and type(label) is str
            and (content is None or type(content) is str)
            and type(included) is bool
        ):
            key = (arm_id, cost, label, content)
            arm = _ARM_CACHE.get(key)
            if arm is None:
                arm = _validated_arm(data, where)
                if len(_ARM_CACHE) >= _ARM_CACHE_SIZE:
                    _ARM_CACHE.clear()
                _ARM_CACHE[key] = arm
            return ReportedArm(arm, included)
    arm = _validated_arm(data, where)
    included = data.get("included", True)
    if not isinstance(included, bool):
        raise InvalidInput(f"{where}.included must be true or false")
    return ReportedArm(arm, included)


def _validated_arm(data: Any, where: str) -> Arm:
    if not isinstance(data, Mapping):
        raise InvalidInput(f"{where} must be an object")
    arm_id = _get(data, "armId", "arm_id")
    if not isinstance(arm_id, str):
        raise InvalidInput(f"{where}.armId (string) is required")
    cost = _field(data, "tokenCost", "token_cost", int, 0)
    label = _field(data, "label", "label", str, "")
    content = _get(data, "content", "content")
    if content is not None and not isinstance(content, str):
        raise InvalidInput(f"{where}.content must be a string")
    included = _get(data, "included", "included", True)
    if not isinstance(included, bool):
        raise InvalidInput(f"{where}.included must be true or false")
    try:
        return Arm(arm_id, cost, label=label, content=content)
    except InvalidInput as exc:
        raise InvalidInput(f"{where}: {exc}") from None


def arms_from_list(data: Any, name: str = "arms") -> list[Arm]:
    """[{armId, tokenCost, label?, content?}, ...] -> [Arm] (for select requests)."""
    if not isinstance(data, list):
        raise InvalidInput(f"{name} (array) is required")
    return [arm_from_dict(item, f"{name}[{i}]").arm for i, item in enumerate(data)]


def report_from_dict(data: Any) -> RunReport:
    """A run report sent as JSON (camelCase or snake_case keys) -> RunReport."""
    if not isinstance(data, Mapping):
        raise InvalidInput("the body must be a JSON object")
    trace_id = _get(data, "traceId", "trace_id")
    if not isinstance(trace_id, str) or not trace_id:
        raise InvalidInput("traceId (string) is required")
    raw_arms = data.get("arms")
    if not isinstance(raw_arms, list) or not raw_arms:
        raise InvalidInput("arms (non-empty array) is required")
    arms = tuple(arm_from_dict(a, f"arms[{i}]") for i, a in enumerate(raw_arms))
    texts = _get(data, "assistantTexts", "assistant_texts", [])
    if not isinstance(texts, list) or any(not isinstance(t, str) for t in texts):
        raise InvalidInput("assistantTexts must be an array of strings")
    raw_calls = _get(data, "toolCalls", "tool_calls", [])
    if not isinstance(raw_calls, list):
        raise InvalidInput("toolCalls must be an array")
    calls = []
    for i, call in enumerate(raw_calls):
        if isinstance(call, str):
            calls.append(ToolCall(call))
            continue
        if not isinstance(call, Mapping) or not isinstance(call.get("name"), str):
            raise InvalidInput(f"toolCalls[{i}].name (string) is required")
        meta = call.get("meta")
        if meta is not None and not isinstance(meta, (str, Mapping)):
            raise InvalidInput(f"toolCalls[{i}].meta must be an object or a string")
        try:
            calls.append(ToolCall(call["name"], meta))
        except InvalidInput as exc:
            raise InvalidInput(f"toolCalls[{i}]: {exc}") from None
    raw_usage = data.get("usage") or {}
    if not isinstance(raw_usage, Mapping):
        raise InvalidInput("usage must be an object")
    usage = Usage(
        input=_field(raw_usage, "input", "input", int, 0),
        output=_field(raw_usage, "output", "output", int, 0),
        cache_read=_field(raw_usage, "cacheRead", "cache_read", int, 0),
        total=_field(raw_usage, "total", "total", int, -1),
    )
    context = data.get("context") or {}
    if not isinstance(context, Mapping):
        raise InvalidInput("context must be an object")
    kwargs: dict[str, Any] = {}
    timestamp = data.get("timestamp")
    if timestamp is not None:
        kwargs["timestamp"] = _field(data, "timestamp", "timestamp", int, 0)
    error = data.get("error")
    if error is not None and not isinstance(error, str):
        raise InvalidInput("error must be a string or null")
    return RunReport(
        trace_id=trace_id,
        arms=arms,
        run_id=_field(data, "runId", "run_id", str, ""),
        session_id=_field(data, "sessionId", "session_id", str, ""),
        session_key=_field(data, "sessionKey", "session_key", str, ""),
        channel=_field(data, "channel", "channel", str, ""),
        provider=_field(data, "provider", "provider", str, ""),
        model=_field(data, "model", "model", str, ""),
        is_baseline=_field(data, "isBaseline", "is_baseline", bool, False),
        assistant_texts=tuple(texts),
        tool_calls=tuple(calls),
        usage=usage,
        duration_ms=_field(data, "durationMs", "duration_ms", int, 0),
        system_prompt_chars=_field(data, "systemPromptChars", "system_prompt_chars", int, 0),
        aborted=_field(data, "aborted", "aborted", bool, False),
        error=error,
        context=dict(context),
        conversation=_field(data, "conversation", "conversation", str, ""),
        **kwargs,
    )


def report_to_dict(report: RunReport) -> dict[str, Any]:
    """The inverse of report_from_dict (used to spool reports and to send them over HTTP)."""
    return {
        "traceId": report.trace_id,
        "runId": report.run_id,
        "sessionId": report.session_id,
        "sessionKey": report.session_key,
        "channel": report.channel,
        "conversation": report.conversation,
        "timestamp": report.timestamp,
        "provider": report.provider,
        "model": report.model,
        "isBaseline": report.is_baseline,
        "arms": [
            {
                "armId": item.arm.id,
                "tokenCost": item.arm.token_cost,
                "label": item.arm.label,
                "content": item.arm.content,
                "included": item.included,
            }
            for item in report.arms
        ],
        "assistantTexts": list(report.assistant_texts),
        "toolCalls": [
            {"name": c.name, "meta": dict(c.meta) if isinstance(c.meta, Mapping) else c.meta}
            for c in report.tool_calls
        ],
        "usage": report.usage.to_dict(),
        "durationMs": report.duration_ms,
        "systemPromptChars": report.system_prompt_chars,
        "aborted": report.aborted,
        "error": report.error,
        "context": dict(report.context),
    }
