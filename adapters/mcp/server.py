"""The MCP server: every tool of `adapters.mcp.tools` declared on the official SDK's
`MCPServer` with a typed signature (the JSON schema a model sees) and a description.

Each call runs in a worker thread (storage is synchronous), so the event loop keeps serving
other calls. A bad argument answers a tool error naming the field; an unexpected failure is
logged and answers a tool error too; the server keeps running either way.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Annotated, Any, Literal, TypeVar, cast

import anyio.to_thread
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from learning_bot.adapters.mcp.tools import LearningTools, strict_json
from learning_bot.bot.errors import error_kind, user_message
from learning_bot.engine.bounds import check_json
from learning_bot.engine.errors import InvalidInput, LearningError

log = logging.getLogger("learning_bot.mcp")
T = TypeVar("T")

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

Learner = Annotated[
    str,
    Field(description="Learner name (one learner per agent deployment, e.g. 'openclaw')."),
]
Context = Annotated[
    dict[str, Any] | None,
    Field(
        description="Run context {session_key, channel, provider, model, phase, message, "
        "tools_called, loaded}. Recorded with the run (the message as its length only). A "
        "select's message, channel, model and tools_called feed the context-aware draw; an "
        "observe's `loaded` names the deferred arms the model loaded through tool search. "
        "Observes attach to the latest select of the same session_key."
    ),
]
OptionalLearner = Annotated[
    str | None, Field(description="Learner name; omitted: the server's default learner.")
]


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
            log.exception("tool %s failed", getattr(fn, "__name__", fn))
        raise ToolError(user_message(exc)) from None


def installed_version() -> str:
    """The installed learning-bot's version, or "unknown" when it runs from a source tree that
    was never installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return "unknown"


