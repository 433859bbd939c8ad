"""The MCP server: every tool of `adapters.mcp.tools` declared on the official SDK's
`MCPServer` with a typed signature (the JSON schema a model sees) and a description; the
`qortex_learning_*` tools take the parameters of their wire types (engine.wire.gateway), which
the `/v1` routes take as their bodies.

Each call runs in a worker thread (storage is synchronous), so the event loop keeps serving
other calls. A bad argument answers a tool error naming the field; an unexpected failure is
logged and answers a tool error too; the server keeps running either way.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from dataclasses import MISSING, dataclass
from functools import partial
from typing import Annotated, Any, Literal, TypeVar, cast

import anyio.to_thread
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from learning_bot.adapters.mcp.tools import LearningTools, strict_json
from learning_bot.bot.commands.base import CommandSpec, Option
from learning_bot.bot.commands.registry import command_names, specs
from learning_bot.bot.errors import error_kind, user_message
from learning_bot.engine.bounds import check_json
from learning_bot.engine.errors import InvalidInput, LearningError
from learning_bot.engine.wire import gateway
from learning_bot.engine.wire.declare import sent_fields

log = logging.getLogger("learning_bot.mcp")
T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

DISTRIBUTION = "learning-bot"

# What each tool does to the learner's state, for clients deciding what to confirm with a
# person. Nothing reaches outside the learner's database, so no tool is open-world.
READS = ToolAnnotations(read_only_hint=True, open_world_hint=False)
RECORDS = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
)
SETS = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
RESETS = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False
)

OptionalLearner = Annotated[
    str | None, Field(description="Learner name; omitted: the server's default learner.")
]


@dataclass(frozen=True, slots=True)
class GatewayTool:
    """One `qortex_learning_*` tool: it takes the parameters of its wire type and answers with
    the LearningTools method of the name's last part (qortex_learning_select: `select`)."""

    name: str
    arguments: type[Any]
    annotations: ToolAnnotations
    description: str


GATEWAY_TOOLS = (
    GatewayTool(
        "qortex_learning_select",
        gateway.GatewaySelect,
        RECORDS,
        "Choose which prompt components (arms) go into the next model request, under a token "
        "budget, and record the selection as a run. In the passive phase every candidate is "
        "selected. Returns selected_arms and excluded_arms ({id, metadata, token_cost}; with "
        "context.message or context.tools_called also deferred_arms: the left-out tools a "
        "runtime with tool search can offer as deferred), is_baseline, scores (each "
        "candidate's posterior mean), token_budget and used_tokens.",
    ),
    GatewayTool(
        "qortex_learning_observe",
        gateway.GatewayObserve,
        RECORDS,
        "Report one selected arm's outcome after the run: accepted (the model used it, reward "
        "1), rejected (unused, reward 0) or partial (0.5), or an explicit reward in [0, 1]. "
        "Attaches to the latest select with the same context.session_key. In the active phase "
        "the posterior changes at once; returns {arm_id, alpha, beta, mean, pulls}.",
    ),
    GatewayTool(
        "qortex_learning_posteriors",
        gateway.GatewayPosteriors,
        READS,
        "The learner's posteriors: {learner, posteriors: {arm_id: {alpha, beta, pulls, "
        "total_reward, last_updated, mean}}}. Context does not split posteriors.",
    ),
    GatewayTool(
        "qortex_learning_metrics",
        gateway.GatewayMetrics,
        READS,
        "Totals over the learner's arms: {learner, total_pulls, total_reward, accuracy "
        "(total_reward / total_pulls), arm_count, explore_ratio (share of baseline runs)}.",
    ),
    GatewayTool(
        "qortex_learning_session_start",
        gateway.GatewaySessionStart,
        RECORDS,
        "Open a session named after the agent's session key; returns {session_id, learner}. "
        "The id stays valid across server restarts.",
    ),
    GatewayTool(
        "qortex_learning_session_end",
        gateway.GatewaySessionEnd,
        READS,
        "Close a session; returns {session_id, learner, selected_arms, outcomes (arm_id -> "
        "accepted|rejected|partial), started_at, ended_at}.",
    ),
    GatewayTool(
        "qortex_learning_reset",
        gateway.GatewayReset,
        RESETS,
        "Reset every arm (arm_ids null) or the listed ones to Beta(1, 1) with zero pulls, at "
        "once (the caller confirms; learning_reset with undo=true restores them). Returns "
        "{learner, reset_count, arm_ids}.",
    ),
)


async def _call(fn: Callable[..., T], *args: Any) -> T:
    """Run one tool in a worker thread; learning errors become tool errors with their text.
    The result is strict JSON (`strict_json`), so no text content holds NaN or Infinity."""
    try:
        result = await anyio.to_thread.run_sync(fn, *args)
        return cast(T, strict_json(result))
    except LearningError as exc:
        raise ToolError(user_message(exc)) from None
    except Exception as exc:
        if error_kind(exc).code == "internal":
            log.exception("tool %s failed", getattr(getattr(fn, "func", fn), "__name__", fn))
        raise ToolError(user_message(exc)) from None


