"""The Discord subcommands' arguments (`sync`, `run`), kept apart from the client so that a
command line can declare them without importing discord.py."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from learning_bot.engine.errors import InvalidConfig

if TYPE_CHECKING:
    from learning_bot.adapters.discord.settings import DiscordSettings


def _guild_id(raw: str) -> int:
    from learning_bot.adapters.discord.settings import parse_snowflakes

    try:
        (value,) = parse_snowflakes("--guild", raw)
    except (InvalidConfig, ValueError):
        raise argparse.ArgumentTypeError(f"not a Discord guild id: {raw[:40]!r}") from None
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add `sync` and `run` to `parser` (its `discord_command` names the one chosen)."""
    sub = parser.add_subparsers(dest="discord_command", required=True)
    sync = sub.add_parser(
        "sync",
        help="register /learning with Discord (run on deploy, not on every start)",
        description=(
            "Register /learning with Discord. With --guild (or DISCORD_GUILD_IDS) the commands "
            "go to those guilds and show at once: use that while testing. Otherwise they are "
            "registered globally. A guild that has both shows every command twice."
        ),
    )
    sync.add_argument(
        "--guild",
        type=_guild_id,
        action="append",
        metavar="ID",
        help="sync to this guild only (repeatable; default: DISCORD_GUILD_IDS, else global)",
    )
    sync.add_argument(
        "--global",
        dest="global_sync",
        action="store_true",
        help="sync globally even when DISCORD_GUILD_IDS is set",
    )
    sync.add_argument(
        "--clear",
        action="store_true",
        help="remove the commands instead (from those guilds, or globally)",
    )
    sub.add_parser("run", help="connect to Discord and answer /learning until stopped")


def sync_targets(args: argparse.Namespace, settings: DiscordSettings) -> list[int | None]:
    """The guilds to sync (None: global): --guild, else --global, else DISCORD_GUILD_IDS."""
    if args.guild:
        return list(dict.fromkeys(args.guild))
    if args.global_sync or not settings.guild_ids:
        return [None]
    return list(settings.guild_ids)
