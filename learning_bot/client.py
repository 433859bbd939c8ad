"""A Python client of the learning API (`learning-bot serve`), synchronous and asynchronous.

`LearningClient` and `AsyncLearningClient` send the same requests: `select` before a model
call, `observe` after it, and `reward`, `status`, `summary` and `set_phase` for the operator's
side. The request and response models are dataclasses whose fields carry the JSON names of the
OpenAPI document (`adapters/http/openapi.py`); a test compares them so that they cannot drift.

The agent's path never fails because of the learning layer:

- `select` retries a 503 or a connection error with backoff, then answers every arm it was
  given, with `fallback` saying why (what the service does when its storage is down);
- `observe` retries the same way, then logs the failure and answers None. What is lost then is
  that run's trace and its posterior updates (the server's spool covers storage outages behind
  a running server, not a server that cannot be reached).

Neither raises, whatever the cause (a refused body, an answer that does not parse, a context
that is not JSON): the cause is logged on `learning_bot.client` and, for select, in `fallback`.

`reward`, `status`, `summary` and `set_phase` are operator calls: they retry the same way and
then raise `LearningClientError`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from types import TracebackType
from typing import Any, Literal, Self

import httpx

from learning_bot.engine.arms import estimate_tokens

log = logging.getLogger("learning_bot.client")

DEFAULT_URL = "http://127.0.0.1:8787"
"""Where `learning-bot serve` (and `make run`) listens by default."""
API_PATH = "/__openclaw__/api/learning"
TOKEN_ENV = "LEARNING_BOT_API_TOKEN"
"""The bearer token of the mutating routes, read from the environment unless given."""
RETRY_STATUSES = frozenset({502, 503, 504})
"""Answers worth another try: the server is up but its storage (or a proxy) is not."""


def _json_name(name: str) -> Any:
    return field(metadata={"json": name})


def json_names(model: type[Any]) -> dict[str, str]:
    """A model's fields and their JSON names ({python_name: jsonName})."""
    return {f.name: f.metadata.get("json", f.name) for f in fields(model)}


# -- requests ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ArmSpec:
    """One component of the prompt as the API takes it (OpenAPI `ArmInput`)."""

    arm_id: str = _json_name("armId")
    token_cost: int = field(default=0, metadata={"json": "tokenCost"})
    label: str = field(default="", metadata={"json": "label"})
    content: str | None = field(default=None, metadata={"json": "content"})
    included: bool = field(default=True, metadata={"json": "included"})
    description: str | None = field(default=None, metadata={"json": "description"})
    """What the arm does: the context-aware policy reads it against the request's message."""
    loaded: bool = field(default=False, metadata={"json": "loaded"})
    """In a run report: left out of the prompt (deferred), then loaded by the model through
    tool search."""

    @classmethod
    def tool(cls, name: str, schema: Mapping[str, Any], category: str = "agent") -> ArmSpec:
        """The arm of a tool: `tool:<category>:<name>`, costing its JSON definition's token
        estimate (SPEC section 2: the compact JSON text, a token per 4 characters), described
        by the definition's `description`."""
        described = schema.get("description")
        return cls(
            f"tool:{category}:{name}",
            estimate_tokens(dict(schema)),
            name,
            description=described if isinstance(described, str) and described else None,
        )

    @property
    def name(self) -> str:
        """The id part of `type:category:id` (a tool's name)."""
        return self.arm_id.split(":", 2)[-1]

    def to_json(self, *, report: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {"armId": self.arm_id, "tokenCost": self.token_cost}
        if self.label:
            out["label"] = self.label
        if self.content is not None:
            out["content"] = self.content
        if report:
            out["included"] = self.included
            if self.loaded:
                out["loaded"] = True
        elif self.description is not None:
            out["description"] = self.description
        return out


@dataclass(frozen=True)
class SelectRequest:
    """`POST select`'s body."""

    arms: tuple[ArmSpec, ...] = _json_name("arms")
    context: Mapping[str, Any] | None = field(default=None, metadata={"json": "context"})
    session_key: str | None = field(default=None, metadata={"json": "sessionKey"})

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"arms": [a.to_json() for a in self.arms]}
        if self.context is not None:
            out["context"] = dict(self.context)
        if self.session_key is not None:
            out["sessionKey"] = self.session_key
        return out


