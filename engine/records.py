"""The run record: one definition of a stored run, and its one codec.

A `RunReport` is what an agent runtime reports about a run (texts, tool calls...); the
`RunRecord` is what is kept of it: the trace, each arm's outcome and the reward it applied.
The same record is written to the database, to the local spool while storage is down, read
back for status and export, and sent as JSON; this module is the only place that maps it to and
from JSON (the `traces` row is storage's, `storage.trace_rows`):

- `record_to_json` / `record_from_json`: the JSON object (the wire types `Trace` and
  `StoredTrace`); `record_from_json` checks every field against `engine.bounds`;
- `record_from_report`: the record of a report, given what observing it decided;
- `report_from_json`, `arms_from_json`: the observe and select bodies (the wire types
  `RunReport` and `ArmSpec`), checked by the constructors they build.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import cache
from typing import Any, NamedTuple

from learning_bot.engine.arms import Arm
from learning_bot.engine.bounds import (
    MAX_TOKEN_COST,
    check_count,
    check_finite,
    check_json,
    check_text,
    check_timestamp,
)
from learning_bot.engine.config import Phase
from learning_bot.engine.errors import InvalidInput
from learning_bot.engine.observation import (
    MAX_ARMS_PER_RUN,
    MAX_ERROR_CHARS,
    MAX_ID_CHARS,
    ReportedArm,
    RunOutcome,
    RunReport,
    SkipReason,
    ToolCall,
    Usage,
)
from learning_bot.engine.wire import runs as wire
from learning_bot.engine.wire.declare import answer_encoder, json_names, sent_fields


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
    """A run as it is stored and read back: the trace, its arms' outcomes and rewards."""

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

    @property
    def offered_tokens(self) -> int:
        """Tokens of every arm the runtime offered for this run."""
        return sum(a.token_cost for a in self.arms)

    @property
    def selected_tokens(self) -> int:
        """Tokens of the arms that went into the prompt."""
        return sum(a.token_cost for a in self.arms if a.included)


def record_from_report(
    report: RunReport, outcome: RunOutcome, phase: Phase, guard: SkipReason | None
) -> RunRecord:
    """The record of an observed report: its arms with what observing it decided (an arm
    loaded through tool search is recorded as included: the model had it)."""
    referenced = outcome.referenced
    rewards = outcome.rewards
    new = tuple.__new__  # the NamedTuple's own constructor is a Python function: slower
    arms = tuple(
        [
            new(
                ArmOutcomeRecord,
                (
                    (aid := (arm := item.arm).id),
                    arm.label,
                    item.included or item.loaded,
                    referenced.get(aid, False),
                    arm.token_cost,
                    rewards.get(aid),
                ),
            )
            for item in report.arms
        ]
    )
    return RunRecord(
        trace_id=report.trace_id,
        run_id=report.run_id,
        session_id=report.session_id,
        session_key=report.session_key,
        channel=report.channel,
        conversation=report.conversation,
        timestamp=report.timestamp,
        provider=report.provider,
        model=report.model,
        is_baseline=report.is_baseline,
        phase=phase,
        guard=guard,
        usage=report.usage,
        duration_ms=report.duration_ms,
        system_prompt_chars=report.system_prompt_chars,
        aborted=report.aborted,
        error=report.error,
        context=report.context,
        arms=arms,
    )


def under_phase(record: RunRecord, phase: Phase) -> RunRecord:
    """The record as observing its run under `phase` would have made it: active, each included
    arm of a run its guard lets through gets reward 1.0 when referenced, else 0.0 (what
    `rewards_for_run` gives, and what the bootstrap gives a passive run); passive, no arm gets
    a reward. Its guard was decided whatever the phase, so nothing else changes. Used for runs
    whose report is gone (spooled runs replayed, dead letters) when the learner's phase is no
    longer the one they were built under."""
    if record.phase is phase:
        return record
    if phase is Phase.ACTIVE and record.guard is None:
        arms = tuple(
            a._replace(reward=(1.0 if a.referenced else 0.0) if a.included else None)
            for a in record.arms
        )
    else:
        arms = tuple(a._replace(reward=None) for a in record.arms)
    return replace(record, phase=phase, arms=arms)


# -- JSON ---------------------------------------------------------------------------------------


