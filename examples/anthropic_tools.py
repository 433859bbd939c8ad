"""learning-bot with the Anthropic SDK: each session's tools chosen by the learning layer.

    learning-bot serve &        # or `make run`
    ANTHROPIC_API_KEY=... python examples/anthropic_tools.py [--session KEY] [QUESTION ...]

Before the first request of a turn the session's tools are selected. The kept ones go out
first, in the selection's order (the same for the whole session), with `cache_control` on the
last, so the tool prefix is cached; then the tools the session took on later (`added`), plain,
as a mid-conversation addition that leaves the cached prefix alone; then, if any are deferred,
the tool search tool and the deferred tools with `defer_loading: true`, so the model can still
find them. After the turn, its tool calls, text and token usage are reported: a deferred tool
the model loaded and called is reported as loaded, and is among `added` from the next turn on.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

import anthropic

from learning_bot.client import DEFAULT_URL, ArmSpec, AsyncLearningClient, Selection, Usage

MODEL = "claude-sonnet-4-6"
SYSTEM = "You are a concise assistant for a small data team."
TOOLS: list[dict[str, Any]] = [
    {
        "name": "get_weather",
        "description": "The current weather in a city.",
        "input_schema": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
    {
        "name": "search_docs",
        "description": "Search the team's documentation; returns the best matching passage.",
        "input_schema": {
            "type": "object",
            "properties": {"query": {"type": "string"}},
            "required": ["query"],
        },
    },
    {
        "name": "run_sql",
        "description": (
            "Run a read-only SQL query against the analytics warehouse and return at most 50 "
            "rows as CSV. Tables: events(user_id, name, at), users(id, plan, country, created), "
            "invoices(id, user_id, amount_cents, currency, paid_at), plans(id, name, "
            "monthly_cents, seats), seats(plan_id, user_id, since), tickets(id, user_id, "
            "opened_at, closed_at, priority, topic), deploys(id, service, version, at, author). "
            "Use ISO dates, UTC. Never write, create or drop anything; statements other than "
            "SELECT are refused. Prefer aggregates to raw rows; name every column you select."
        ),
        "input_schema": {
            "type": "object",
            "properties": {"sql": {"type": "string"}},
            "required": ["sql"],
        },
    },
]
HANDLERS = {
    "get_weather": lambda args: f"Sunny and 21 C in {args['city']}.",
    "search_docs": lambda args: f"No passage matches {args['query']!r}.",
    "run_sql": lambda args: "count\n42",
}
BY_NAME = {tool["name"]: tool for tool in TOOLS}
ARMS = [ArmSpec.tool(tool["name"], tool, "anthropic") for tool in TOOLS]  # cost: the JSON's size
TOOL_SEARCH = {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"}


def request_tools(selection: Selection) -> list[dict[str, Any]]:
    """The kept tools in the selection's order, the last marked as the end of the cached
    prefix; the added ones after it, unmarked; then, if any are deferred, the tool search tool
    and the deferred tools."""
    kept = [dict(BY_NAME[arm.name]) for arm in selection.kept()]
    if kept:
        kept[-1]["cache_control"] = {"type": "ephemeral"}
    added = [BY_NAME[arm.name] for arm in selection.added_arms()]
    deferred = [{**BY_NAME[arm.name], "defer_loading": True} for arm in selection.deferred_arms()]
    return kept + added + ([TOOL_SEARCH, *deferred] if deferred else [])


async def answer(
    question: str,
    *,
    learning: AsyncLearningClient,
    claude: anthropic.AsyncAnthropic,
    session_key: str,
) -> str:
    """One turn of the agent: select, call the model until it stops calling tools, observe."""
    selection = await learning.select(ARMS, session_key=session_key, context={"model": MODEL})
    system = f"{SYSTEM}\n\n{selection.guidance}" if selection.guidance else SYSTEM
    tools = request_tools(selection)
    messages: list[dict[str, Any]] = [{"role": "user", "content": question}]
    calls: list[str] = []
    texts: list[str] = []
    usage = Usage()
    while True:
        message = await claude.messages.create(
            model=MODEL, max_tokens=1024, system=system, tools=tools, messages=messages
        )
        used = message.usage
        usage = Usage(
            usage.input + used.input_tokens,
            usage.output + used.output_tokens,
            usage.cache_read + (used.cache_read_input_tokens or 0),
            usage.cache_write + (used.cache_creation_input_tokens or 0),
        )
        texts += [block.text for block in message.content if block.type == "text"]
        uses = [block for block in message.content if block.type == "tool_use"]
        calls += [block.name for block in uses]
        if message.stop_reason != "tool_use":
            break
        messages.append({"role": "assistant", "content": message.content})
        messages.append(
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": block.id,
                        "content": HANDLERS[block.name](block.input),
                    }
                    for block in uses
                ],
            }
        )
    await learning.observe(
        selection, tool_calls=calls, texts=texts, usage=usage, provider="anthropic", model=MODEL
    )
    return "\n".join(texts)


async def main() -> None:
    parser = argparse.ArgumentParser(description="One session's turns, one per question.")
    parser.add_argument(
        "questions", nargs="*", default=["What's the weather in Lyon?", "And in Oslo?"]
    )
    parser.add_argument("--session", default="demo", help="the session key")
    parser.add_argument("--url", default=DEFAULT_URL, help="where learning-bot serve listens")
    parser.add_argument("--learner", default=None)
    args = parser.parse_args()
    # LEARNING_BOT_API_TOKEN is read if set; ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL too
    async with AsyncLearningClient(args.url, learner=args.learner) as learning:
        claude = anthropic.AsyncAnthropic()
        for question in args.questions:
            print(
                await answer(question, learning=learning, claude=claude, session_key=args.session)
            )


if __name__ == "__main__":
    asyncio.run(main())
