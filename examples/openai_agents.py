"""learning-bot with the OpenAI Agents SDK: the agent's tools chosen per session.

    learning-bot serve &        # or `make run`
    OPENAI_API_KEY=... python examples/openai_agents.py

Each turn selects the session's tools, runs a clone of the agent with only those (in the
selection's order) and the guidance added to its instructions, then reports the run's tool calls,
messages and usage.
"""

from __future__ import annotations

import asyncio
from typing import Any

from agents import (
    Agent,
    ItemHelpers,
    MessageOutputItem,
    Model,
    Runner,
    Tool,
    ToolCallItem,
    function_tool,
)
from openai.types.responses import ResponseFunctionToolCall

from learning_bot.client import ArmSpec, AsyncLearningClient, Usage

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


TOOLS: list[Tool] = [get_weather, search_docs, run_sql]
BY_NAME = {tool.name: tool for tool in TOOLS}


def definition(tool: Any) -> dict[str, Any]:
    """The tool as the model sees it (what its token cost is estimated from)."""
    return {
        "name": tool.name,
        "description": tool.description,
        "parameters": tool.params_json_schema,
    }


ARMS = [ArmSpec.tool(tool.name, definition(tool), "openai") for tool in TOOLS]
AGENT = Agent(name="assistant", instructions=INSTRUCTIONS, tools=TOOLS)


async def answer(
    question: str,
    *,
    learning: AsyncLearningClient,
    session_key: str,
    model: Model | str | None = None,
) -> str:
    """One turn: select, run the agent with the kept tools, observe."""
    selection = await learning.select(ARMS, session_key=session_key)
    agent = AGENT.clone(
        tools=[BY_NAME[arm.name] for arm in selection.kept()],
        instructions=f"{INSTRUCTIONS}\n\n{selection.guidance or ''}".strip(),
        model=model or AGENT.model,
    )
    result = await Runner.run(agent, question)
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
            print(await answer(question, learning=learning, session_key="demo", model="gpt-4.1"))


if __name__ == "__main__":
    asyncio.run(main())
