"""`discord sync` and `discord run`: the Discord surface's command line.

    learning-bot discord sync [--guild ID]... [--global] [--clear]
    learning-bot discord run

`add_arguments` declares the subcommands and `run_command` runs them; the `learning-bot`
command line mounts both."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from collections.abc import Sequence
from typing import TextIO

import discord

from adapters.discord.client import clear_commands, create_client, sync_commands
from adapters.discord.settings import DiscordSettings, parse_snowflakes
from bot.bus import CommandBus
from engine.errors import InvalidConfig

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2


def _guild_id(raw: str) -> int:
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


async def sync_from_cli(
    settings: DiscordSettings,
    bus: CommandBus,
    targets: Sequence[int | None],
    *,
    clear: bool = False,
    out: TextIO | None = None,
) -> int:
    """Log in, sync (or clear) each target, log out. Prints one line per target."""
    out = out or sys.stdout
    token = settings.require_token()
    async with create_client(settings, bus) as client:
        await client.login(token)
        for guild_id in targets:
            where = f"guild {guild_id}" if guild_id is not None else "globally"
            if clear:
                await clear_commands(client, guild_id)
                print(f"Removed every command {where.replace('guild', 'from guild')}.", file=out)
                continue
            synced = await sync_commands(client, guild_id)
            names = ", ".join(f"/{c.name}" for c in synced) or "nothing"
            note = (
                "it shows in that guild at once"
                if guild_id is not None
                else "it can take a while to show in every guild; clear testing guilds "
                "(sync --guild ID --clear) or they show it twice"
            )
            print(f"Synced {names} {where}: {note}.", file=out)
    return EXIT_OK


def run_command(
    args: argparse.Namespace,
    bus: CommandBus,
    settings: DiscordSettings,
    *,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Run the subcommand `add_arguments` parsed. Errors: one line on `err`, exit 1 or 2."""
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        if args.discord_command == "sync":
            return asyncio.run(
                sync_from_cli(
                    settings, bus, sync_targets(args, settings), clear=args.clear, out=out
                )
            )
        client = create_client(settings, bus)
        # discord.py stops cleanly on Ctrl-C only: make SIGTERM (a service manager's stop)
        # end the run the same way.
        signal.signal(signal.SIGTERM, signal.default_int_handler)
        client.run(
            settings.require_token(),
            log_handler=logging.StreamHandler(err),
            log_level=logging.INFO,
            root_logger=True,
        )
        return EXIT_OK
    except InvalidConfig as exc:
        print(f"learning-bot discord: {exc}", file=err)
        return EXIT_USAGE
    except discord.LoginFailure:
        print(
            "learning-bot discord: Discord refused DISCORD_TOKEN; reset it in the Developer "
            "Portal (Bot -> Reset Token)",
            file=err,
        )
        return EXIT_ERROR
    except discord.HTTPException as exc:
        print(f"learning-bot discord: Discord answered {exc.status}: {exc.text[:200]}", file=err)
        return EXIT_ERROR