def takes(arguments: type[Any]) -> Callable[[F], F]:
    """Give a tool function the parameters of a wire type (engine.wire.gateway): their names,
    types, defaults and descriptions, from which the SDK builds the tool's input schema and
    checks a call's arguments. The function takes them as keyword arguments."""

    def give(fn: F) -> F:
        parameters = [
            inspect.Parameter(
                f.py,
                inspect.Parameter.KEYWORD_ONLY,
                default=inspect.Parameter.empty if f.default is MISSING else f.default,
                annotation=Annotated[f.type, Field(description=f.spec.description)],
            )
            for f in sent_fields(arguments)
        ]
        returns = inspect.signature(fn, eval_str=True).return_annotation
        fn.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            parameters, return_annotation=returns
        )
        return fn

    return give


def installed_version() -> str:
    """The installed learning-bot's version, or "unknown" when it runs from a source tree that
    was never installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return "unknown"


_JSON_TYPES: dict[type, tuple[str, ...]] = {
    bool: ("boolean",),
    int: ("integer", "number"),
    float: ("number",),
    str: ("string",),
    list: ("array",),
    dict: ("object",),
    type(None): ("null",),
}


def _declared_types(schema: dict[str, Any]) -> set[str] | None:
    """The JSON types a property's schema allows (None: it does not say, e.g. any value)."""
    if "type" in schema:
        kind = schema["type"]
        return set(kind) if isinstance(kind, list) else {kind}
    options = schema.get("anyOf") or schema.get("oneOf")
    if not options:
        return None
    found: set[str] = set()
    for option in options:
        kinds = _declared_types(option)
        if kinds is None:
            return None
        found |= kinds
    return found


def check_arguments(arguments: dict[str, Any], schema: dict[str, Any] | None) -> None:
    """InvalidInput naming the first argument the tool's input schema does not declare, or
    whose JSON type it does not allow ("yes" for a boolean, "7000" for a number), as the HTTP
    routes refuse an unknown field; the SDK would drop the one and coerce the other."""
    if not schema:
        return
    declared: dict[str, Any] = schema.get("properties") or {}
    for key, value in arguments.items():
        if key not in declared:
            known = ", ".join(sorted(declared)) or "none"
            raise InvalidInput(f"unknown argument {key!r}; the tool takes: {known}")
        allowed = _declared_types(declared[key])
        if allowed is not None and not set(_JSON_TYPES.get(type(value), ())) & allowed:
            kind = _JSON_TYPES.get(type(value), ("value",))[0]
            raise InvalidInput(f"{key}: must be {' or '.join(sorted(allowed))}, got {kind}")


