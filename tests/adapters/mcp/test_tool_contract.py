"""What every MCP tool promises a client, through the official SDK's client on its in-memory
transport: a bad argument to any tool is a tool error naming the field and the server keeps
serving; learner names are checked on every tool and an unknown learner's reads are tool errors
that create nothing; the annotations say which tools only read and which reset; the server
reports the installed package's version."""

from __future__ import annotations

from collections.abc import Iterator
from importlib.metadata import version
from typing import Any

import pytest
from mcp import Client
from mcp.types import CallToolResult, TextContent

from learning_bot.adapters.mcp.server import build_server
from learning_bot.adapters.mcp.tools import DECLARED_TOOLS, OWN_TOOLS, QORTEX_TOOLS, Session
from learning_bot.app import App, build_app
from learning_bot.bot.commands import COMMAND_NAMES
from learning_bot.bot.commands.registry import specs
from learning_bot.engine import LearningConfig
from learning_bot.settings import Settings
from learning_bot.surfaces import mcp_tools

from . import openclaw_calls as oc

ALL_TOOLS = (*QORTEX_TOOLS, *OWN_TOOLS)
SESSION = Session(oc.LEARNER, "t-1", 1).session_id
"""A well-formed session id of a learner that does not exist yet."""

# One call per tool with an argument the tool refuses, and the field the refusal must name.
INVALID: list[tuple[str, dict[str, Any], str]] = [
    ("qortex_learning_select", {"learner": oc.LEARNER, "candidates": "tool:fs:Read"}, "candidates"),
    (
        "qortex_learning_select",
        {"learner": oc.LEARNER, "candidates": oc.CANDIDATES, "token_budget": -5},
        "token_budget",
    ),
    (
        "qortex_learning_observe",
        {"learner": oc.LEARNER, "arm_id": "tool:fs:Read", "outcome": "maybe"},
        "outcome",
    ),
    ("qortex_learning_posteriors", {"learner": oc.LEARNER, "arm_ids": [""]}, "arm_ids"),
    ("qortex_learning_posteriors", {"learner": oc.LEARNER, "context": "slack"}, "context"),
    ("qortex_learning_metrics", {"learner": oc.LEARNER, "window": -1}, "window"),
    ("qortex_learning_session_start", {"learner": oc.LEARNER, "session_name": ""}, "session_name"),
    ("qortex_learning_session_end", {"session_id": "lb1.%%%"}, "session_id"),
    ("qortex_learning_session_end", {"session_id": "lb1.WzEsIDJd"}, "session_id"),
    ("qortex_learning_reset", {"learner": oc.LEARNER, "arm_ids": "tool:fs:Read"}, "arm_ids"),
    ("learning_status", {"arm": 7}, "arm"),
    ("learning_reward", {"arm": "tool:fs:Read", "value": -0.5}, "value"),
    ("learning_reward", {"value": 1}, "arm"),
    ("learning_reset", {"arms": [], "confirm": True}, "arms"),
    ("learning_reset", {"undo": "maybe"}, "undo"),
    ("learning_phase", {"phase": "asleep"}, "phase"),
    ("learning_phase", {"phase": "active", "confirm": "please"}, "confirm"),
    ("learning_config", {"settings": {"halfLife": -1}}, "halfLife"),
    ("learning_help", {"topic": "fly"}, "topic"),
    # A tool a command declares takes the learner beside its options.
    *((tool, {"learner": "two words"}, "learner") for tool in DECLARED_TOOLS),
]

WITH_LEARNER = (*(t for t in QORTEX_TOOLS if t != "qortex_learning_session_end"), *OWN_TOOLS[:4])
REQUIRED = {
    "qortex_learning_select": {"candidates": oc.CANDIDATES},
    "qortex_learning_observe": {"arm_id": "tool:fs:Read", "outcome": "accepted"},
    "qortex_learning_session_start": {"session_name": "t-1"},
    "learning_reward": {"arm": "tool:fs:Read"},
}
BAD_NAMES = ("", "two words", "x" * 65, "semi;colon", 42)
READS = {"qortex_learning_posteriors": {}, "qortex_learning_metrics": {}, "learning_status": {}}


@pytest.fixture
def app(sqlite_url: str) -> Iterator[App]:
    made = build_app(Settings(database_url=sqlite_url, config=LearningConfig(), cache_ttl=0.0))
    yield made
    made.close()


def connect(app: App) -> Client:
    """An SDK client on the in-memory transport to the server `learning-bot mcp` builds (one
    per test body: the transport's task group must close in the task that opened it)."""
    return Client(build_server(mcp_tools(app)))


def text_of(result: CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, TextContent))


async def still_serving(client: Client) -> None:
    """A good call after the refusals: the server is up and answers properly."""
    result = await client.call_tool("learning_help", {"topic": "reset"})
    assert not result.is_error, text_of(result)
    assert "reset" in text_of(result)


def test_the_table_covers_every_tool() -> None:
    assert {name for name, _, _ in INVALID} == set(ALL_TOOLS)


async def test_every_tool_refuses_a_bad_argument_by_naming_it(app: App) -> None:
    async with connect(app) as client:
        listed = {tool.name for tool in (await client.list_tools()).tools}
        assert listed == set(ALL_TOOLS)
        for name, arguments, field in INVALID:
            result = await client.call_tool(name, arguments)
            text = text_of(result)
            assert result.is_error, f"{name} {arguments} answered {text}"
            assert field in text, f"{name} {arguments}: {text!r} does not name {field}"
            assert "went wrong on our side" not in text, f"{name} {arguments}: {text}"
        await still_serving(client)


