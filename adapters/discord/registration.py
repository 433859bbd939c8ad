"""What the surface registry (learning_bot.surfaces) takes from Discord: when the environment
asks for it, how to build it, the line `serve` prints about it, and `learning-bot discord`.
Declared without importing discord.py (the command line is built from these)."""

from __future__ import annotations

from collections.abc import Mapping

from learning_bot.adapters.discord.cli import DISCORD_COMMAND
from learning_bot.bot.surface import Surface, SurfaceParts

HOW_TO_ENABLE = "set DISCORD_TOKEN to enable"

__all__ = ["DISCORD_COMMAND", "HOW_TO_ENABLE", "build", "describe", "wanted"]


def wanted(env: Mapping[str, str]) -> bool:
    return bool(env.get("DISCORD_TOKEN", "").strip())


def build(parts: SurfaceParts, env: Mapping[str, str]) -> Surface:
    from learning_bot.adapters.discord.settings import load_discord_settings
    from learning_bot.adapters.discord.surface import DiscordSurface

    return DiscordSurface(load_discord_settings(env), parts.bus)


def describe(surface: Surface) -> str:
    return "commands are registered separately: learning-bot discord sync"
