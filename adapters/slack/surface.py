"""The Slack surface as a server runs it: routes to mount in HTTP mode, or a Socket Mode
connection to run; either way a stop that lets answers still in flight go out."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field

from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp
from sqlalchemy import Engine
from starlette.routing import BaseRoute

from learning_bot.adapters.slack.app import SlackInteractions, create_app_and_interactions
from learning_bot.adapters.slack.http import slack_routes
from learning_bot.adapters.slack.settings import SlackSettings, slack_settings_from_env
from learning_bot.adapters.slack.socket_mode import start_socket_mode
from learning_bot.bot.bus import CommandBus

STOP_SECONDS = 10.0


def slack_configured(env: Mapping[str, str]) -> bool:
    """Whether the environment asks for the Slack surface at all."""
    return any(
        env.get(name, "").strip()
        for name in ("SLACK_BOT_TOKEN", "SLACK_APP_TOKEN", "SLACK_CLIENT_ID")
    )


@dataclass
class SlackSurface:
    """The Slack surface (a `bot.surface.Surface`): `routes` to mount (POST /slack/events in
    HTTP mode, the OAuth pages when the multi-workspace install is on), `run` and `stop`. `run`
    lasts as long as the surface is live, in both modes, so a server can treat its end as the
    surface stopping."""

    settings: SlackSettings
    app: AsyncApp
    interactions: SlackInteractions
    routes: list[BaseRoute] = field(default_factory=list)
    _handler: AsyncSocketModeHandler | None = None
    name: str = "slack"
    _stopped: asyncio.Event = field(default_factory=asyncio.Event)

    async def run(self) -> None:
        """Socket Mode: connect (raising if that fails), then serve until `stop()`. HTTP mode:
        the mounted routes do the work; wait until `stop()`."""
        if self.settings.socket_mode:
            assert self.settings.app_token is not None
            self._handler = await start_socket_mode(self.app, self.settings.app_token)
        try:
            await self._stopped.wait()
        finally:
            await self._disconnect()

    async def stop(self) -> None:
        """End `run`, close the Socket Mode connection, and let answers still on their way to
        response_url go out (for up to STOP_SECONDS)."""
        self._stopped.set()
        await self._disconnect()
        await self.interactions.wait_for_follow_ups(STOP_SECONDS)

    async def _disconnect(self) -> None:
        handler, self._handler = self._handler, None
        if handler is not None:
            await handler.close_async()  # type: ignore[no-untyped-call]  # unannotated in bolt


def slack_surface(
    bus: CommandBus,
    env: Mapping[str, str] | None = None,
    *,
    installation_engine: Engine | None = None,
) -> SlackSurface:
    """The Slack surface over a command bus, configured from SLACK_* variables. The
    multi-workspace install keeps its installations in `installation_engine`'s database."""
    settings = slack_settings_from_env(env)
    bolt, interactions = create_app_and_interactions(settings, bus, engine=installation_engine)
    # In Socket Mode nothing is posted to us, and there may be no signing secret to check.
    routes = slack_routes(bolt, events=not settings.socket_mode)
    return SlackSurface(settings, bolt, interactions, routes)
