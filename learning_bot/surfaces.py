"""Which surfaces `learning-bot serve` runs beside the HTTP API, from the environment.

Adding a surface: implement `bot.surface.Surface` in a new folder under `adapters/`, and add
one entry to SURFACES below (a test of whether the environment asks for it, a factory, and the
line that says how to turn it on)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bot.surface import Surface
from learning_bot.app import App

if TYPE_CHECKING:
    from adapters.mcp.tools import LearningTools


@dataclass(frozen=True)
class SurfaceEntry:
    name: str
    wanted: Callable[[Mapping[str, str]], bool]
    build: Callable[[App, Mapping[str, str]], Surface]
    describe: Callable[[Surface], str]
    how_to_enable: str
    every_worker: bool = False
    """Serves only HTTP routes that hold no state of their own, so every worker process of
    `serve --workers N` runs it (a chat connection runs in the first worker only)."""


def _slack_wanted(env: Mapping[str, str]) -> bool:
    from adapters.slack.service import slack_configured

    return slack_configured(env)


def _slack(app: App, env: Mapping[str, str]) -> Surface:
    from adapters.slack.service import slack_service

    return slack_service(app.bus, env, installation_engine=app.engine)


def _slack_note(surface: Surface) -> str:
    from adapters.slack.service import SlackService

    socket = isinstance(surface, SlackService) and surface.settings.socket_mode
    return "Socket Mode" if socket else "HTTP, events at POST /slack/events"


def _discord(app: App, env: Mapping[str, str]) -> Surface:
    from adapters.discord.client import DiscordService
    from adapters.discord.settings import load_discord_settings

    return DiscordService(load_discord_settings(env), app.bus)


def _mcp(app: App, env: Mapping[str, str]) -> Surface:
    from adapters.http.guards import RequestGuard
    from adapters.http.settings import http_settings
    from adapters.mcp.surface import McpSurface

    http = http_settings(env)
    return McpSurface(
        mcp_tools(app),
        guard=RequestGuard(http).refusal,
        max_body_bytes=http.max_body_bytes,
        version=_version(),
    )


def mcp_tools(app: App) -> LearningTools:
    """The MCP tools over the app's bus; reads of a learner that does not exist create none."""
    from adapters.mcp.tools import LearningTools

    names = getattr(app.store, "learner_names", None)

    def exists(learner: str) -> bool:
        return names is None or learner in names()

    return LearningTools(app.bus, exists)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("learning-bot")
    except PackageNotFoundError:
        return ""


SURFACES = (
    SurfaceEntry(
        "Slack",
        _slack_wanted,
        _slack,
        _slack_note,
        "set SLACK_BOT_TOKEN and SLACK_SIGNING_SECRET for /slack/events, "
        "or SLACK_APP_TOKEN for Socket Mode",
    ),
    SurfaceEntry(
        "Discord",
        lambda env: bool(env.get("DISCORD_TOKEN", "").strip()),
        _discord,
        lambda _: "commands are registered separately: learning-bot discord sync",
        "set DISCORD_TOKEN to enable",
    ),
    SurfaceEntry(
        "MCP",
        lambda env: True,
        _mcp,
        lambda _: "Streamable HTTP at /mcp, OpenClaw's REST backend at /v1",
        "always on",
        every_worker=True,
    ),
)


def configured_surfaces(
    app: App, env: Mapping[str, str] | None = None, *, first_worker: bool = True
) -> tuple[list[Surface], list[str]]:
    """The surfaces to run, and one line per surface saying it is live or how to enable it.
    A worker other than the first runs only the surfaces marked `every_worker`."""
    env = os.environ if env is None else env
    surfaces: list[Surface] = []
    notes: list[str] = []
    for entry in SURFACES:
        if not first_worker and not entry.every_worker:
            continue
        if entry.wanted(env):
            surface = entry.build(app, env)
            surfaces.append(surface)
            notes.append(f"{entry.name}: live ({entry.describe(surface)})")
        else:
            notes.append(f"{entry.name}: off ({entry.how_to_enable})")
    return surfaces, notes
