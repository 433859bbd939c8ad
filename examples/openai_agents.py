"""learning-bot with the OpenAI Agents SDK: the agent's tools chosen per session.

    learning-bot serve &        # or `make run`
    OPENAI_API_KEY=... python examples/openai_agents.py

Each turn selects the session's tools and runs a clone of the agent with the guidance added to
its instructions and, as the Responses API wants them for its prompt cache: the kept tools
first, in the selection's order (the same for the whole session); then, if the session has any
added or deferred tools, `ToolSearchTool()` and those tools with `defer_loading=True` in a
namespace. The model loads one through tool search when it needs it, and OpenAI appends the
loaded definition at the end of the context, so the cached prefix holds; an added tool (one
the session took on through tool search before) stays there rather than among the kept ones.
The conversation is the session's (an SDK session per key), so a tool loaded on one turn is
called directly on the next. Then it reports the run's tool calls, messages and usage: a
deferred tool the model called is reported as loaded, and is among `added` from then on.
(`tool_search` needs gpt-5.4 or later; with an older model leave out the tool search tool and
the namespace, and send the added tools after the kept ones.)
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from agents import (
    Agent,
    FunctionTool,
    ItemHelpers,
    MessageOutputItem,
    Model,
    Runner,
    SQLiteSession,
    Tool,
    ToolCallItem,
    ToolSearchTool,
    function_tool,
    tool_namespace,
)
from openai.types.responses import ResponseFunctionToolCall

from learning_bot.client import ArmSpec, AsyncLearningClient, Selection, Usage

INSTRUCTIONS = "You are a concise assistant for a small data team."


@function_tool
def get_weather(city: str) -> str:
    """The current weather in a city."""
    return f"Sunny and 21 C in {city}."


@function_tool
def search_docs(query: str) -> str:
    """Search the team's documentation; returns the best matching passage."""
    return f"No passage matches {query!r}."


@function_tool
def run_sql(sql: str) -> str:
    """Run a read-only SQL query against the analytics warehouse and return at most 50 rows as
    CSV. Tables: events(user_id, name, at), users(id, plan, country, created),
    invoices(id, user_id, amount_cents, currency, paid_at), plans(id, name, monthly_cents, seats),
    seats(plan_id, user_id, since), tickets(id, user_id, opened_at, closed_at, priority, topic),
    deploys(id, service, version, at, author). Use ISO dates, UTC. Never write, create or drop
    anything; statements other than SELECT are refused. Prefer aggregates to raw rows; name
    every column you select."""
    return "count\n42"


BY_NAME: dict[str, FunctionTool] = {tool.name: tool for tool in (get_weather, search_docs, run_sql)}
TOOLS: list[Tool] = list(BY_NAME.values())


def definition(tool: Any) -> dict[str, Any]:
    """The tool as the model sees it (what its token cost is estimated from)."""
    return {
        "name": tool.name,
        "description": tool.description,
        "parameters": tool.params_json_schema,
    }


ARMS = [ArmSpec.tool(tool.name, definition(tool), "openai") for tool in TOOLS]
AGENT = Agent(name="assistant", instructions=INSTRUCTIONS, tools=TOOLS)
SESSIONS: dict[str, SQLiteSession] = {}  # each session key's conversation, in memory


def agent_tools(selection: Selection) -> list[Tool]:
    """The kept tools in the selection's order; then, if the session has added or deferred
    tools, tool search and those tools deferred in a namespace."""
    kept: list[Tool] = [BY_NAME[arm.name] for arm in selection.kept()]
    later = [*selection.added_arms(), *selection.deferred_arms()]
    if not later:
        return kept
    deferred = [dataclasses.replace(BY_NAME[arm.name], defer_loading=True) for arm in later]
    return [
        *kept,
        ToolSearchTool(),
        *tool_namespace(name="team", description="More of the team's tools.", tools=deferred),
    ]


async def answer(
    question: str,
    *,
    learning: AsyncLearningClient,
    session_key: str,
    model: Model | str | None = None,
) -> str:
    """One turn of the session's conversation: select, run the agent with the session's
    tools, observe."""
    selection = await learning.select(ARMS, session_key=session_key)
    agent = AGENT.clone(
        tools=agent_tools(selection),
        instructions=f"{INSTRUCTIONS}\n\n{selection.guidance or ''}".strip(),
        model=model or AGENT.model,
    )
    session = SESSIONS.setdefault(session_key, SQLiteSession(session_key))
    result = await Runner.run(agent, question, session=session)
    calls = [item.raw_item for item in result.new_items if isinstance(item, ToolCallItem)]
    used = result.context_wrapper.usage
    cached = used.input_tokens_details.cached_tokens or 0
    await learning.observe(
        selection,
        tool_calls=[c.name for c in calls if isinstance(c, ResponseFunctionToolCall)],
        texts=[
            ItemHelpers.text_message_output(item)
            for item in result.new_items
            if isinstance(item, MessageOutputItem)
        ],
        usage=Usage(used.input_tokens - cached, used.output_tokens, cached),
        provider="openai",
        model=str(agent.model or ""),
    )
    return str(result.final_output)


async def main() -> None:
    async with AsyncLearningClient() as learning:
        for question in ("What's the weather in Lyon?", "And in Oslo?"):
            print(await answer(question, learning=learning, session_key="demo", model="gpt-5.4"))


if __name__ == "__main__":
    asyncio.run(main())
