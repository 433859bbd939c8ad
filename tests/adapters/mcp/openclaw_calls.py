"""The learning-tool calls OpenClaw's gateway makes on its learning backend, built the way the
gateway builds them, and a runner that sends them through the official `mcp` client.

One agent turn in the gateway: `session_start` (named after the session key), `select` with the
turn's candidates and context, one `observe` per selected arm (accepted when the run referenced
it, rejected otherwise; the observes are concurrent and carry no session id, only the context),
then `session_end`. Its HTTP API and CLI read `posteriors` and `metrics` without a context and
reset with no arm ids. Optional arguments the gateway leaves unset are sent as JSON null or 0,
never omitted, and the same sequence serves qortex's server and ours.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

LEARNER = "openclaw"
SESSION_KEY = "agent:main:slack:C0123"

# Select context as the gateway builds it (session key, channel, provider, model, phase).
SELECT_CONTEXT: dict[str, Any] = {
    "session_key": SESSION_KEY,
    "channel": "slack",
    "provider": "anthropic",
    "model": "claude-sonnet-4",
    "phase": "active",
}
# Observe context: the same keys, phase first (the gateway spreads it in a different order).
OBSERVE_CONTEXT: dict[str, Any] = {
    "phase": "active",
    "session_key": SESSION_KEY,
    "channel": "slack",
    "provider": "anthropic",
    "model": "claude-sonnet-4",
}

# Arm ids follow the gateway's grammar: tool:<category>:<name>, skill:<name>:main,
# file:workspace:<path>; token_cost is ceil(chars / 4) of the schema, skill or file.
CANDIDATES: list[dict[str, Any]] = [
    {
        "id": "tool:fs:Read",
        "metadata": {"type": "tool", "category": "fs", "label": "Read"},
        "token_cost": 180,
    },
    {
        "id": "tool:exec:Bash",
        "metadata": {"type": "tool", "category": "exec", "label": "Bash"},
        "token_cost": 420,
    },
    {
        "id": "tool:web:web_search",
        "metadata": {"type": "tool", "category": "web", "label": "web_search"},
        "token_cost": 260,
    },
    {
        "id": "skill:github:main",
        "metadata": {"type": "skill", "category": "github", "label": "github"},
        "token_cost": 250,
    },
    {
        "id": "file:workspace:AGENTS.md",
        "metadata": {"type": "file", "category": "workspace", "label": "AGENTS.md"},
        "token_cost": 900,
    },
]
CANDIDATE_IDS = [c["id"] for c in CANDIDATES]

# The gateway's default seed arms (CRITICAL_SEED_ARMS); seed_boost is sent only when configured.
SEED_ARMS = [
    "tool:fs:Read",
    "tool:fs:Edit",
    "tool:fs:Write",
    "tool:fs:Glob",
    "tool:fs:Grep",
    "tool:exec:Bash",
    "tool:web:web_search",
    "tool:web:WebFetch",
]

# The result keys the issue documents for each tool.
RESULT_KEYS: dict[str, frozenset[str]] = {
    "qortex_learning_session_start": frozenset({"session_id", "learner"}),
    "qortex_learning_select": frozenset(
        {"selected_arms", "excluded_arms", "is_baseline", "scores", "token_budget", "used_tokens"}
    ),
    "qortex_learning_observe": frozenset({"arm_id", "alpha", "beta", "mean", "pulls"}),
    "qortex_learning_posteriors": frozenset({"learner", "posteriors"}),
    "qortex_learning_metrics": frozenset(
        {"learner", "total_pulls", "total_reward", "accuracy", "arm_count", "explore_ratio"}
    ),
    "qortex_learning_reset": frozenset({"learner", "reset_count", "arm_ids"}),
    "qortex_learning_session_end": frozenset(
        {"session_id", "learner", "selected_arms", "outcomes", "started_at", "ended_at"}
    ),
}
POSTERIOR_KEYS = frozenset({"alpha", "beta", "pulls", "total_reward", "last_updated", "mean"})
# qortex 0.8.1 answers reset with these keys instead (the gateway's client reads reset_count).
QORTEX_081_RESET_KEYS = frozenset({"learner", "deleted", "status"})


@dataclass(frozen=True)
class ToolReply:
    """One tool call's answer: the JSON of its text content, or the error text of a tool error."""

    name: str
    arguments: dict[str, Any]
    is_error: bool
    text: str
    data: Any = None

    @property
    def result(self) -> dict[str, Any]:
        """The JSON object of a successful call (fails the test on a tool error)."""
        assert not self.is_error, f"{self.name} failed: {self.text}"
        assert isinstance(self.data, dict), f"{self.name} returned {self.text!r}"
        return self.data


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


