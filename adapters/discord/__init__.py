"""The Discord surface: `/learning` as discord.py slash commands over the command bus."""

from adapters.discord.client import (
    LearningClient,
    clear_commands,
    command_schema,
    create_client,
    sync_commands,
)
from adapters.discord.settings import DiscordSettings, load_discord_settings

__all__ = [
    "DiscordSettings",
    "LearningClient",
    "clear_commands",
    "command_schema",
    "create_client",
    "load_discord_settings",
    "sync_commands",
]
