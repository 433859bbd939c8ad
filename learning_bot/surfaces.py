"""The surfaces: which ones `learning-bot serve` runs beside the HTTP API, from the
environment, and the subcommands they bring to the command line (`learning-bot slack`, ...).

Adding a surface: implement `bot.surface.Surface` in a new folder under `adapters/`, and add
one entry to SURFACES below (a test of whether the environment asks for it, a factory, the
line that says how to turn it on, and its own subcommand if it has one), from the parts its
adapter declares without importing its libraries (`adapters/slack/registration.py`). Nothing
else names a surface: `serve`, the command line and its --url rule all read this registry."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from learning_bot import alerts
from learning_bot.adapters.discord import registration as discord
from learning_bot.adapters.slack import registration as slack
from learning_bot.bot.surface import Surface, SurfaceCommand

if TYPE_CHECKING:
    from learning_bot.adapters.mcp.tools import LearningTools
    from learning_bot.app import App


@dataclass(frozen=True)
class SurfaceEntry:
    """One surface: when to run it, how to build it, what `serve` says about it."""

    name: str
    wanted: Callable[[Mapping[str, str]], bool]
    build: Callable[[App, Mapping[str, str]], Surface]
    """The surface from the app (a `bot.surface.SurfaceParts`) and the environment."""
    describe: Callable[[Surface], str]
    how_to_enable: str
    command: SurfaceCommand | None = None
    """Its own `learning-bot <name>` subcommand, if it has one."""
    every_worker: bool = False
    """Serves only HTTP routes that hold no state of their own, so every worker process of
    `serve --workers N` runs it (a chat connection runs in the first worker only)."""


def _mcp(app: App, env: Mapping[str, str]) -> Surface:
    from learning_bot.adapters.http.body import BodyReader
    from learning_bot.adapters.http.guards import RequestGuard
    from learning_bot.adapters.http.settings import http_settings
    from learning_bot.adapters.mcp.surface import McpSurface

    http = http_settings(env)

    return McpSurface(
        mcp_tools(app),
        guard=RequestGuard(http).refusal,
        read_arguments=BodyReader(http.max_body_bytes, http.body_timeout_seconds).arguments,
        max_body_bytes=http.max_body_bytes,
        version=_version(),
    )


def mcp_tools(app: App) -> LearningTools:
    """The MCP tools over the app's bus; reads of a learner that does not exist create none."""
    from learning_bot.adapters.mcp.tools import LearningTools

    return LearningTools(app.bus)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("learning-bot")
    except PackageNotFoundError:
        return ""


SURFACES = (
    SurfaceEntry(
        "Slack", slack.wanted, slack.build, slack.describe, slack.HOW_TO_ENABLE, slack.SLACK_COMMAND
    ),
    SurfaceEntry(
        "Discord",
        discord.wanted,
        discord.build,
        discord.describe,
        discord.HOW_TO_ENABLE,
        discord.DISCORD_COMMAND,
    ),
    SurfaceEntry(
        "Alerts",
        alerts.wanted,
        alerts.build,
        alerts.describe,
        "set SLACK_BOT_TOKEN or DISCORD_TOKEN, then /learning subscribe in a channel",
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
