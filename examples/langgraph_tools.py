"""learning-bot with LangGraph and LangChain tools: the graph's tools chosen per session.

    learning-bot serve &        # or `make run`
    pip install langchain-anthropic && ANTHROPIC_API_KEY=... python examples/langgraph_tools.py

Each turn selects the session's tools, builds the usual agent graph (model node, ToolNode, the
loop between them) and binds them the way Anthropic's prompt cache and tool search want
(langchain-anthropic sends a tool's `extras` as they are): the kept tools first, in the
selection's order (the same for the whole session), the last marked `cache_control`; then the
tools the session took on later (`added`), plain; then, if any are deferred, the tool search
tool and the deferred tools with `defer_loading`. The guidance is the system message. Then it
reports the AI messages' tool calls, text and usage: a deferred tool the model found and
called is reported as loaded, and is among `added` from the next turn on. With a chat model
that has no tool search, bind the kept and added tools only: a deferred tool the model cannot
find would only cost its definition.
"""

from __future__ import annotations

import asyncio
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.tools import BaseTool, tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from learning_bot.client import ArmSpec, AsyncLearningClient, Selection, Usage

SYSTEM = "You are a concise assistant for a small data team."


@tool
def get_weather(city: str) -> str:
    """The current weather in a city."""
    return f"Sunny and 21 C in {city}."


@tool
def search_docs(query: str) -> str:
    """Search the team's documentation; returns the best matching passage."""
    return f"No passage matches {query!r}."


@tool
def run_sql(sql: str) -> str:
    """Run a read-only SQL query against the analytics warehouse and return at most 50 rows as
    CSV. Tables: events(user_id, name, at), users(id, plan, country, created),
    invoices(id, user_id, amount_cents, currency, paid_at), plans(id, name, monthly_cents, seats),
    seats(plan_id, user_id, since), tickets(id, user_id, opened_at, closed_at, priority, topic),
    deploys(id, service, version, at, author). Use ISO dates, UTC. Never write, create or drop
    anything; statements other than SELECT are refused. Prefer aggregates to raw rows; name
    every column you select."""
    return "count\n42"


TOOLS: list[BaseTool] = [get_weather, search_docs, run_sql]
BY_NAME = {t.name: t for t in TOOLS}
ARMS = [ArmSpec.tool(t.name, convert_to_openai_tool(t)["function"], "langchain") for t in TOOLS]
TOOL_SEARCH = {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"}


def with_extras(tool: BaseTool, **extras: Any) -> BaseTool:
    return tool.model_copy(update={"extras": {**(tool.extras or {}), **extras}})


def bound_tools(selection: Selection) -> list[BaseTool | dict[str, Any]]:
    """The kept tools in the selection's order, the last marked as the end of the cached
    prefix; the added ones after it; then the tool search tool and the deferred tools."""
    kept = [BY_NAME[arm.name] for arm in selection.kept()]
    if kept:
        kept[-1] = with_extras(kept[-1], cache_control={"type": "ephemeral"})
    added = [BY_NAME[arm.name] for arm in selection.added_arms()]
    deferred = [with_extras(BY_NAME[a.name], defer_loading=True) for a in selection.deferred_arms()]
    return [*kept, *added, *([TOOL_SEARCH, *deferred] if deferred else [])]


def agent_graph(model: BaseChatModel, bound_tools: list[BaseTool | dict[str, Any]]) -> Any:
    """The model and its tools in a loop until the model answers without a tool call."""
    bound = model.bind_tools(bound_tools)
    tools = [t for t in bound_tools if isinstance(t, BaseTool)]  # not the tool search tool

    async def call_model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await bound.ainvoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", call_model)
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph.compile()


async def answer(
    question: str, *, learning: AsyncLearningClient, model: BaseChatModel, session_key: str
) -> str:
    """One turn: select, run the graph with the session's tools, observe."""
    selection = await learning.select(ARMS, session_key=session_key)
    system = f"{SYSTEM}\n\n{selection.guidance}" if selection.guidance else SYSTEM
    graph = agent_graph(model, bound_tools(selection))
    state = await graph.ainvoke({"messages": [SystemMessage(system), HumanMessage(question)]})
    replies = [m for m in state["messages"] if isinstance(m, AIMessage)]
    tokens = [m.usage_metadata for m in replies if m.usage_metadata]
    cache_read = sum(t.get("input_token_details", {}).get("cache_read", 0) for t in tokens)
    await learning.observe(
        selection,
        tool_calls=[call["name"] for m in replies for call in m.tool_calls],
        texts=[m.text for m in replies if m.text],
        usage=Usage(
            sum(t["input_tokens"] for t in tokens) - cache_read,
            sum(t["output_tokens"] for t in tokens),
            cache_read,
        ),
    )
    return replies[-1].text


async def main() -> None:
    from langchain_anthropic import ChatAnthropic  # any chat model with tool calling will do

    model = ChatAnthropic(model_name="claude-sonnet-4-6", timeout=60, stop=None)
    async with AsyncLearningClient() as learning:
        for question in ("What's the weather in Lyon?", "And in Oslo?"):
            print(await answer(question, learning=learning, model=model, session_key="demo"))


if __name__ == "__main__":
    asyncio.run(main())
