"""The Discord surface: `/learning` as discord.py slash commands over the command bus.

Names are imported on first use, so a command line can declare the Discord subcommands
(`adapters.discord.cli`) without importing discord.py."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_LAZY = {
    "DiscordInteractions": "adapters.discord.interactions",
    "DiscordSurface": "adapters.discord.surface",
    "LearningClient": "adapters.discord.client",
    "clear_commands": "adapters.discord.client",
    "command_schema": "adapters.discord.client",
    "create_client": "adapters.discord.client",
    "sync_commands": "adapters.discord.client",
    "DiscordSettings": "adapters.discord.settings",
    "load_discord_settings": "adapters.discord.settings",
}

if TYPE_CHECKING:
    from adapters.discord.client import (
        LearningClient,
        clear_commands,
        command_schema,
        create_client,
        sync_commands,
    )
    from adapters.discord.interactions import DiscordInteractions
    from adapters.discord.settings import DiscordSettings, load_discord_settings
    from adapters.discord.surface import DiscordSurface


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'adapters.discord' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


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
