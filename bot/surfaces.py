"""Which chat surfaces `learning-bot serve` runs beside the HTTP API, from the environment."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from adapters.http.server import Surface
    from bot.app import App


def configured_surfaces(
    app: App, env: Mapping[str, str] | None = None
) -> tuple[list[Surface], list[str]]:
    """The surfaces to run, and one line per surface saying it is live or how to enable it."""
    env = os.environ if env is None else env
    surfaces: list[Surface] = []
    notes: list[str] = []
    from adapters.slack.service import slack_configured

    if slack_configured(env):
        from adapters.http.server import Surface
        from adapters.slack.service import slack_service

        slack = slack_service(app, env)
        surfaces.append(Surface("slack", routes=slack.routes, run=slack.run, stop=slack.stop))
        mode = "Socket Mode" if slack.settings.socket_mode else "HTTP, events at POST /slack/events"
        notes.append(f"Slack: live ({mode})")
    else:
        notes.append(
            "Slack: off (set SLACK_BOT_TOKEN and SLACK_SIGNING_SECRET for /slack/events, "
            "or SLACK_APP_TOKEN for Socket Mode)"
        )
    if env.get("DISCORD_TOKEN"):
        surfaces.append(_discord(app, env))
        notes.append(
            "Discord: live (commands are registered separately: learning-bot discord sync)"
        )
    else:
        notes.append("Discord: off (set DISCORD_TOKEN to enable)")
    return surfaces, notes


def _discord(app: App, env: Mapping[str, str]) -> Surface:
    from adapters.discord.client import create_client
    from adapters.discord.settings import load_discord_settings
    from adapters.http.server import Surface

    settings = load_discord_settings(env)
    client = create_client(settings, app)
    token = settings.require_token()

    async def run() -> None:
        await client.start(token)

    async def stop() -> None:
        await client.close()

    return Surface("discord", run=run, stop=stop)
