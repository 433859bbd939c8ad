"""learning-bot with pydantic-ai: the agent's tools chosen per session.

    learning-bot serve &        # or `make run`
    ANTHROPIC_API_KEY=... python examples/pydantic_ai_tools.py

The agent carries the selection as its dependencies. A `PrepareTools` capability keeps the
session's tools: the kept ones first, in the selection's order (the same for the whole
session, so the provider caches them), then the ones the session took on later (`added`), then
the deferred ones; a `ToolSearch` capability makes the deferred ones searchable (Anthropic's
and OpenAI's own tool search where the model has it, a local `search_tools` tool elsewhere).
The guidance goes in as the run's instructions. After the run, its tool calls, text and usage
are reported: a deferred tool the model found and called is reported as loaded, and is among
`added` from the next turn on.
"""

from __future__ import annotations

import asyncio

from pydantic_ai import Agent, RunContext, Tool
from pydantic_ai.capabilities import PrepareTools, ToolSearch
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models import Model
from pydantic_ai.tools import ToolDefinition

from learning_bot.client import ArmSpec, AsyncLearningClient, Selection, Usage

INSTRUCTIONS = "You are a concise assistant for a small data team."


def get_weather(city: str) -> str:
    """The current weather in a city."""
    return f"Sunny and 21 C in {city}."


def search_docs(query: str) -> str:
    """Search the team's documentation; returns the best matching passage."""
    return f"No passage matches {query!r}."


def run_sql(sql: str) -> str:
    """Run a read-only SQL query against the analytics warehouse and return at most 50 rows as
    CSV. Tables: events(user_id, name, at), users(id, plan, country, created),
    invoices(id, user_id, amount_cents, currency, paid_at), plans(id, name, monthly_cents, seats),
    seats(plan_id, user_id, since), tickets(id, user_id, opened_at, closed_at, priority, topic),
    deploys(id, service, version, at, author). Use ISO dates, UTC. Never write, create or drop
    anything; statements other than SELECT are refused. Prefer aggregates to raw rows; name
    every column you select."""
    return "count\n42"


TOOLS = [Tool(get_weather), Tool(search_docs), Tool(run_sql)]
ARMS = [
    ArmSpec.tool(
        t.name,
        {
            "name": t.name,
            "description": t.tool_def.description,
            "parameters": t.tool_def.parameters_json_schema,
        },
        "pydantic-ai",
    )
    for t in TOOLS
]


async def keep_selected(
    ctx: RunContext[Selection], tool_defs: list[ToolDefinition]
) -> list[ToolDefinition]:
    """The kept tools in the selection's order (stable for the session), then the added ones,
    then the deferred ones; no others."""
    arms = [*ctx.deps.kept(), *ctx.deps.added_arms(), *ctx.deps.deferred_arms()]
    order = {arm.name: i for i, arm in enumerate(arms)}
    return sorted((d for d in tool_defs if d.name in order), key=lambda d: order[d.name])


def deferred(ctx: RunContext[Selection], tool_def: ToolDefinition) -> bool:
    """Whether the selection defers the tool (left to tool search)."""
    return any(arm.name == tool_def.name for arm in ctx.deps.deferred_arms())


agent = Agent(
    deps_type=Selection,
    instructions=INSTRUCTIONS,
    tools=TOOLS,
    capabilities=[PrepareTools(keep_selected), ToolSearch(tools=deferred)],
)


async def answer(
    question: str, *, learning: AsyncLearningClient, model: Model | str, session_key: str
) -> str:
    """One turn: select, run the agent with the selection as its dependencies, observe."""
    selection = await learning.select(ARMS, session_key=session_key)
    result = await agent.run(question, model=model, deps=selection, instructions=selection.guidance)
    parts = [p for m in result.all_messages() if isinstance(m, ModelResponse) for p in m.parts]
    used = result.usage
    await learning.observe(
        selection,
        tool_calls=[p.tool_name for p in parts if isinstance(p, ToolCallPart)],
        texts=[p.content for p in parts if isinstance(p, TextPart)],
        usage=Usage(
            used.input_tokens - used.cache_read_tokens - used.cache_write_tokens,
            used.output_tokens,
            used.cache_read_tokens,
            used.cache_write_tokens,
        ),
    )
    return str(result.output)


async def main() -> None:
    async with AsyncLearningClient() as learning:
        for question in ("What's the weather in Lyon?", "And in Oslo?"):
            print(
                await answer(
                    question,
                    learning=learning,
                    model="anthropic:claude-sonnet-4-6",
                    session_key="demo",
                )
            )


if __name__ == "__main__":
    asyncio.run(main())
