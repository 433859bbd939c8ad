"""What the surface registry (learning_bot.surfaces) takes from Slack: when the environment
asks for it, how to build it, the line `serve` prints about it, and `learning-bot slack`.
Declared without importing slack-bolt (the command line is built from these)."""

from __future__ import annotations

import argparse
from collections.abc import Mapping

from learning_bot.bot.surface import Surface, SurfaceCommand, SurfaceHost, SurfaceParts
from learning_bot.engine.errors import InvalidInput

HOW_TO_ENABLE = (
    "set SLACK_BOT_TOKEN and SLACK_SIGNING_SECRET for /slack/events, "
    "or SLACK_APP_TOKEN for Socket Mode"
)


def wanted(env: Mapping[str, str]) -> bool:
    from learning_bot.adapters.slack.surface import slack_configured

    return slack_configured(env)


def build(parts: SurfaceParts, env: Mapping[str, str]) -> Surface:
    from learning_bot.adapters.slack.surface import slack_surface

    return slack_surface(parts.bus, env, installation_engine=parts.engine)


def describe(surface: Surface) -> str:
    from learning_bot.adapters.slack.surface import SlackSurface

    socket = isinstance(surface, SlackSurface) and surface.settings.socket_mode
    return "Socket Mode" if socket else "HTTP, events at POST /slack/events"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="HTTP mode: address to listen on")
    parser.add_argument("--port", type=int, default=3000, help="HTTP mode: port (default 3000)")


def run(args: argparse.Namespace, host: SurfaceHost) -> int:
    """Slack on its own: Socket Mode when SLACK_APP_TOKEN is set (no port is opened), else HTTP
    on --host/--port with Slack posting to /slack/events."""
    from learning_bot.adapters.slack.surface import SlackSurface

    if not 1 <= args.port <= 65535:
        raise InvalidInput(f"--port must be from 1 to 65535, got {args.port}")
    surface = host.surface()
    assert isinstance(surface, SlackSurface)
    if surface.settings.socket_mode:
        return host.run_alone(surface)
    return host.serve_http([surface], args.host, args.port)


SLACK_COMMAND = SurfaceCommand(
    name="slack",
    help="serve /learning in Slack on its own (Socket Mode or HTTP mode)",
    description=(
        "Slack on its own: Socket Mode when SLACK_APP_TOKEN is set (no port is opened), "
        "else HTTP mode with Slack posting to /slack/events on --host:--port."
    ),
    add_arguments=add_arguments,
    run=run,
    no_url="it is a server",
)