class BoundedServer(MCPServer):
    """An MCPServer whose every tool call has its arguments held to engine.bounds first (a NUL
    or a lone surrogate in any string, an integer past 64 bits, nesting past the limit): a
    tool error naming the argument, before the tool or storage sees it."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        try:
            check_json("", arguments)
        except InvalidInput as exc:
            raise ToolError(str(exc)) from None
        return await super().call_tool(name, arguments, context)


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

    @server.tool(
        annotations=RECORDS,
        description="Choose which prompt components (arms) go into the next model request, "
        "under a token budget, and record the selection as a run. In the passive phase every "
        "candidate is selected. Returns selected_arms and excluded_arms ({id, metadata, "
        "token_cost}; with context.message or context.tools_called also deferred_arms: the "
        "left-out tools a runtime with tool search can offer as deferred), is_baseline, "
        "scores (each candidate's posterior mean), token_budget and used_tokens.",
    )
    async def qortex_learning_select(
        learner: Learner,
        candidates: Annotated[
            list[dict[str, Any]],
            Field(
                description="The arms on offer: [{id: 'tool:fs:Read' | 'skill:<name>:main' | "
                "'file:workspace:<path>' | ..., metadata: {type, category, label, description}, "
                "token_cost: int}]."
            ),
        ],
        context: Context = None,
        k: Annotated[
            int | None, Field(description="At most k arms (seeds are kept); 0 or null: no cap.")
        ] = 0,
        token_budget: Annotated[
            int | None, Field(description="Token budget for the selected arms; 0: unlimited.")
        ] = 0,
        min_pulls: Annotated[
            int | None,
            Field(description="Arms observed fewer times than this are always selected."),
        ] = 0,
        seed_arms: Annotated[
            list[str] | None,
            Field(description="Arm ids never excluded; null: the learner's configured seeds."),
        ] = None,
        seed_boost: Annotated[
            float | None,
            Field(description="Seed arms seen for the first time start at Beta(seed_boost, 1)."),
        ] = None,
    ) -> dict[str, Any]:
        return await _call(
            tools.select,
            learner,
            candidates,
            context,
            k,
            token_budget,
            min_pulls,
            seed_arms,
            seed_boost,
        )

    @server.tool(
        annotations=RECORDS,
        description="Report one selected arm's outcome after the run: accepted (the model used "
        "it, reward 1), rejected (unused, reward 0) or partial (0.5), or an explicit reward in "
        "[0, 1]. Attaches to the latest select with the same context.session_key. In the "
        "active phase the posterior changes at once; returns {arm_id, alpha, beta, mean, pulls}.",
    )
    async def qortex_learning_observe(
        learner: Learner,
        arm_id: Annotated[str, Field(description="The arm id, e.g. 'tool:fs:Read'.")],
        outcome: Annotated[
            Literal["accepted", "rejected", "partial", ""] | None,
            Field(description="accepted, rejected or partial."),
        ] = "",
        reward: Annotated[
            float | None,
            Field(description="Reward in [0, 1]; null: taken from the outcome."),
        ] = None,
        context: Context = None,
        loaded: Annotated[
            bool | None,
            Field(
                description="true: the select left this arm out (deferred_arms) and the model "
                "loaded it through tool search; the run then counts it as included."
            ),
        ] = None,
    ) -> dict[str, Any]:
        return await _call(tools.observe, learner, arm_id, outcome, reward, context, loaded)

    @server.tool(
        annotations=READS,
        description="The learner's posteriors: {learner, posteriors: {arm_id: {alpha, beta, "
        "pulls, total_reward, last_updated, mean}}}. Context does not split posteriors.",
    )
    async def qortex_learning_posteriors(
        learner: Learner,
        context: Context = None,
        arm_ids: Annotated[
            list[str] | None, Field(description="Only these arms; null: every arm.")
        ] = None,
    ) -> dict[str, Any]:
        return await _call(tools.posteriors, learner, context, arm_ids)

    @server.tool(
        annotations=READS,
        description="Totals over the learner's arms: {learner, total_pulls, total_reward, "
        "accuracy (total_reward / total_pulls), arm_count, explore_ratio (share of baseline "
        "runs)}.",
    )
    async def qortex_learning_metrics(
        learner: Learner,
        window: Annotated[int | None, Field(description="Accepted and ignored.")] = None,
    ) -> dict[str, Any]:
        return await _call(tools.metrics, learner, window)

    @server.tool(
        annotations=RECORDS,
        description="Open a session named after the agent's session key; returns {session_id, "
        "learner}. The id stays valid across server restarts.",
    )
    async def qortex_learning_session_start(
        learner: Learner,
        session_name: Annotated[str, Field(description="The agent's session key.")],
    ) -> dict[str, Any]:
        return await _call(tools.session_start, learner, session_name)

    @server.tool(
        annotations=READS,
        description="Close a session; returns {session_id, learner, selected_arms, outcomes "
        "(arm_id -> accepted|rejected|partial), started_at, ended_at}.",
    )
    async def qortex_learning_session_end(
        session_id: Annotated[str, Field(description="From qortex_learning_session_start.")],
    ) -> dict[str, Any]:
        return await _call(tools.session_end, session_id)

    @server.tool(
        annotations=RESETS,
        description="Reset every arm (arm_ids null) or the listed ones to Beta(1, 1) with zero "
        "pulls, at once (the caller confirms; learning_reset with undo=true restores them). "
        "Returns {learner, reset_count, arm_ids}.",
    )
    async def qortex_learning_reset(
        learner: Learner,
        arm_ids: Annotated[list[str] | None, Field(description="null: every arm.")] = None,
        context: Annotated[dict[str, Any] | None, Field(description="Ignored.")] = None,
    ) -> dict[str, Any]:
        return await _call(tools.reset, learner, arm_ids, context)

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
            Literal[
                "status",
                "reward",
                "reset",
                "phase",
                "config",
                "subscribe",
                "unsubscribe",
                "subscriptions",
                "help",
            ]
            | None,
            Field(description="One command to explain; null: all of them."),
        ] = None,
    ) -> str:
        return await _call(tools.learning_help, topic)

    return server