# A step is a call, or a function of the replies so far that returns the calls to make next
# (for arguments taken from an earlier answer, such as the session id or the selected arms).
Step = ToolCall | Callable[[Sequence[ToolReply]], ToolCall | list[ToolCall]]
CallTool = Callable[[str, dict[str, Any]], Awaitable[ToolReply]]


def arm_ids(arms: Sequence[Any]) -> list[str]:
    """Arm ids of a select result: qortex answers {id, metadata, token_cost} objects, the gateway
    accepts those or plain strings and keeps only the id."""
    return [str(a["id"]) if isinstance(a, dict) and "id" in a else str(a) for a in arms]


def session_start() -> ToolCall:
    return ToolCall(
        "qortex_learning_session_start", {"learner": LEARNER, "session_name": SESSION_KEY}
    )


def select(token_budget: int = 8000, min_pulls: int = 0) -> ToolCall:
    return ToolCall(
        "qortex_learning_select",
        {
            "learner": LEARNER,
            "candidates": CANDIDATES,
            "context": SELECT_CONTEXT,
            "k": 0,
            "token_budget": token_budget,
            "min_pulls": min_pulls,
            "seed_arms": SEED_ARMS,
        },
    )


def observe(arm_id: str, referenced: bool, context: dict[str, Any] | None = None) -> ToolCall:
    return ToolCall(
        "qortex_learning_observe",
        {
            "learner": LEARNER,
            "arm_id": arm_id,
            "outcome": "accepted" if referenced else "rejected",
            "reward": 1.0 if referenced else 0.0,
            "context": OBSERVE_CONTEXT if context is None else context,
        },
    )


def posteriors(context: dict[str, Any] | None = None) -> ToolCall:
    return ToolCall(
        "qortex_learning_posteriors", {"learner": LEARNER, "context": context, "arm_ids": None}
    )


def metrics() -> ToolCall:
    return ToolCall("qortex_learning_metrics", {"learner": LEARNER, "window": None})


def reset(ids: list[str] | None = None) -> ToolCall:
    return ToolCall("qortex_learning_reset", {"learner": LEARNER, "arm_ids": ids})


def session_end(replies: Sequence[ToolReply]) -> ToolCall:
    """Ends the session opened by the first session_start among the replies."""
    started = next(r for r in replies if r.name == "qortex_learning_session_start")
    return ToolCall("qortex_learning_session_end", {"session_id": started.result["session_id"]})


def observe_selected(referenced: Sequence[str]) -> Step:
    """One observe per arm of the latest select: accepted if in `referenced`, else rejected."""

    def build(replies: Sequence[ToolReply]) -> list[ToolCall]:
        latest = [r for r in replies if r.name == "qortex_learning_select"][-1]
        return [observe(arm, arm in referenced) for arm in arm_ids(latest.result["selected_arms"])]

    return build


def turn(referenced: Sequence[str] = ("tool:fs:Read",)) -> list[Step]:
    """One agent turn followed by the API's reads and a reset, in the order the gateway sends
    them (the gateway's observes are concurrent; here they run one after another)."""
    return [
        session_start(),
        select(),
        observe_selected(referenced),
        posteriors(),
        posteriors(OBSERVE_CONTEXT),
        metrics(),
        session_end,
        reset(),
        metrics(),
    ]


def reply_of(name: str, arguments: dict[str, Any], is_error: bool, text: str) -> ToolReply:
    data: Any = None
    if not is_error:
        try:
            data = json.loads(text) if text else {}
        except ValueError:
            data = None
    return ToolReply(name, arguments, is_error, text, data)


def session_caller(session: ClientSession, timeout: float = 30.0) -> CallTool:
    """A CallTool over an initialised MCP client session (text contents joined, as the gateway
    does; structured content is ignored because the gateway ignores it)."""

    async def call(name: str, arguments: dict[str, Any]) -> ToolReply:
        raw = await session.call_tool(name, arguments, read_timeout_seconds=timeout)
        text = "".join(c.text for c in raw.content if getattr(c, "type", "") == "text")
        return reply_of(name, arguments, bool(raw.is_error), text)

    return call


async def run_steps(call: CallTool, steps: Sequence[Step]) -> list[ToolReply]:
    replies: list[ToolReply] = []
    for step in steps:
        made = step if isinstance(step, ToolCall) else step(replies)
        for tool_call in made if isinstance(made, list) else [made]:
            replies.append(await call(tool_call.name, tool_call.arguments))
    return replies


@asynccontextmanager
async def stdio_session(
    params: StdioServerParameters, errlog: Any, init_timeout: float = 60.0
) -> AsyncIterator[ClientSession]:
    """Spawns an MCP server over stdio and yields an initialised client session."""
    async with (
        stdio_client(params, errlog=errlog) as (read, write),
        ClientSession(read, write) as session,
    ):
        with anyio.fail_after(init_timeout):
            await session.initialize()
        yield session
