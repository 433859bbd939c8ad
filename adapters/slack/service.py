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

from adapters.slack.app import SlackSurface, create_surface
from adapters.slack.http import slack_routes
from adapters.slack.settings import SlackSettings, slack_settings_from_env
from adapters.slack.socket_mode import start_socket_mode
from bot.bus import CommandBus

STOP_SECONDS = 10.0


def slack_configured(env: Mapping[str, str]) -> bool:
    """Whether the environment asks for the Slack surface at all."""
    return any(
        env.get(name, "").strip()
        for name in ("SLACK_BOT_TOKEN", "SLACK_APP_TOKEN", "SLACK_CLIENT_ID")
    )


@dataclass
class SlackService:
    """What a server needs: `routes` to mount (POST /slack/events in HTTP mode, the OAuth
    pages when the multi-workspace install is on), `run` (Socket
    Mode: connect and serve until cancelled; HTTP mode: returns at once) and `stop`."""

    settings: SlackSettings
    app: AsyncApp
    surface: SlackSurface
    routes: list[BaseRoute] = field(default_factory=list)
    _handler: AsyncSocketModeHandler | None = None
    name: str = "slack"

    async def run(self) -> None:
        if not self.settings.socket_mode:
            return
        assert self.settings.app_token is not None
        self._handler = await start_socket_mode(self.app, self.settings.app_token)
        await asyncio.Event().wait()

    async def stop(self) -> None:
        if self._handler is not None:
            await self._handler.close_async()  # type: ignore[no-untyped-call]  # unannotated in bolt
            self._handler = None
        await self.surface.wait_for_follow_ups(STOP_SECONDS)


def slack_service(
    bus: CommandBus,
    env: Mapping[str, str] | None = None,
    *,
    installation_engine: Engine | None = None,
) -> SlackService:
    """The Slack surface over a command bus, configured from SLACK_* variables. The
    multi-workspace install keeps its installations in `installation_engine`'s database."""
    settings = slack_settings_from_env(env)
    bolt, surface = create_surface(settings, bus, engine=installation_engine)
    # In Socket Mode nothing is posted to us, and there may be no signing secret to check.
    routes = slack_routes(bolt, events=not settings.socket_mode)
    return SlackService(settings, bolt, surface, routes)
