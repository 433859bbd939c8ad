"""The Discord surface as a server runs it: the discord.py client, connected out to the
gateway until stopped."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from learning_bot.adapters.discord.client import create_client
from learning_bot.adapters.discord.settings import DiscordSettings
from learning_bot.bot.bus import CommandBus


class DiscordSurface:
    """The Discord surface (a `bot.surface.Surface`): it connects out to the gateway, so it
    mounts no routes."""

    name = "discord"
    routes: Sequence[object] = ()

    def __init__(self, settings: DiscordSettings, bus: CommandBus, **options: Any) -> None:
        self.settings = settings
        self.client = create_client(settings, bus, **options)

    async def run(self) -> None:
        await self.client.start(self.settings.require_token())

    async def stop(self) -> None:
        await self.client.close()