class BoundedServer(MCPServer):
    """An MCPServer whose every tool call has its arguments held to engine.bounds first (a NUL
    or a lone surrogate in any string, an integer past 64 bits, nesting past the limit) and to
    the tool's schema (no argument it does not take, each of a JSON type it allows): a tool
    error naming the argument, before the tool or storage sees it."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        try:
            check_json("", arguments)
            check_arguments(arguments, self._tool_input_schema(name))
        except InvalidInput as exc:
            raise ToolError(str(exc)) from None
        return await super().call_tool(name, arguments, context)

    async def run_stdio_async(self) -> None:
        """The SDK's stdio transport, with every line it cannot parse answered
        (adapters.mcp.stdio)."""
        from learning_bot.adapters.mcp.stdio import serve_stdio

        lowlevel = self._lowlevel_server
        await serve_stdio(lowlevel, lowlevel.create_initialization_options())


def build_server(tools: LearningTools, *, version: str | None = None) -> MCPServer:
    """An MCPServer serving the qortex learning tools and our own /learning tools; it reports
    `version`, by default the installed package's."""
    server = BoundedServer(
        "learning-bot",
        version=version or installed_version(),
        instructions=(
            "A Thompson-sampling learning layer for agent prompts. Agent gateways call "
            "qortex_learning_select before a model request and qortex_learning_observe for each "
            "selected arm afterwards; people use learning_status, learning_reward, "
            "learning_reset, learning_phase, learning_config and learning_help."
        ),
        log_level="WARNING",
    )

    for declared in GATEWAY_TOOLS:
        _add_gateway_tool(server, tools, declared)

    @server.tool(
        annotations=READS,
        description="/learning status: phase, settings, traces, prompt savings, best and worst "
        "arms (or one arm's details), as text.",
        structured_output=False,
    )
    async def learning_status(
        arm: Annotated[str | None, Field(description="One arm's id or label.")] = None,
        learner: OptionalLearner = None,
    ) -> str:
        return await _call(tools.learning_status, arm, learner)

    @server.tool(
        annotations=RECORDS,
        description="/learning reward: manual feedback for one arm (id or label), 1 = good, "
        "0 = bad; answers the arm's new posterior as text.",
        structured_output=False,
    )
    async def learning_reward(
        arm: Annotated[str, Field(description="The arm's id or label.")],
        value: Annotated[float, Field(description="Reward in [0, 1].")] = 1.0,
        reason: Annotated[str | None, Field(description="Why (kept with the reward).")] = None,
        learner: OptionalLearner = None,
    ) -> str:
        return await _call(tools.learning_reward, arm, value, reason, learner)

    @server.tool(
        annotations=RESETS,
        description="/learning reset: every arm (or the listed ones) back to Beta(1, 1). "
        "Without confirm=true it only says what would be reset; undo=true restores the last "
        "reset.",
        structured_output=False,
    )
    async def learning_reset(
        arms: Annotated[list[str] | None, Field(description="Arm ids or labels; null: all.")] = (
            None
        ),
        undo: Annotated[bool, Field(description="Undo the last reset.")] = False,
        confirm: Annotated[bool, Field(description="Do it (otherwise: a preview).")] = False,
        learner: OptionalLearner = None,
    ) -> str:
        return await _call(tools.learning_reset, arms, undo, confirm, learner)

    @server.tool(
        annotations=SETS,
        description="/learning phase: show the phase, or switch to passive (record, include "
        "everything) or active (select and learn); switching needs confirm=true.",
        structured_output=False,
    )
    async def learning_phase(
        phase: Annotated[
            Literal["passive", "active"] | None, Field(description="null: show the phase.")
        ] = None,
        confirm: Annotated[bool, Field(description="Do the switch.")] = False,
        learner: OptionalLearner = None,
    ) -> str:
        return await _call(tools.learning_phase, phase, confirm, learner)

    @server.tool(
        annotations=SETS,
        description="/learning config: show the learner's stored settings (policy, halfLife, "
        "tokenBudget, ...), or change some; every replica takes a change at its next select. "
        "Changing them is for admins.",
        structured_output=False,
    )
    async def learning_config(
        settings: Annotated[
            dict[str, Any] | None,
            Field(description='Settings to change, e.g. {"halfLife": 50}; null: show them.'),
        ] = None,
        learner: OptionalLearner = None,
    ) -> str:
        return await _call(tools.learning_config, settings, learner)

    @server.tool(
        annotations=READS,
        description="/learning help: the commands and what they do.",
        structured_output=False,
    )
    async def learning_help(
        topic: Annotated[
            Literal[command_names()] | None,  # type: ignore[valid-type]
            Field(description="One command to explain; null: all of them."),
        ] = None,
    ) -> str:
        return await _call(tools.learning_help, topic)

    for spec in specs():
        if spec.form is not None and spec.form.tool:
            _add_command_tool(server, tools, spec)
    return server


def _add_gateway_tool(server: MCPServer, tools: LearningTools, declared: GatewayTool) -> None:
    """A `qortex_learning_*` tool: its wire type's parameters, answered by its LearningTools
    method with the structured result."""
    method = getattr(tools, declared.name.removeprefix("qortex_learning_"))

    @takes(declared.arguments)
    async def tool(**arguments: Any) -> dict[str, Any]:
        return cast(dict[str, Any], await _call(partial(method, **arguments)))

    tool.__name__ = declared.name  # the schemas' titles: qortex_learning_selectArguments, ...
    server.tool(
        name=declared.name, annotations=declared.annotations, description=declared.description
    )(tool)


def _option_type(option: Option) -> Any:
    """An option's type in a tool's JSON schema."""
    choices = option.values()
    kind: Any = Literal[choices] if choices else option.kind
    if not option.required:
        kind = kind | None
    return Annotated[kind, Field(description=option.description)]


def _add_command_tool(server: MCPServer, tools: LearningTools, spec: CommandSpec[Any]) -> None:
    """A tool for a command that declares one in its form (bot.commands.base.Form.tool):
    its options, and the learner; answered with the command's reply as text."""
    form = spec.form
    assert form is not None

    async def tool(learner: str | None = None, **values: Any) -> str:
        def run() -> str:
            arguments = {o.name: values.get(o.name, o.default) for o in form.options}
            command = form.build(arguments) if form.build is not None else spec.type()
            return tools.run_command(command, learner)

        return await _call(run)

    parameters = [
        inspect.Parameter(
            o.name,
            inspect.Parameter.KEYWORD_ONLY,
            default=inspect.Parameter.empty if o.required else o.default,
            annotation=_option_type(o),
        )
        for o in form.options
    ]
    parameters.append(
        inspect.Parameter(
            "learner", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=OptionalLearner
        )
    )
    tool.__signature__ = inspect.Signature(parameters, return_annotation=str)  # type: ignore[attr-defined]
    server.tool(
        name=form.tool,
        annotations=RECORDS if form.changes else READS,
        description=form.description,
        structured_output=False,
    )(tool)
