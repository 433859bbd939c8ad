"""`discord sync` and `discord run`: the Discord surface's command line.

    learning-bot discord sync [--guild ID]... [--global] [--clear]
    learning-bot discord run

`DISCORD_COMMAND` declares them for the `learning-bot` command line (`add_arguments` from
`adapters.discord.arguments`) and runs them with `run_command`; discord.py is imported only
when one runs."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, TextIO

from learning_bot.adapters.discord.arguments import add_arguments, sync_targets
from learning_bot.bot.surface import SurfaceCommand
from learning_bot.engine.errors import InvalidConfig

if TYPE_CHECKING:
    from learning_bot.adapters.discord.settings import DiscordSettings
    from learning_bot.bot.bus import CommandBus
    from learning_bot.bot.surface import SurfaceHost

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2


async def sync_from_cli(
    settings: DiscordSettings,
    bus: CommandBus,
    targets: Sequence[int | None],
    *,
    clear: bool = False,
    out: TextIO | None = None,
) -> int:
    """Log in, sync (or clear) each target, log out. Prints one line per target."""
    from learning_bot.adapters.discord.client import clear_commands, create_client, sync_commands

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
    import asyncio
    import logging
    import signal

    import discord

    from learning_bot.adapters.discord.client import create_client

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
        # discord.py stops cleanly on Ctrl-C only (asyncio.run cancels the client on SIGINT
        # when SIGINT has Python's own handler). Give SIGINT that handler even when the process
        # was started with SIGINT ignored (a script's `learning-bot discord run &` inherits
        # that), and make SIGTERM (a service manager's stop) end the run the same way.
        signal.signal(signal.SIGINT, signal.default_int_handler)
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


def run(args: argparse.Namespace, host: SurfaceHost) -> int:
    """`learning-bot discord ...`: its settings first, then the app's bus."""
    from learning_bot.adapters.discord.settings import load_discord_settings

    settings = load_discord_settings()
    return run_command(args, host.bus, settings)


DISCORD_COMMAND = SurfaceCommand(
    name="discord",
    help="the Discord surface: sync the /learning commands, or run the bot alone",
    description="sync: register /learning with Discord; run: serve it without the API.",
    add_arguments=add_arguments,
    run=run,
    no_url="it runs or registers the Discord bot itself",
)

__all__ = [
    "DISCORD_COMMAND",
    "add_arguments",
    "run",
    "run_command",
    "sync_from_cli",
    "sync_targets",
]