async def test_an_argument_a_tool_does_not_take_or_of_another_type_is_refused(app: App) -> None:
    """As the HTTP routes refuse an unknown field: the SDK would drop the argument (a typo
    ignored) or coerce it ("yes" taken for true, a switch made)."""
    async with connect(app) as client:
        for name in ALL_TOOLS:
            result = await client.call_tool(name, {**REQUIRED.get(name, {}), "zz": 1})
            assert result.is_error, name
            assert "unknown argument 'zz'; the tool takes:" in text_of(result), text_of(result)
        for name, arguments, said in (
            ("learning_config", {"key": "tokenBudget", "value": "7000"}, "unknown argument 'key'"),
            ("learning_phase", {"phase": "active", "confirm": "yes"}, "confirm: must be boolean"),
            ("learning_reset", {"confirm": 1}, "confirm: must be boolean"),
            ("learning_reward", {"arm": "tool:fs:Read", "value": "1"}, "value: must be number"),
            (
                "qortex_learning_observe",
                {**REQUIRED["qortex_learning_observe"], "loaded": "yes"},
                "loaded: must be boolean",
            ),
        ):
            result = await client.call_tool(name, arguments)
            assert result.is_error and said in text_of(result), (name, text_of(result))
        phase = await client.call_tool("learning_phase", {})
        assert "passive" in text_of(phase).lower()  # the refused switch was not made
        await still_serving(client)


async def test_help_on_an_unknown_topic_lists_the_topics(app: App) -> None:
    async with connect(app) as client:
        result = await client.call_tool("learning_help", {"topic": "fly"})
        assert result.is_error
        for topic in COMMAND_NAMES:
            assert repr(topic) in text_of(result) or topic in text_of(result)
        # The tool itself (as the /v1 routes and other callers reach it) says the same.
        with pytest.raises(ValueError, match="topic: no help for 'fly'; topics: status, reward"):
            mcp_tools(app).learning_help("fly")
        assert "reset" in mcp_tools(app).learning_help("RESET")


async def test_every_tool_checks_the_learner_name(app: App) -> None:
    async with connect(app) as client:
        for name in WITH_LEARNER:
            for bad in BAD_NAMES:
                arguments = {**REQUIRED.get(name, {}), "learner": bad}
                result = await client.call_tool(name, arguments)
                text = text_of(result)
                assert result.is_error, f"{name} learner={bad!r} answered {text}"
                assert "learner" in text, f"{name} learner={bad!r}: {text!r}"
                assert "went wrong on our side" not in text
        # A session id that carries an invalid learner name is an unknown session.
        result = await client.call_tool(
            "qortex_learning_session_end", {"session_id": Session("a b", "t-1", 1).session_id}
        )
        assert result.is_error and "session_id" in text_of(result)
        await still_serving(client)


async def test_reads_of_an_unknown_learner_are_errors_and_create_nothing(app: App) -> None:
    async with connect(app) as client:
        for name, arguments in READS.items():
            result = await client.call_tool(name, {**arguments, "learner": "nobody"})
            assert result.is_error, f"{name} answered {text_of(result)}"
            assert "unknown learner 'nobody'" in text_of(result), text_of(result)
        result = await client.call_tool("qortex_learning_session_end", {"session_id": SESSION})
        assert result.is_error and "session_id" in text_of(result)
        assert "nobody" not in app.bus.services.names()
        assert oc.LEARNER not in app.bus.services.names()
        # The default learner is shown before anything is written, as on every other surface.
        empty = await client.call_tool("qortex_learning_posteriors", {"learner": "default"})
        assert not empty.is_error and empty.structured_content == {
            "learner": "default",
            "posteriors": {},
        }
        # Once written, the learner reads back.
        chosen = await client.call_tool(oc.select().name, oc.select().arguments)
        assert not chosen.is_error, text_of(chosen)
        read = await client.call_tool("qortex_learning_metrics", {"learner": oc.LEARNER})
        assert not read.is_error, text_of(read)


async def test_annotations_say_what_each_tool_does(app: App) -> None:
    async with connect(app) as client:
        tools = {tool.name: tool.annotations for tool in (await client.list_tools()).tools}
        reads = {
            "qortex_learning_posteriors",
            "qortex_learning_metrics",
            "qortex_learning_session_end",
            "learning_status",
            "learning_help",
            *(s.form.tool for s in specs() if s.form and s.form.tool and not s.form.changes),
        }
        resets = {"qortex_learning_reset", "learning_reset"}
        for name, hints in tools.items():
            assert hints is not None, name
            assert hints.open_world_hint is False, name
            if name in reads:
                assert hints.read_only_hint is True, name
                continue
            assert hints.read_only_hint is False, name
            assert hints.destructive_hint is (name in resets), name
            sets = name in ("learning_phase", "learning_config")
            assert hints.idempotent_hint is sets, name


async def test_the_server_reports_the_package_version(app: App) -> None:
    async with connect(app) as client:
        info = client.server_info
        assert info is not None and info.name == "learning-bot"
        assert info.version == version("learning-bot") != ""