@dataclass(frozen=True)
class ToolCall:
    """A tool the model called (OpenAPI `ToolCall`): its name, optional metadata such as its
    arguments (skills are recognised in it), and the arm it calls (`tool:<category>:<name>`),
    which then alone is credited. `observe` fills `arm` in when the name is that of exactly
    one arm the selection offered."""

    name: str = _json_name("name")
    meta: Mapping[str, Any] | None = field(default=None, metadata={"json": "meta"})
    arm: str | None = field(default=None, metadata={"json": "arm"})

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name}
        if self.meta is not None:
            out["meta"] = dict(self.meta)
        if self.arm is not None:
            out["arm"] = self.arm
        return out


@dataclass(frozen=True)
class Usage:
    """The run's token usage; `cache_read`/`cache_write` let status price the prompt cache."""

    input: int = field(default=0, metadata={"json": "input"})
    output: int = field(default=0, metadata={"json": "output"})
    cache_read: int = field(default=0, metadata={"json": "cacheRead"})
    cache_write: int = field(default=0, metadata={"json": "cacheWrite"})
    total: int | None = field(default=None, metadata={"json": "total"})

    def to_json(self) -> dict[str, Any]:
        total = self.total
        if total is None:
            total = self.input + self.output + self.cache_read + self.cache_write
        return {
            "input": self.input,
            "output": self.output,
            "cacheRead": self.cache_read,
            "cacheWrite": self.cache_write,
            "total": total,
        }


@dataclass(frozen=True)
class RunReport:
    """`POST observe`'s body (OpenAPI `RunReport`, SPEC section 5): the arms offered (each
    with `included`), the assistant's texts, the tool calls, usage and the run's context."""

    trace_id: str = _json_name("traceId")
    arms: tuple[ArmSpec, ...] = field(default=(), metadata={"json": "arms"})
    run_id: str = field(default="", metadata={"json": "runId"})
    session_id: str = field(default="", metadata={"json": "sessionId"})
    session_key: str = field(default="", metadata={"json": "sessionKey"})
    channel: str = field(default="", metadata={"json": "channel"})
    conversation: str = field(default="", metadata={"json": "conversation"})
    timestamp: int | None = field(default=None, metadata={"json": "timestamp"})
    provider: str = field(default="", metadata={"json": "provider"})
    model: str = field(default="", metadata={"json": "model"})
    is_baseline: bool = field(default=False, metadata={"json": "isBaseline"})
    assistant_texts: tuple[str, ...] = field(default=(), metadata={"json": "assistantTexts"})
    tool_calls: tuple[ToolCall, ...] = field(default=(), metadata={"json": "toolCalls"})
    usage: Usage | None = field(default=None, metadata={"json": "usage"})
    duration_ms: int = field(default=0, metadata={"json": "durationMs"})
    system_prompt_chars: int = field(default=0, metadata={"json": "systemPromptChars"})
    aborted: bool = field(default=False, metadata={"json": "aborted"})
    error: str | None = field(default=None, metadata={"json": "error"})
    context: Mapping[str, Any] | None = field(default=None, metadata={"json": "context"})

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "traceId": self.trace_id,
            "arms": [a.to_json(report=True) for a in self.arms],
            "isBaseline": self.is_baseline,
            "assistantTexts": list(self.assistant_texts),
            "toolCalls": [c.to_json() for c in self.tool_calls],
            "durationMs": self.duration_ms,
            "systemPromptChars": self.system_prompt_chars,
            "aborted": self.aborted,
            "error": self.error,
        }
        for name, key in (
            ("run_id", "runId"),
            ("session_id", "sessionId"),
            ("session_key", "sessionKey"),
            ("channel", "channel"),
            ("conversation", "conversation"),
            ("provider", "provider"),
            ("model", "model"),
        ):
            if getattr(self, name):
                out[key] = getattr(self, name)
        if self.timestamp is not None:
            out["timestamp"] = self.timestamp
        if self.usage is not None:
            out["usage"] = self.usage.to_json()
        if self.context:
            out["context"] = dict(self.context)
        return out


