"""The discord.py client: a command tree holding `/learning`, an error handler that always
answers, and the explicit command sync (never done on start-up: Discord rate-limits it)."""

from __future__ import annotations

import logging
from typing import Any

import discord
from discord import app_commands

from learning_bot.adapters.discord.commands import GROUP_NAME, LearningCommands
from learning_bot.adapters.discord.interactions import DiscordInteractions
from learning_bot.adapters.discord.render import NO_MENTIONS, Interaction
from learning_bot.adapters.discord.settings import DiscordSettings
from learning_bot.bot.bus import CommandBus

log = logging.getLogger("learning_bot.discord")


class LearningTree(app_commands.CommandTree[discord.Client]):
    """A command tree whose failures always reach the user as one ephemeral line."""

    def __init__(self, client: LearningClient) -> None:
        super().__init__(client)
        self.interactions = client.interactions

    async def interaction_check(self, interaction: Interaction) -> bool:
        if interaction.guild_id is None:
            raise app_commands.NoPrivateMessage()
        return True

    async def on_error(self, interaction: Interaction, error: app_commands.AppCommandError) -> None:
        await self.interactions.report_failure(interaction, error)


class LearningClient(discord.Client):
    """Slash commands only: the guilds intent (no privileged intents, no message content) and
    no pings."""

    def __init__(self, interactions: DiscordInteractions, **options: Any) -> None:
        options.setdefault("intents", discord.Intents(guilds=True))
        options["allowed_mentions"] = NO_MENTIONS
        super().__init__(**options)
        self.interactions = interactions
        self.tree = LearningTree(self)
        self.tree.add_command(LearningCommands(interactions))

    async def on_ready(self) -> None:
        log.info("connected to Discord as %s (application %s)", self.user, self.application_id)

    async def on_interaction(self, interaction: Interaction) -> None:
        await self.interactions.route_orphan_click(interaction)


def create_client(settings: DiscordSettings, bus: CommandBus, **options: Any) -> LearningClient:
    """The discord.py client over a command bus. Start it with
    `client.run(settings.require_token())`; register its commands with `sync_commands`."""
    return LearningClient(DiscordInteractions(bus, settings), **options)


async def sync_commands(
    client: LearningClient, guild_id: int | None = None
) -> list[app_commands.AppCommand]:
    """Register /learning with Discord: globally, or in one guild (shows at once; for
    testing). The client must be logged in. Syncing the same commands both globally and to a
    guild shows them twice there: clear the guild copy with `clear_commands` before going
    global."""
    if guild_id is None:
        return await client.tree.sync()
    guild = discord.Object(id=guild_id)
    client.tree.clear_commands(guild=guild)
    client.tree.copy_global_to(guild=guild)
    return await client.tree.sync(guild=guild)


async def clear_commands(client: LearningClient, guild_id: int | None = None) -> None:
    """Remove every command this application registered globally or in one guild, without
    touching the client's own command tree."""
    application_id = client.application_id
    if application_id is None:
        raise RuntimeError("log in before clearing commands")
    if guild_id is None:
        await client.http.bulk_upsert_global_commands(application_id, payload=[])
    else:
        await client.http.bulk_upsert_guild_commands(application_id, guild_id, payload=[])


def command_schema(client: LearningClient) -> dict[str, Any]:
    """The /learning payload that sync sends to Discord."""
    command = client.tree.get_command(GROUP_NAME)
    assert isinstance(command, app_commands.Group)
    return command.to_dict(client.tree)