def record_to_json(record: RunRecord, *, public: bool = False) -> dict[str, Any]:
    """The record as a JSON-ready object. `public` gives the trace of the HTTP API (the wire
    type `Trace`); otherwise every field is kept (`StoredTrace`: the spool), and
    `record_from_json` reads it back to an equal record."""
    trace, stored = _trace_encoders()
    return trace(record) if public else stored(record)


@cache
def _trace_encoders() -> tuple[Callable[[Any], dict[str, Any]], Callable[[Any], dict[str, Any]]]:
    """The encoders of `Trace` and `StoredTrace`, made on first use: a status read from the
    database imports the report wire types only when it sends them."""
    from learning_bot.engine.wire.reports import StoredTrace, Trace

    return answer_encoder(Trace), answer_encoder(StoredTrace)


def _pick(data: Mapping[str, Any], camel: str, snake: str, default: Any = None) -> Any:
    if camel in data:
        return data[camel]
    return data.get(snake, default)


def _identifier(name: str, value: Any, required: bool = False) -> str:
    text = check_text(name, value, MAX_ID_CHARS)
    if required and not text:
        raise InvalidInput(f"{name} is required")
    return text


def _flag(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise InvalidInput(f"{name} must be true or false")
    return value


def _usage_from_json(raw: Any) -> Usage:
    if isinstance(raw, list):  # [input, output, cacheRead, total, cacheWrite?]
        if len(raw) not in (4, 5):
            raise InvalidInput("usage must hold input, output, cacheRead, total and cacheWrite")
        names = ("input", "output", "cacheRead", "total", "cacheWrite")
        raw = dict(zip(names, raw, strict=False))
    if not isinstance(raw, Mapping):
        raise InvalidInput("usage must be an object")
    return Usage(
        check_count("usage.input", raw.get("input", 0)),
        check_count("usage.output", raw.get("output", 0)),
        check_count("usage.cacheRead", _pick(raw, "cacheRead", "cache_read", 0)),
        check_count("usage.total", raw.get("total", 0)),
        check_count("usage.cacheWrite", _pick(raw, "cacheWrite", "cache_write", 0)),
    )


def _outcome_from_json(i: int, raw: Any) -> ArmOutcomeRecord:
    where = f"arms[{i}]"
    if isinstance(raw, list):  # [armId, label, included, referenced, tokenCost, reward]
        if len(raw) != 6:
            raise InvalidInput(f"{where} must hold six values")
        raw = dict(
            zip(
                ("armId", "label", "included", "referenced", "tokenCost", "reward"),
                raw,
                strict=True,
            )
        )
    if not isinstance(raw, Mapping):
        raise InvalidInput(f"{where} must be an object")
    arm = Arm(
        _pick(raw, "armId", "arm_id"),
        check_count(f"{where}.tokenCost", _pick(raw, "tokenCost", "token_cost", 0), MAX_TOKEN_COST),
        label=raw.get("label") or "",
    )
    reward = raw.get("reward")
    if reward is not None:
        reward = check_finite(f"{where}.reward", reward)
        if not 0.0 <= reward <= 1.0:
            raise InvalidInput(f"{where}.reward must be in [0, 1]")
    return ArmOutcomeRecord(
        arm.id,
        arm.label,
        _flag(f"{where}.included", raw.get("included", True)),
        _flag(f"{where}.referenced", raw.get("referenced", False)),
        arm.token_cost,
        reward,
    )


def record_from_json(data: Any) -> RunRecord:
    """A record from its JSON object (either key style), every field checked against
    `engine.bounds`: what this returns can be stored and read back by every backend."""
    if not isinstance(data, Mapping):
        raise InvalidInput("a run record must be an object")
    raw_arms = data.get("arms")
    if not isinstance(raw_arms, list) or not raw_arms or len(raw_arms) > MAX_ARMS_PER_RUN:
        raise InvalidInput(f"arms must hold 1 to {MAX_ARMS_PER_RUN} arms")
    guard = data.get("guard")
    error = data.get("error")
    context = data.get("context") or {}
    if not isinstance(context, Mapping):
        raise InvalidInput("context must be an object")
    trace_id = _identifier("traceId", _pick(data, "traceId", "trace_id"), required=True)
    try:
        phase = Phase(data.get("phase", Phase.PASSIVE.value))
        skip = SkipReason(guard) if guard else None
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None
    return RunRecord(
        trace_id=trace_id,
        run_id=_identifier("runId", _pick(data, "runId", "run_id", "")) or trace_id,
        session_id=_identifier("sessionId", _pick(data, "sessionId", "session_id", "")),
        session_key=_identifier("sessionKey", _pick(data, "sessionKey", "session_key", "")),
        channel=_identifier("channel", data.get("channel", "")),
        conversation=_identifier("conversation", data.get("conversation", "")),
        timestamp=check_timestamp("timestamp", data.get("timestamp")),
        provider=_identifier("provider", data.get("provider", "")),
        model=_identifier("model", data.get("model", "")),
        is_baseline=_flag("isBaseline", _pick(data, "isBaseline", "is_baseline", False)),
        phase=phase,
        guard=skip,
        usage=_usage_from_json(data.get("usage") or {}),
        duration_ms=check_count("durationMs", _pick(data, "durationMs", "duration_ms", 0)),
        system_prompt_chars=check_count(
            "systemPromptChars", _pick(data, "systemPromptChars", "system_prompt_chars", 0)
        ),
        aborted=_flag("aborted", data.get("aborted", False)),
        error=None if error is None else check_text("error", error, MAX_ERROR_CHARS),
        context=check_json("context", dict(context)),
        arms=tuple(_outcome_from_json(i, a) for i, a in enumerate(raw_arms)),
    )


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
    arm_id = _pick(data, _ARM_ID, "arm_id")
    cost = _pick(data, _TOKEN_COST, "token_cost", 0)
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
    trace_id = _pick(data, _R["trace_id"], "trace_id")
    if not isinstance(trace_id, str) or not trace_id:
        raise InvalidInput(f"{_R['trace_id']} (string) is required")
    raw_arms = data.get(_R["arms"])
    if not isinstance(raw_arms, list) or not raw_arms:
        raise InvalidInput(f"{_R['arms']} (non-empty array) is required")
    if len(raw_arms) > MAX_ARMS_PER_RUN:
        raise InvalidInput(f"{_R['arms']}: at most {MAX_ARMS_PER_RUN} per run")
    texts = _pick(data, _R["assistant_texts"], "assistant_texts", [])
    if not isinstance(texts, list) or any(not isinstance(t, str) for t in texts):
        raise InvalidInput(f"{_R['assistant_texts']} must be an array of strings")
    raw_calls = _pick(data, _R["tool_calls"], "tool_calls", [])
    if not isinstance(raw_calls, list):
        raise InvalidInput(f"{_R['tool_calls']} must be an array")
    raw_usage = data.get(_R["usage"]) or {}
    if not isinstance(raw_usage, Mapping):
        raise InvalidInput(f"{_R['usage']} must be an object")
    total = raw_usage.get(_U["total"])
    usage = Usage(
        raw_usage.get(_U["input"], 0),
        raw_usage.get(_U["output"], 0),
        _pick(raw_usage, _U["cache_read"], "cache_read", 0),
        -1 if total is None else total,
        _pick(raw_usage, _U["cache_write"], "cache_write", 0),
    )
    context = data.get(_R["context"]) or {}
    if not isinstance(context, Mapping):
        raise InvalidInput(f"{_R['context']} must be an object")
    kwargs: dict[str, Any] = {}
    if data.get(_R["timestamp"]) is not None:
        kwargs["timestamp"] = data[_R["timestamp"]]
    strings = {py: _pick(data, name, py, "") for py, name in _REPORT_TEXTS}
    return RunReport(
        trace_id=trace_id,
        arms=tuple(arm_from_json(a, f"{_R['arms']}[{i}]") for i, a in enumerate(raw_arms)),
        assistant_texts=tuple(texts),
        tool_calls=tuple(_tool_call(i, c) for i, c in enumerate(raw_calls)),
        usage=usage,
        is_baseline=_flag(_R["is_baseline"], _pick(data, _R["is_baseline"], "is_baseline", False)),
        duration_ms=_pick(data, _R["duration_ms"], "duration_ms", 0),
        system_prompt_chars=_pick(data, _R["system_prompt_chars"], "system_prompt_chars", 0),
        aborted=_flag(_R["aborted"], data.get(_R["aborted"], False)),
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


__all__ = [
    "ArmOutcomeRecord",
    "RunRecord",
    "arm_from_json",
    "arms_from_json",
    "record_from_json",
    "record_from_report",
    "record_to_json",
    "report_from_json",
    "report_to_json",
    "under_phase",
]