@dataclass(frozen=True)
class RewardRequest:
    """`POST reward`'s body: a manual (lagged) reward for one arm."""

    arm_id: str = _json_name("arm_id")
    outcome: Literal["accepted", "rejected"] = field(
        default="accepted", metadata={"json": "outcome"}
    )
    reward: float | None = field(default=None, metadata={"json": "reward"})
    reason: str | None = field(default=None, metadata={"json": "reason"})
    actor: str | None = field(default=None, metadata={"json": "actor"})

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"arm_id": self.arm_id, "outcome": self.outcome}
        for key in ("reward", "reason", "actor"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        return out


# -- responses --------------------------------------------------------------------------------


def _from_json(model: type[Any], data: Any) -> dict[str, Any]:
    """The keyword arguments of `model` read from a JSON object by the fields' JSON names;
    fields the answer leaves out keep their defaults."""
    if not isinstance(data, Mapping):
        raise LearningClientError(f"expected a JSON object, got {type(data).__name__}")
    return {py: data[js] for py, js in json_names(model).items() if js in data}


@dataclass(frozen=True)
class Selection:
    """`POST select`'s answer (OpenAPI `Selection`), plus what the client sent with it.

    `selected` lists the arms to put in the prompt, in the order to send them (the session's
    order under a session key, so the provider's prompt cache keeps hitting). `deferred` lists
    left-out arms that a runtime with tool search may still offer (empty when the server does
    not send it). `fallback` says why every arm was included without selecting: passive phase,
    storage down, or, from the client, a server it could not reach."""

    selected: tuple[str, ...] = _json_name("selected")
    excluded: tuple[str, ...] = field(default=(), metadata={"json": "excluded"})
    is_baseline: bool = field(default=False, metadata={"json": "isBaseline"})
    token_budget: int = field(default=0, metadata={"json": "tokenBudget"})
    used_tokens: int = field(default=0, metadata={"json": "usedTokens"})
    over_budget: bool = field(default=False, metadata={"json": "overBudget"})
    fallback: str | None = field(default=None, metadata={"json": "fallback"})
    guidance: str | None = field(default=None, metadata={"json": "guidance"})
    deferred: tuple[str, ...] = field(default=(), metadata={"json": "deferred"})
    added: tuple[str, ...] = field(default=(), metadata={"json": "added"})
    """Tools the session took on outside its cached prefix: send them as a mid-conversation
    addition (Anthropic) or leave them to tool search (OpenAI), never among `selected`."""
    session: str | None = field(default=None, metadata={"json": "session"})
    """What the select did with its session's set: new, kept, grown or redrawn."""
    session_reason: str | None = field(default=None, metadata={"json": "sessionReason"})
    arms: tuple[ArmSpec, ...] = field(default=(), metadata={"client": True})
    """The inventory the select sent (what `observe` reports back)."""
    session_key: str | None = field(default=None, metadata={"client": True})
    context: Mapping[str, Any] | None = field(default=None, metadata={"client": True})
    """The context the select sent (message, tools called...): `observe` sends it again, so
    that the run teaches what the request's features say about each arm."""

    @classmethod
    def from_json(
        cls,
        data: Any,
        arms: Sequence[ArmSpec],
        session_key: str | None,
        context: Mapping[str, Any] | None = None,
    ) -> Selection:
        kwargs = _from_json(cls, data)
        for key in ("selected", "excluded", "deferred", "added"):
            if key in kwargs:
                kwargs[key] = tuple(kwargs[key] or ())
        return cls(**kwargs, arms=tuple(arms), session_key=session_key, context=context)

    @classmethod
    def everything(
        cls,
        arms: Sequence[ArmSpec],
        session_key: str | None,
        reason: str,
        context: Mapping[str, Any] | None = None,
    ) -> Selection:
        """Every arm, in the order given: the answer when the server cannot be asked."""
        return cls(
            selected=tuple(a.arm_id for a in arms),
            used_tokens=sum(a.token_cost for a in arms),
            fallback=reason,
            arms=tuple(arms),
            session_key=session_key,
            context=context,
        )

    def keeps(self, arm_id: str) -> bool:
        """Whether the arm goes into the prompt."""
        return arm_id in self.selected

    def kept(self) -> list[ArmSpec]:
        """The selected arms, in the selection's order."""
        by_id = {a.arm_id: a for a in self.arms}
        return [by_id[i] for i in self.selected if i in by_id]

    def added_arms(self) -> list[ArmSpec]:
        """The arms the session took on outside its cached prefix, in the order they joined."""
        by_id = {a.arm_id: a for a in self.arms}
        return [by_id[i] for i in self.added if i in by_id]

    def deferred_arms(self) -> list[ArmSpec]:
        """The deferred arms, in the answer's order."""
        by_id = {a.arm_id: a for a in self.arms}
        return [by_id[i] for i in self.deferred if i in by_id]


@dataclass(frozen=True)
class ObserveResult:
    """`POST observe`'s answer for one run (OpenAPI `ObserveResult`)."""

    trace_id: str = _json_name("traceId")
    recorded: bool = field(default=False, metadata={"json": "recorded"})
    duplicate: bool = field(default=False, metadata={"json": "duplicate"})
    skipped: str | None = field(default=None, metadata={"json": "skipped"})
    rewards: Mapping[str, float] = field(default_factory=dict, metadata={"json": "rewards"})
    referenced: Mapping[str, bool] = field(default_factory=dict, metadata={"json": "referenced"})
    spooled: bool = field(default=False, metadata={"json": "spooled"})
    ambiguous: Mapping[str, Sequence[str]] = field(
        default_factory=dict, metadata={"json": "ambiguous"}
    )
    """Tool-call names several of the run's arms share, with their ids: credited to none."""
    message: str = field(default="", metadata={"json": "message"})

    @classmethod
    def from_json(cls, data: Any) -> ObserveResult:
        return cls(**_from_json(cls, data))


@dataclass(frozen=True)
class RewardResult:
    """`POST reward`'s answer (OpenAPI `RewardResult`)."""

    ok: bool = _json_name("ok")
    arm_id: str = field(default="", metadata={"json": "arm_id"})
    alpha: float | None = field(default=None, metadata={"json": "alpha"})
    beta: float | None = field(default=None, metadata={"json": "beta"})
    mean: float | None = field(default=None, metadata={"json": "mean"})
    pulls: int | None = field(default=None, metadata={"json": "pulls"})
    reward: float | None = field(default=None, metadata={"json": "reward"})
    lagged: bool = field(default=True, metadata={"json": "lagged"})

    @classmethod
    def from_json(cls, data: Any) -> RewardResult:
        return cls(**_from_json(cls, data))


@dataclass(frozen=True)
class Summary:
    """`GET summary`'s answer (OpenAPI `Summary`); None where a figure cannot be computed."""

    trace_count: int = _json_name("traceCount")
    arm_count: int = field(default=0, metadata={"json": "armCount"})
    min_timestamp: int | None = field(default=None, metadata={"json": "minTimestamp"})
    max_timestamp: int | None = field(default=None, metadata={"json": "maxTimestamp"})
    total_tokens: int = field(default=0, metadata={"json": "totalTokens"})
    prompt_cost_savings_percent: float | None = field(
        default=None, metadata={"json": "promptCostSavingsPercent"}
    )
    prompt_cost_savings: Mapping[str, Any] | None = field(
        default=None, metadata={"json": "promptCostSavings"}
    )
    prompt_savings_percent: float | None = field(
        default=None, metadata={"json": "promptSavingsPercent"}
    )
    offered_avg_tokens: float | None = field(default=None, metadata={"json": "offeredAvgTokens"})
    selected_prompt_avg_tokens: float | None = field(
        default=None, metadata={"json": "selectedPromptAvgTokens"}
    )
    estimated_recall: float | None = field(default=None, metadata={"json": "estimatedRecall"})
    sessions: Mapping[str, Any] | None = field(default=None, metadata={"json": "sessions"})
    """What the sessions of the last day did with their sets (redrawn, and why)."""
    accuracy: float | None = field(default=None, metadata={"json": "accuracy"})
    explore_ratio: float | None = field(default=None, metadata={"json": "exploreRatio"})
    total_reward: float = field(default=0.0, metadata={"json": "totalReward"})
    baseline: Mapping[str, Any] = field(default_factory=dict, metadata={"json": "baseline"})

    @classmethod
    def from_json(cls, data: Any) -> Summary:
        return cls(**_from_json(cls, data))


@dataclass(frozen=True)
class Reply:
    """A `/learning` command's reply (OpenAPI `Reply`): `summary` is its text, `data` its
    figures (status: phase, traces, arms...)."""

    kind: str = _json_name("kind")
    summary: str = field(default="", metadata={"json": "summary"})
    visibility: str = field(default="private", metadata={"json": "visibility"})
    blocks: tuple[Mapping[str, Any], ...] = field(default=(), metadata={"json": "blocks"})
    data: Mapping[str, Any] = field(default_factory=dict, metadata={"json": "data"})

    @classmethod
    def from_json(cls, data: Any) -> Reply:
        kwargs = _from_json(cls, data)
        kwargs["blocks"] = tuple(kwargs.get("blocks") or ())
        return cls(**kwargs)


@dataclass(frozen=True)
class PhaseResult:
    """`POST phase`'s answer (OpenAPI `PhaseResult`)."""

    phase: str = _json_name("phase")
    previous: str = field(default="", metadata={"json": "previous"})
    changed: bool = field(default=False, metadata={"json": "changed"})
    warning: str | None = field(default=None, metadata={"json": "warning"})
    bootstrapped_traces: int = field(default=0, metadata={"json": "bootstrappedTraces"})

    @classmethod
    def from_json(cls, data: Any) -> PhaseResult:
        return cls(**_from_json(cls, data))


class LearningClientError(Exception):
    """A call the server refused or could not answer; `status` is the HTTP status (None when
    it could not be reached)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


# -- the shared part of both clients ----------------------------------------------------------


def tool_calls_of(calls: Iterable[ToolCall | str | Mapping[str, Any]]) -> tuple[ToolCall, ...]:
    """Tool calls given as names, `{"name", "meta", "arm"}` objects or ToolCalls."""
    out: list[ToolCall] = []
    for call in calls:
        if isinstance(call, ToolCall):
            out.append(call)
        elif isinstance(call, str):
            out.append(ToolCall(call))
        else:
            arm = call.get("arm")
            out.append(
                ToolCall(str(call["name"]), call.get("meta"), None if arm is None else str(arm))
            )
    return tuple(out)


def _tool_name(arm_id: str) -> str | None:
    """The name of a tool's arm id (`tool:<category>:<name>`), None for another arm."""
    parts = arm_id.split(":", 2)
    return parts[2] if len(parts) == 3 and parts[0] == "tool" else None


def _naming_arms(calls: Sequence[ToolCall], offered: Sequence[str]) -> tuple[ToolCall, ...]:
    """Each call with the arm it calls, where the client can tell: the call names it already;
    its name is an offered arm's id or `category:name`; or its name is that of exactly one of
    the `offered` tools. Other calls are sent as they are (the server credits a bare name
    only when one of the run's arms has it)."""
    ids = set(offered)
    by_name: dict[str, list[str]] = {}
    for arm_id in offered:
        name = _tool_name(arm_id)
        if name is not None:
            by_name.setdefault(name, []).append(arm_id)
    out: list[ToolCall] = []
    for call in calls:
        if call.arm is None:
            if call.name in ids and _tool_name(call.name) is not None:
                call = ToolCall(_tool_name(call.name) or call.name, call.meta, call.name)
            elif f"tool:{call.name}" in ids:
                arm_id = f"tool:{call.name}"
                call = ToolCall(_tool_name(arm_id) or call.name, call.meta, arm_id)
            else:
                named = by_name.get(call.name, ())
                if len(named) == 1:
                    call = ToolCall(call.name, call.meta, named[0])
        out.append(call)
    return tuple(out)


def report_for(
    selection: Selection,
    *,
    tool_calls: Iterable[ToolCall | str | Mapping[str, Any]] = (),
    texts: Iterable[str] = (),
    trace_id: str | None = None,
    usage: Usage | None = None,
    **extra: Any,
) -> RunReport:
    """The run report of a run made with `selection`: every arm the select offered, included
    when it was selected or sent as an addition (`added`); a deferred arm the model called is
    reported `loaded` (it loaded it through tool search), not included. The report carries the
    selection's session key and the context the select sent (a `context` given here adds to
    it), and each tool call names its arm where the client can tell which (`_naming_arms`)."""
    chosen = set(selection.selected) | set(selection.added)
    deferred = set(selection.deferred) - chosen
    offered = [a.arm_id for a in selection.arms if a.arm_id in chosen or a.arm_id in deferred]
    calls = _naming_arms(tool_calls_of(tool_calls), offered)
    called_arms = {c.arm for c in calls if c.arm is not None}
    called_names = {c.name for c in calls if c.arm is None}
    arms = tuple(
        ArmSpec(
            a.arm_id,
            a.token_cost,
            a.label,
            a.content,
            a.arm_id in chosen,
            loaded=a.arm_id in deferred and (a.arm_id in called_arms or a.name in called_names),
        )
        for a in selection.arms
    )
    if selection.session_key and "session_key" not in extra:
        extra["session_key"] = selection.session_key
    context = {**(selection.context or {}), **(extra.pop("context", None) or {})}
    if context:
        extra["context"] = context
    return RunReport(
        trace_id=trace_id or uuid.uuid4().hex,
        arms=arms,
        is_baseline=selection.is_baseline,
        assistant_texts=tuple(texts),
        tool_calls=calls,
        usage=usage,
        **extra,
    )


def _error_text(response: httpx.Response) -> str:
    try:
        data = response.json()
    except ValueError:
        data = None
    if isinstance(data, Mapping) and isinstance(data.get("error"), str):
        return f"HTTP {response.status_code}: {data['error']}"
    return f"HTTP {response.status_code}"


@dataclass
class _Settings:
    base: str
    headers: dict[str, str]
    learner: str | None
    retries: int
    backoff: float
    timeout: float

    @classmethod
    def of(
        cls,
        url: str,
        token: str | None,
        learner: str | None,
        retries: int,
        backoff: float,
        timeout: float,
    ) -> _Settings:
        if retries < 0:
            raise ValueError("retries must be 0 or more")
        token = token if token is not None else os.environ.get(TOKEN_ENV) or None
        headers = {"Accept": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        base = url.rstrip("/")
        if not base.endswith(API_PATH):
            base += API_PATH
        return cls(base, headers, learner, retries, backoff, timeout)

    @property
    def params(self) -> dict[str, str]:
        return {"learner": self.learner} if self.learner else {}

    def delay(self, attempt: int) -> float:
        """Exponential backoff with full jitter: up to backoff x 2^attempt seconds."""
        return random.uniform(0, self.backoff * 2**attempt)


def _retryable(outcome: httpx.Response | Exception) -> bool:
    if isinstance(outcome, httpx.Response):
        return outcome.status_code in RETRY_STATUSES
    return isinstance(outcome, httpx.TransportError)


def _answer(outcome: httpx.Response | Exception) -> Any:
    """The JSON of a 2xx answer; otherwise LearningClientError."""
    if isinstance(outcome, Exception):
        raise LearningClientError(f"the learning server could not be reached: {outcome!r}")
    if not outcome.is_success:
        raise LearningClientError(_error_text(outcome), outcome.status_code)
    try:
        return outcome.json()
    except ValueError:
        raise LearningClientError("the learning server answered something else than JSON") from None


class LearningClient:
    """The learning API from synchronous code. A context manager; `close()` otherwise.

    `url` is the server (`http://HOST:PORT`, the API path is added); `token` defaults to
    `LEARNING_BOT_API_TOKEN`; `learner` names a learner other than the server's default;
    `retries` more tries after a 503 or a connection error, `backoff` seconds the first wait."""

    def __init__(
        self,
        url: str = DEFAULT_URL,
        *,
        token: str | None = None,
        learner: str | None = None,
        retries: int = 3,
        backoff: float = 0.2,
        timeout: float = 5.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._settings = _Settings.of(url, token, learner, retries, backoff, timeout)
        self._http = httpx.Client(
            headers=self._settings.headers, timeout=timeout, transport=transport
        )

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _send(self, method: str, path: str, body: Any = None) -> httpx.Response | Exception:
        s = self._settings
        outcome: httpx.Response | Exception
        for attempt in range(s.retries + 1):
            try:
                outcome = self._http.request(method, f"{s.base}/{path}", json=body, params=s.params)
            except httpx.HTTPError as exc:
                outcome = exc
            if attempt == s.retries or not _retryable(outcome):
                break
            time.sleep(s.delay(attempt))
        return outcome

    def select(
        self,
        arms: Sequence[ArmSpec],
        *,
        session_key: str | None = None,
        context: Mapping[str, Any] | None = None,
    ) -> Selection:
        """The arms for the next prompt; every arm (with `fallback` set) if the server cannot
        answer. A session key keeps the same arms in the same order for the session."""
        request = SelectRequest(tuple(arms), context, session_key)
        try:
            data = _answer(self._send("POST", "select", request.to_json()))
            return Selection.from_json(data, arms, session_key, context)
        except Exception as exc:  # never fails the agent: logged, not raised
            log.warning("select fell back to every arm: %s", exc)
            return Selection.everything(arms, session_key, f"learning server: {exc}", context)

    def observe(
        self,
        selection: Selection,
        *,
        tool_calls: Iterable[ToolCall | str | Mapping[str, Any]] = (),
        texts: Iterable[str] = (),
        trace_id: str | None = None,
        usage: Usage | None = None,
        **extra: Any,
    ) -> ObserveResult | None:
        """Report the run made with `selection` (see `report_for`); None, logged, when it
        could not be delivered."""
        try:
            report = report_for(
                selection,
                tool_calls=tool_calls,
                texts=texts,
                trace_id=trace_id,
                usage=usage,
                **extra,
            )
        except Exception as exc:  # never fails the agent: logged, not raised
            log.error("observe: the run report could not be built: %r", exc)
            return None
        return self.observe_report(report)

    def observe_report(self, report: RunReport) -> ObserveResult | None:
        """Report one run; None, logged, when it could not be delivered (the run is lost)."""
        try:
            return ObserveResult.from_json(_answer(self._send("POST", "observe", report.to_json())))
        except Exception as exc:  # never fails the agent: logged, not raised
            log.error("observe of run %s was not recorded: %s", report.trace_id, exc)
            return None

    def reward(
        self,
        arm: str,
        value: float = 1.0,
        *,
        reason: str | None = None,
        actor: str | None = None,
    ) -> RewardResult:
        """A manual reward for one arm (full id or label), 1.0 good to 0.0 bad."""
        request = RewardRequest(
            arm, "accepted" if value >= 0.5 else "rejected", value, reason, actor
        )
        return RewardResult.from_json(_answer(self._send("POST", "reward", request.to_json())))

    def summary(self) -> Summary:
        return Summary.from_json(_answer(self._send("GET", "summary")))

    def status(self) -> Reply:
        """`/learning status`: its text in `.summary`, its figures in `.data`."""
        return Reply.from_json(_answer(self._send("POST", "command", {"text": "status"})))

    def set_phase(self, phase: Literal["passive", "active"]) -> PhaseResult:
        """Switch the phase (confirmed: the caller asked for it)."""
        body = {"phase": phase, "confirm": True}
        return PhaseResult.from_json(_answer(self._send("POST", "phase", body)))


class AsyncLearningClient:
    """`LearningClient` for asyncio code: the same calls, awaited, over `httpx.AsyncClient`.
    An async context manager; `await aclose()` otherwise."""

    def __init__(
        self,
        url: str = DEFAULT_URL,
        *,
        token: str | None = None,
        learner: str | None = None,
        retries: int = 3,
        backoff: float = 0.2,
        timeout: float = 5.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._settings = _Settings.of(url, token, learner, retries, backoff, timeout)
        self._http = httpx.AsyncClient(
            headers=self._settings.headers, timeout=timeout, transport=transport
        )

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _send(self, method: str, path: str, body: Any = None) -> httpx.Response | Exception:
        s = self._settings
        outcome: httpx.Response | Exception
        for attempt in range(s.retries + 1):
            try:
                outcome = await self._http.request(
                    method, f"{s.base}/{path}", json=body, params=s.params
                )
            except httpx.HTTPError as exc:
                outcome = exc
            if attempt == s.retries or not _retryable(outcome):
                break
            await asyncio.sleep(s.delay(attempt))
        return outcome

    async def select(
        self,
        arms: Sequence[ArmSpec],
        *,
        session_key: str | None = None,
        context: Mapping[str, Any] | None = None,
    ) -> Selection:
        """See `LearningClient.select`."""
        request = SelectRequest(tuple(arms), context, session_key)
        try:
            data = _answer(await self._send("POST", "select", request.to_json()))
            return Selection.from_json(data, arms, session_key, context)
        except Exception as exc:  # never fails the agent: logged, not raised
            log.warning("select fell back to every arm: %s", exc)
            return Selection.everything(arms, session_key, f"learning server: {exc}", context)

    async def observe(
        self,
        selection: Selection,
        *,
        tool_calls: Iterable[ToolCall | str | Mapping[str, Any]] = (),
        texts: Iterable[str] = (),
        trace_id: str | None = None,
        usage: Usage | None = None,
        **extra: Any,
    ) -> ObserveResult | None:
        """See `LearningClient.observe`."""
        try:
            report = report_for(
                selection,
                tool_calls=tool_calls,
                texts=texts,
                trace_id=trace_id,
                usage=usage,
                **extra,
            )
        except Exception as exc:  # never fails the agent: logged, not raised
            log.error("observe: the run report could not be built: %r", exc)
            return None
        return await self.observe_report(report)

    async def observe_report(self, report: RunReport) -> ObserveResult | None:
        try:
            data = _answer(await self._send("POST", "observe", report.to_json()))
            return ObserveResult.from_json(data)
        except Exception as exc:  # never fails the agent: logged, not raised
            log.error("observe of run %s was not recorded: %s", report.trace_id, exc)
            return None

    async def reward(
        self,
        arm: str,
        value: float = 1.0,
        *,
        reason: str | None = None,
        actor: str | None = None,
    ) -> RewardResult:
        request = RewardRequest(
            arm, "accepted" if value >= 0.5 else "rejected", value, reason, actor
        )
        data = _answer(await self._send("POST", "reward", request.to_json()))
        return RewardResult.from_json(data)

    async def summary(self) -> Summary:
        return Summary.from_json(_answer(await self._send("GET", "summary")))

    async def status(self) -> Reply:
        data = _answer(await self._send("POST", "command", {"text": "status"}))
        return Reply.from_json(data)

    async def set_phase(self, phase: Literal["passive", "active"]) -> PhaseResult:
        body = {"phase": phase, "confirm": True}
        return PhaseResult.from_json(_answer(await self._send("POST", "phase", body)))


__all__ = [
    "API_PATH",
    "DEFAULT_URL",
    "TOKEN_ENV",
    "ArmSpec",
    "AsyncLearningClient",
    "LearningClient",
    "LearningClientError",
    "ObserveResult",
    "PhaseResult",
    "Reply",
    "RewardRequest",
    "RewardResult",
    "RunReport",
    "SelectRequest",
    "Selection",
    "Summary",
    "ToolCall",
    "Usage",
    "json_names",
    "report_for",
    "tool_calls_of",
]
