"""Help for a topic that names no command: a usage error naming it, on every surface and
whichever way the topic arrives (typed, a tool argument, a typed command object), never a
KeyError; a known topic answers in any case."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from learning_bot.app import App, build_app
from learning_bot.bot.commands import HelpCommand
from learning_bot.bot.handlers import help_text
from learning_bot.bot.invocation import Actor, Invocation
from learning_bot.bot.replies import ReplyKind
from learning_bot.engine.errors import InvalidInput
from learning_bot.settings import Settings

SURFACES = ("slack", "discord", "terminal", "console", "api", "mcp")
ADMIN = Actor("U-admin", "Ada", is_admin=True)


@pytest.fixture
def app(tmp_path: Path) -> Iterator[App]:
    made = build_app(Settings(database_url=f"sqlite:///{tmp_path}/help.sqlite"), spool=False)
    yield made
    made.close()


@pytest.mark.parametrize("surface", SURFACES)
def test_an_unknown_topic_is_a_usage_error_on_every_surface(app: App, surface: str) -> None:
    for command in (HelpCommand("fly"), "help fly"):
        reply = app.bus.dispatch(Invocation(surface, ADMIN, command))
        assert reply.kind is ReplyKind.ERROR and reply.error_code == "usage", reply
        assert "no help for 'fly'" in reply.summary and "status" in reply.summary
        assert reply.usage is not None and "help [command]" in reply.usage[0]
    known = app.bus.dispatch(Invocation(surface, ADMIN, HelpCommand("Status")))
    assert known.kind is ReplyKind.INFO and "status [top N]" in known.summary + str(known.blocks)


def test_help_text_refuses_an_unknown_topic_by_name() -> None:
    with pytest.raises(InvalidInput, match="no help for 'fly'"):
        help_text("fly")
    assert help_text("PHASE", "terminal").startswith("learning-bot phase")


def test_the_mcp_tool_and_the_http_command_route_answer_an_unknown_topic(app: App) -> None:
    from starlette.testclient import TestClient

    from learning_bot.adapters.http import HttpSettings, create_app
    from learning_bot.surfaces import mcp_tools

    with pytest.raises(InvalidInput, match="topic"):
        mcp_tools(app).learning_help("fly")
    assert "learning help" in mcp_tools(app).learning_help("HELP")
    with TestClient(create_app(app.bus, HttpSettings())) as client:
        answer = client.post("/__openclaw__/api/learning/command", json={"text": "help fly"})
    assert answer.status_code < 500
    assert "no help for 'fly'" in answer.text


def test_the_terminal_says_it_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from learning_bot.cli import main

    code = main(["--database-url", f"sqlite:///{tmp_path}/t.sqlite", "help", "fly"])
    first, *hint = capsys.readouterr().err.splitlines()
    assert code == 2 and len(hint) <= 1
    assert first.startswith("learning-bot: no help for 'fly'; commands: status, reward, reset, ")
    assert first.endswith(", help") and "subscribe" in first
