"""Run reports and arm lists as a request body sends them (the wire types of
`engine.wire.runs`), read and written: `report_from_json` / `report_to_json` and
`arm_from_json` / `arms_from_json`, each field checked against `engine.bounds`. Either key
style is read (camelCase as sent, or the Python names). A module of its own: what reads a
stored run (`engine.records`, a status) needs none of it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from learning_bot.engine.arms import Arm
from learning_bot.engine.bounds import (
    MAX_TOKEN_COST,
    check_count,
)
from learning_bot.engine.errors import InvalidInput
from learning_bot.engine.observation import MAX_ARMS_PER_RUN, ReportedArm, RunReport, ToolCall
from learning_bot.engine.records import checked_flag, pick
from learning_bot.engine.usage import Usage
from learning_bot.engine.wire import runs as wire
from learning_bot.engine.wire.declare import json_names, sent_fields

# -- reports and arm lists sent as JSON -----------------------------------------------------------

# The JSON names of the bodies read below, from their wire types (engine.wire): a body may
# also give each field its Python (snake_case) name.
_R = json_names(wire.RunReport)
_U = json_names(wire.Usage)
_A = json_names(wire.ArmSpec)
_ARM_ID, _TOKEN_COST, _LABEL, _CONTENT = _A["arm_id"], _A["token_cost"], _A["label"], _A["content"]
_INCLUDED, _DESCRIPTION, _LOADED = _A["included"], _A["description"], _A["loaded"]
_REPORT_TEXTS = tuple(
    (f.py, f.json) for f in sent_fields(wire.RunReport) if f.type is str and f.default == ""
)
"""The report's text fields a body may leave out (run id, session, channel...)."""

_ARM_CACHE: dict[tuple[str, int, str, str | None, str | None], Arm] = {}
_ARM_CACHE_SIZE = 8192


def arm_from_json(data: Any, where: str = "arms[]") -> ReportedArm:
    """{armId, tokenCost, label?, content?, included?, loaded?} -> ReportedArm (either key
    style). `loaded`: a deferred arm the model loaded through tool search.

    Inventories repeat request after request, so an arm already validated is taken from a
    cache of Arm objects (they are immutable)."""
    if not isinstance(data, Mapping):
        raise InvalidInput(f"{where} must be an object")
    arm_id = pick(data, _ARM_ID, "arm_id")
    cost = pick(data, _TOKEN_COST, "token_cost", 0)
    label = data.get(_LABEL, "")
    content = data.get(_CONTENT)
    description = data.get(_DESCRIPTION)
    included = data.get(_INCLUDED, True)
    if not isinstance(included, bool):
        raise InvalidInput(f"{where}.{_INCLUDED} must be true or false")
    loaded = data.get(_LOADED, False)
    if not isinstance(loaded, bool):
        raise InvalidInput(f"{where}.{_LOADED} must be true or false")
    plain = type(arm_id) is str and type(cost) is int and type(label) is str
    described = description is None or type(description) is str
    if plain and described and (content is None or type(content) is str):
        key = (arm_id, cost, label, content, description)
        arm = _ARM_CACHE.get(key)
        if arm is None:
            arm = _new_arm(where, arm_id, cost, label, content, description)
            if len(_ARM_CACHE) >= _ARM_CACHE_SIZE:
                _ARM_CACHE.clear()
            _ARM_CACHE[key] = arm
        return ReportedArm(arm, included, loaded)
    if not isinstance(arm_id, str):
        raise InvalidInput(f"{where}.{_ARM_ID} (string) is required")
    if not isinstance(label, str):
        raise InvalidInput(f"{where}.{_LABEL} must be a string")
    if content is not None and not isinstance(content, str):
        raise InvalidInput(f"{where}.{_CONTENT} must be a string")
    if description is not None and not isinstance(description, str):
        raise InvalidInput(f"{where}.{_DESCRIPTION} must be a string")
    arm = _new_arm(where, arm_id, cost, label, content, description)
    return ReportedArm(arm, included, loaded)


def _new_arm(
    where: str, arm_id: str, cost: Any, label: str, content: str | None, description: str | None
) -> Arm:
    try:
        cost = check_count(f"{where}.{_TOKEN_COST}", cost, MAX_TOKEN_COST)
        return Arm(arm_id, cost, label, content, description)
    except InvalidInput as exc:
        message = str(exc)
        raise type(exc)(message if message.startswith(where) else f"{where}: {message}") from None


def arms_from_json(data: Any, name: str = "arms") -> list[Arm]:
    """[{armId, tokenCost, label?, content?}, ...] -> [Arm] (the select body's inventory)."""
    if not isinstance(data, list):
        raise InvalidInput(f"{name} (array) is required")
    if len(data) > MAX_ARMS_PER_RUN:
        raise InvalidInput(f"{name}: at most {MAX_ARMS_PER_RUN} arms")
    return [arm_from_json(item, f"{name}[{i}]").arm for i, item in enumerate(data)]


