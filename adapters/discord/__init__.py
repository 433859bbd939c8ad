"""The Discord surface: `/learning` as discord.py slash commands over the command bus.

Names are imported on first use, so a command line can declare the Discord subcommands
(`adapters.discord.cli`) without importing discord.py."""

from __future__ import annotations

from typing import TYPE_CHECKING

from learning_bot.engine.lazy import lazy_getattr

_LAZY = {
    "DiscordInteractions": "learning_bot.adapters.discord.interactions",
    "DiscordSurface": "learning_bot.adapters.discord.surface",
    "LearningClient": "learning_bot.adapters.discord.client",
    "clear_commands": "learning_bot.adapters.discord.client",
    "command_schema": "learning_bot.adapters.discord.client",
    "create_client": "learning_bot.adapters.discord.client",
    "sync_commands": "learning_bot.adapters.discord.client",
    "DiscordSettings": "learning_bot.adapters.discord.settings",
    "load_discord_settings": "learning_bot.adapters.discord.settings",
}

if TYPE_CHECKING:
    from learning_bot.adapters.discord.client import (
        LearningClient,
        clear_commands,
        command_schema,
        create_client,
        sync_commands,
    )
    from learning_bot.adapters.discord.interactions import DiscordInteractions
    from learning_bot.adapters.discord.settings import DiscordSettings, load_discord_settings
    from learning_bot.adapters.discord.surface import DiscordSurface


__getattr__ = lazy_getattr(__name__, globals(), _LAZY)


__all__ = [
    "DiscordInteractions",
    "DiscordSettings",
    "DiscordSurface",
    "LearningClient",
    "clear_commands",
    "command_schema",
    "create_client",
    "load_discord_settings",
    "sync_commands",
]
