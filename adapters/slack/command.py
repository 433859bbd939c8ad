"""`learning-bot slack`: Slack on its own, declared without importing slack-bolt."""

from __future__ import annotations

import argparse

from bot.surface import SurfaceCommand, SurfaceHost
from engine.errors import InvalidInput


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="HTTP mode: address to listen on")
    parser.add_argument("--port", type=int, default=3000, help="HTTP mode: port (default 3000)")


def run(args: argparse.Namespace, host: SurfaceHost) -> int:
    """Slack on its own: Socket Mode when SLACK_APP_TOKEN is set (no port is opened), else HTTP
    on --host/--port with Slack posting to /slack/events."""
    from adapters.slack.surface import SlackSurface

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