def _tool_call(i: int, call: Any) -> ToolCall:
    """{name, meta?, arm?} (or a name) -> ToolCall; `arm` names the arm called."""
    if isinstance(call, str):
        return ToolCall(call)
    if not isinstance(call, Mapping) or not isinstance(call.get("name"), str):
        raise InvalidInput(f"toolCalls[{i}].name (string) is required")
    arm = call.get("arm")
    if arm is not None and not isinstance(arm, str):
        raise InvalidInput(f"toolCalls[{i}].arm must be an arm id (string)")
    try:
        return ToolCall(call["name"], call.get("meta"), arm)
    except InvalidInput as exc:
        raise InvalidInput(f"toolCalls[{i}]: {exc}") from None


def report_from_json(data: Any) -> RunReport:
    """A run report sent as JSON (the wire type `RunReport`, by its JSON names or its
    snake_case ones) -> RunReport. Types are converted here; `RunReport` and the values it is
    built from check the bounds."""
    if not isinstance(data, Mapping):
        raise InvalidInput("the body must be a JSON object")
    trace_id = pick(data, _R["trace_id"], "trace_id")
    if not isinstance(trace_id, str) or not trace_id:
        raise InvalidInput(f"{_R['trace_id']} (string) is required")
    raw_arms = data.get(_R["arms"])
    if not isinstance(raw_arms, list) or not raw_arms:
        raise InvalidInput(f"{_R['arms']} (non-empty array) is required")
    if len(raw_arms) > MAX_ARMS_PER_RUN:
        raise InvalidInput(f"{_R['arms']}: at most {MAX_ARMS_PER_RUN} per run")
    texts = pick(data, _R["assistant_texts"], "assistant_texts", [])
    if not isinstance(texts, list) or any(not isinstance(t, str) for t in texts):
        raise InvalidInput(f"{_R['assistant_texts']} must be an array of strings")
    raw_calls = pick(data, _R["tool_calls"], "tool_calls", [])
    if not isinstance(raw_calls, list):
        raise InvalidInput(f"{_R['tool_calls']} must be an array")
    raw_usage = data.get(_R["usage"]) or {}
    if not isinstance(raw_usage, Mapping):
        raise InvalidInput(f"{_R['usage']} must be an object")
    total = raw_usage.get(_U["total"])
    usage = Usage(
        raw_usage.get(_U["input"], 0),
        raw_usage.get(_U["output"], 0),
        pick(raw_usage, _U["cache_read"], "cache_read", 0),
        -1 if total is None else total,
        pick(raw_usage, _U["cache_write"], "cache_write", 0),
    )
    context = data.get(_R["context"]) or {}
    if not isinstance(context, Mapping):
        raise InvalidInput(f"{_R['context']} must be an object")
    kwargs: dict[str, Any] = {}
    if data.get(_R["timestamp"]) is not None:
        kwargs["timestamp"] = data[_R["timestamp"]]
    strings = {py: pick(data, name, py, "") for py, name in _REPORT_TEXTS}
    return RunReport(
        trace_id=trace_id,
        arms=tuple(arm_from_json(a, f"{_R['arms']}[{i}]") for i, a in enumerate(raw_arms)),
        assistant_texts=tuple(texts),
        tool_calls=tuple(_tool_call(i, c) for i, c in enumerate(raw_calls)),
        usage=usage,
        is_baseline=checked_flag(
            _R["is_baseline"], pick(data, _R["is_baseline"], "is_baseline", False)
        ),
        duration_ms=pick(data, _R["duration_ms"], "duration_ms", 0),
        system_prompt_chars=pick(data, _R["system_prompt_chars"], "system_prompt_chars", 0),
        aborted=checked_flag(_R["aborted"], data.get(_R["aborted"], False)),
        error=data.get(_R["error"]),
        context=dict(context),
        **strings,
        **kwargs,
    )


def report_to_json(report: RunReport) -> dict[str, Any]:
    """The inverse of `report_from_json`: a report as an observe body (HTTP clients)."""
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
                **({"loaded": True} if item.loaded else {}),
            }
            for item in report.arms
        ],
        "assistantTexts": list(report.assistant_texts),
        "toolCalls": [
            {
                "name": c.name,
                "meta": dict(c.meta) if isinstance(c.meta, Mapping) else c.meta,
                **({"arm": c.arm} if c.arm is not None else {}),
            }
            for c in report.tool_calls
        ],
        "usage": report.usage.to_dict(),
        "durationMs": report.duration_ms,
        "systemPromptChars": report.system_prompt_chars,
        "aborted": report.aborted,
        "error": report.error,
        "context": dict(report.context),
    }
