"""The wire types of an agent runtime's path: `POST select` and `POST observe`, their bodies
and answers. The Python client uses these classes as its models (`learning_bot.client`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from learning_bot.engine.arms import estimate_tokens
from learning_bot.engine.bounds import MAX_BATCH, MAX_DESCRIPTION_CHARS
from learning_bot.engine.observation import MAX_ID_CHARS, SkipReason
from learning_bot.engine.wire.declare import Answer, decode, encode, wire, wire_type

ARM_ID_CHARS = 2 * MAX_ID_CHARS
"""The longest arm id (`type:category:name`)."""


@wire_type("ArmInput", tolerated=("referenced", "type", "category"))
@dataclass(frozen=True)
class ArmSpec:
    """One component of the prompt as the API takes it (OpenAPI `ArmInput`). A request body
    may also send `referenced` (computed here from the run's tool calls and texts), `type`
    and `category` (what the arm id says), as OpenClaw's RunTrace arm outcome and Arm do:
    accepted and ignored."""

    arm_id: str = wire("armId", aliases=("arm_id",), maxLength=ARM_ID_CHARS)
    token_cost: int = wire("tokenCost", default=0, aliases=("token_cost",), minimum=0)
    label: str = wire(default="")
    content: str | None = wire(default=None)
    included: bool = wire(default=True)
    description: str | None = wire(
        default=None,
        nullable=False,
        maxLength=MAX_DESCRIPTION_CHARS,
        doc="What the arm does: lexical relevance to context.message reads it",
    )
    """What the arm does: the context-aware policy reads it against the request's message."""
    loaded: bool = wire(
        default=False,
        doc="Observe only: a deferred arm (left out of the prompt) the model loaded through "
        "tool search; counts as in the prompt for the reward, and apart from the selected "
        "arms for the session's set",
    )
    """In a run report: left out of the prompt (deferred), then loaded by the model through
    tool search."""

    @classmethod
    def tool(cls, name: str, schema: Mapping[str, Any], category: str = "agent") -> ArmSpec:
        """The arm of a tool: `tool:<category>:<name>`, costing its JSON definition's token
        estimate (the compact JSON text, a token per 4 characters), described by the
        definition's `description`."""
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
        """The arm in a select body, or (`report`) in a run report."""
        if report:
            return encode(self, skip=_SELECT_ONLY, always=_INCLUDED)
        return encode(self, skip=_REPORT_ONLY, always=_COST)


_SELECT_ONLY = frozenset({"description"})
_REPORT_ONLY = frozenset({"included", "loaded"})
_INCLUDED = frozenset({"arm_id", "token_cost", "included"})
_COST = frozenset({"arm_id", "token_cost"})


@wire_type()
@dataclass(frozen=True)
class SelectRequest:
    """`POST select`'s body."""

    arms: tuple[ArmSpec, ...] = wire(minItems=1)
    context: Mapping[str, Any] | None = wire(
        default=None,
        nullable=False,
        doc="What the runtime knows about the request; `session_key` makes the selection "
        "session-stable (the session's first set, in order)",
    )
    session_key: str | None = wire(
        "sessionKey",
        default=None,
        nullable=False,
        maxLength=MAX_ID_CHARS,
        doc="The session, as context.session_key: the same arms in the same order for every "
        "select of the session while it is not idle",
    )

    def to_json(self) -> dict[str, Any]:
        out = encode(self, skip=_ARMS)
        out["arms"] = [a.to_json() for a in self.arms]
        return out


_ARMS = frozenset({"arms"})


@wire_type(required="all")
@dataclass(frozen=True)
class Selection:
    """`POST select`'s answer (OpenAPI `Selection`), plus what the client sent with it.

    `selected` lists the arms to put in the prompt, in the order to send them (the session's
    order under a session key, so the provider's prompt cache keeps hitting). `deferred` lists
    left-out arms that a runtime with tool search may still offer (empty when the server does
    not send it). `fallback` says why every arm was included without selecting: passive phase,
    storage down, or, from the client, a server it could not reach."""

    selected: tuple[str, ...] = wire()
    excluded: tuple[str, ...] = wire(default=())
    deferred: tuple[str, ...] = wire(
        default=(),
        doc="The left-out tools a runtime with tool search can still offer as deferred "
        "(Anthropic defer_loading, OpenAI tool search)",
    )
    is_baseline: bool = wire("isBaseline", default=False)
    token_budget: int = wire("tokenBudget", default=0)
    used_tokens: int = wire("usedTokens", default=0)
    over_budget: bool = wire("overBudget", default=False)
    fallback: str | None = wire(default=None)
    guidance: str | None = wire(default=None)
    added: tuple[str, ...] = wire(
        default=(),
        doc="Tools the session took on outside its cached prefix: send them as a "
        "mid-conversation addition (Anthropic) or leave them to tool search (OpenAI), never "
        "among the prefix's tools",
    )
    """Tools the session took on outside its cached prefix: send them as a mid-conversation
    addition (Anthropic) or leave them to tool search (OpenAI), never among `selected`."""
    session: str | None = wire(
        default=None,
        enum=["new", "kept", "grown", "redrawn"],
        doc="What the select did with its session's set (null: no session)",
    )
    """What the select did with its session's set: new, kept, grown or redrawn."""
    session_reason: str | None = wire(
        "sessionReason",
        default=None,
        empty_is_null=True,
        doc="Why, in a few words (README, Agent runtimes)",
    )
    arms: tuple[ArmSpec, ...] = wire(default=(), client=True)
    """The inventory the select sent (what `observe` reports back)."""
    session_key: str | None = wire(default=None, client=True)
    context: Mapping[str, Any] | None = wire(default=None, client=True)
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
        return decode(cls, data, arms=tuple(arms), session_key=session_key, context=context)

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
        return self._arms(self.selected)

    def added_arms(self) -> list[ArmSpec]:
        """The arms the session took on outside its cached prefix, in the order they joined."""
        return self._arms(self.added)

    def deferred_arms(self) -> list[ArmSpec]:
        """The deferred arms, in the answer's order."""
        return self._arms(self.deferred)

    def _arms(self, ids: Sequence[str]) -> list[ArmSpec]:
        by_id = {a.arm_id: a for a in self.arms}
        return [by_id[i] for i in ids if i in by_id]


@wire_type()
@dataclass(frozen=True)
class ToolCall:
    """A tool the model called (OpenAPI `ToolCall`): its name, optional metadata such as its
    arguments (skills are recognised in it), and the arm it calls (`tool:<category>:<name>`),
    which then alone is credited. `observe` fills `arm` in when the name is that of exactly
    one arm the selection offered."""

    name: str = wire()
    meta: Mapping[str, Any] | None = wire(default=None, nullable=False)
    arm: str | None = wire(
        default=None,
        nullable=False,
        maxLength=ARM_ID_CHARS,
        doc="The arm called (tool:<category>:<name>): credits that arm only. A name given as "
        "a full arm id or as category:name is read the same way; a bare name several of the "
        "run's arms share credits none of them (see ambiguous)",
    )

    def to_json(self) -> dict[str, Any]:
        return encode(self)


@wire_type(required="all")
@dataclass(frozen=True)
class Usage:
    """The run's token usage; `cache_read`/`cache_write` let status price the prompt cache."""

    input: int = wire(default=0, minimum=0)
    output: int = wire(default=0, minimum=0)
    cache_read: int = wire("cacheRead", default=0, aliases=("cache_read",), minimum=0)
    cache_write: int = wire("cacheWrite", default=0, aliases=("cache_write",), minimum=0)
    total: int | None = wire(default=None, nullable=False, minimum=0)
    """None: the sum of the others."""

    def to_json(self) -> dict[str, Any]:
        out = encode(self, always=_USAGE)
        if self.total is None:
            out["total"] = self.input + self.output + self.cache_read + self.cache_write
        return out


_USAGE = frozenset({"input", "output", "cache_read", "cache_write", "total"})


@wire_type()
@dataclass(frozen=True)
class RunReport:
    """`POST observe`'s body (OpenAPI `RunReport`): the arms offered (each with `included`),
    the assistant's texts, the tool calls, usage and the run's context. A body may give each
    field its snake_case name too (`trace_id`)."""

    trace_id: str = wire("traceId", aliases=("trace_id",), minLength=1, maxLength=MAX_ID_CHARS)
    arms: tuple[ArmSpec, ...] = wire(default=(), required=True, minItems=1)
    run_id: str = wire("runId", default="", aliases=("run_id",))
    session_id: str = wire("sessionId", default="", aliases=("session_id",))
    session_key: str = wire("sessionKey", default="", aliases=("session_key",))
    channel: str = wire(default="")
    conversation: str = wire(default="")
    timestamp: int | None = wire(default=None, nullable=False, minimum=0)
    provider: str = wire(default="")
    model: str = wire(default="")
    is_baseline: bool = wire("isBaseline", default=False, aliases=("is_baseline",))
    assistant_texts: tuple[str, ...] = wire(
        "assistantTexts", default=(), aliases=("assistant_texts",)
    )
    tool_calls: tuple[ToolCall, ...] = wire("toolCalls", default=(), aliases=("tool_calls",))
    usage: Usage | None = wire(default=None, nullable=False)
    duration_ms: int = wire("durationMs", default=0, aliases=("duration_ms",), minimum=0)
    system_prompt_chars: int = wire(
        "systemPromptChars", default=0, aliases=("system_prompt_chars",), minimum=0
    )
    aborted: bool = wire(default=False)
    error: str | None = wire(default=None)
    context: Mapping[str, Any] | None = wire(default=None, nullable=False, send="truthy")

    def to_json(self) -> dict[str, Any]:
        out = encode(self, skip=_NESTED, always=_REPORTED)
        out["arms"] = [a.to_json(report=True) for a in self.arms]
        out["toolCalls"] = [c.to_json() for c in self.tool_calls]
        if self.usage is not None:
            out["usage"] = self.usage.to_json()
        return out


_NESTED = frozenset({"arms", "tool_calls", "usage"})
_REPORTED = frozenset(
    {
        "trace_id",
        "is_baseline",
        "assistant_texts",
        "duration_ms",
        "system_prompt_chars",
        "aborted",
        "error",
    }
)
"""A report's fields sent whatever their value."""


@wire_type()
@dataclass(frozen=True)
class ObserveBatch:
    """Several runs in one `POST observe`."""

    reports: tuple[RunReport, ...] = wire(minItems=1, maxItems=MAX_BATCH)


@wire_type(required="all")
@dataclass(frozen=True)
class ObserveResult(Answer):
    """`POST observe`'s answer for one run (OpenAPI `ObserveResult`)."""

    trace_id: str = wire("traceId")
    recorded: bool = wire(default=False)
    duplicate: bool = wire(default=False)
    skipped: str | None = wire(default=None, enum=[r.value for r in SkipReason])
    rewards: Mapping[str, float] = wire(default_factory=dict)
    referenced: Mapping[str, bool] = wire(default_factory=dict)
    spooled: bool = wire(default=False)
    ambiguous: Mapping[str, Sequence[str]] = wire(
        default_factory=dict,
        doc="Tool-call names several of the run's arms share, with their ids: such a call "
        "credited none of them",
    )
    """Tool-call names several of the run's arms share, with their ids: credited to none."""
    message: str = wire(default="")


@wire_type()
@dataclass(frozen=True)
class ObserveBatchResult:
    """`POST observe`'s answer for a batch."""

    results: tuple[ObserveResult, ...] = wire()
