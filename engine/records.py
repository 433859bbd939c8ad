"""The run record: one definition of a stored run, and its one codec.

A `RunReport` is what an agent runtime reports about a run (texts, tool calls...); the
`RunRecord` is what is kept of it: the trace, each arm's outcome and the reward it applied.
The same record is written to the database, to the local spool while storage is down, read
back for status and export, and sent as JSON; this module is the only place that maps it to and
from JSON (the `traces` row is storage's, `storage.trace_rows`):

- `record_to_json` / `record_from_json`: the JSON object (the wire types `Trace` and
  `StoredTrace`); `record_from_json` checks every field against `engine.bounds`;
- `record_from_report`: the record of a report, given what observing it decided.

The observe and select bodies (the wire types `RunReport` and `ArmSpec`) are read by
`engine.report_json`.
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
    RunOutcome,
    RunReport,
    SkipReason,
)
from learning_bot.engine.usage import Usage
from learning_bot.engine.wire.declare import answer_encoder


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


def pick(data: Mapping[str, Any], camel: str, snake: str, default: Any = None) -> Any:
    if camel in data:
        return data[camel]
    return data.get(snake, default)


def _identifier(name: str, value: Any, required: bool = False) -> str:
    text = check_text(name, value, MAX_ID_CHARS)
    if required and not text:
        raise InvalidInput(f"{name} is required")
    return text


def checked_flag(name: str, value: Any) -> bool:
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
        check_count("usage.cacheRead", pick(raw, "cacheRead", "cache_read", 0)),
        check_count("usage.total", raw.get("total", 0)),
        check_count("usage.cacheWrite", pick(raw, "cacheWrite", "cache_write", 0)),
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
        pick(raw, "armId", "arm_id"),
        check_count(f"{where}.tokenCost", pick(raw, "tokenCost", "token_cost", 0), MAX_TOKEN_COST),
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
        checked_flag(f"{where}.included", raw.get("included", True)),
        checked_flag(f"{where}.referenced", raw.get("referenced", False)),
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
    trace_id = _identifier("traceId", pick(data, "traceId", "trace_id"), required=True)
    try:
        phase = Phase(data.get("phase", Phase.PASSIVE.value))
        skip = SkipReason(guard) if guard else None
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None
    return RunRecord(
        trace_id=trace_id,
        run_id=_identifier("runId", pick(data, "runId", "run_id", "")) or trace_id,
        session_id=_identifier("sessionId", pick(data, "sessionId", "session_id", "")),
        session_key=_identifier("sessionKey", pick(data, "sessionKey", "session_key", "")),
        channel=_identifier("channel", data.get("channel", "")),
        conversation=_identifier("conversation", data.get("conversation", "")),
        timestamp=check_timestamp("timestamp", data.get("timestamp")),
        provider=_identifier("provider", data.get("provider", "")),
        model=_identifier("model", data.get("model", "")),
        is_baseline=checked_flag("isBaseline", pick(data, "isBaseline", "is_baseline", False)),
        phase=phase,
        guard=skip,
        usage=_usage_from_json(data.get("usage") or {}),
        duration_ms=check_count("durationMs", pick(data, "durationMs", "duration_ms", 0)),
        system_prompt_chars=check_count(
            "systemPromptChars", pick(data, "systemPromptChars", "system_prompt_chars", 0)
        ),
        aborted=checked_flag("aborted", data.get("aborted", False)),
        error=None if error is None else check_text("error", error, MAX_ERROR_CHARS),
        context=check_json("context", dict(context)),
        arms=tuple(_outcome_from_json(i, a) for i, a in enumerate(raw_arms)),
    )


__all__ = [
    "ArmOutcomeRecord",
    "RunRecord",
    "checked_flag",
    "pick",
    "record_from_json",
    "record_from_report",
    "record_to_json",
    "under_phase",
]
