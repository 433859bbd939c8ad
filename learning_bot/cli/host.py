"""The surfaces' own subcommands (`learning-bot slack`, `learning-bot discord ...`): each
registry entry of learning_bot.surfaces that brings one is added to the command line here, and
run with a `CommandHost`, the composition root's side of `bot.surface.SurfaceHost`."""

from __future__ import annotations

import argparse
import functools
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from learning_bot.adapters.terminal.commands import EXIT_OK, CliError
from learning_bot.bot.surface import Surface
from learning_bot.cli.parser import Command
from learning_bot.cli.serve import announce_public, run_loop, say, serve_until_stopped
from learning_bot.surfaces import SURFACES, SurfaceEntry

if TYPE_CHECKING:
    from learning_bot.app import App
    from learning_bot.bot.bus import CommandBus
    from learning_bot.settings import Settings


def surface_commands() -> list[Command]:
    """The subcommand of every registry entry that has one, in the registry's order."""
    return [
        Command(
            name=entry.command.name,
            help=entry.command.help,
            description=entry.command.description,
            arguments=entry.command.add_arguments,
            run=functools.partial(_run, entry),
            no_url=entry.command.no_url,
        )
        for entry in SURFACES
        if entry.command is not None
    ]


def _run(entry: SurfaceEntry, args: argparse.Namespace, settings: Settings) -> int:
    assert entry.command is not None
    host = CommandHost(settings, entry)
    try:
        return entry.command.run(args, host)
    finally:
        host.close()


class CommandHost:
    """What a surface's subcommand gets from the composition root: the app, built for serving
    on first use and closed when the command ends, and the ways of running a surface."""

    def __init__(self, settings: Settings, entry: SurfaceEntry) -> None:
        self.settings = settings
        self.entry = entry
        self._app: App | None = None

    def app(self) -> App:
        if self._app is None:
            from learning_bot.app import build_app

            self._app = build_app(self.settings, serving=True)
        return self._app

    @property
    def bus(self) -> CommandBus:
        return self.app().bus

    def surface(self) -> Surface:
        return self.entry.build(self.app(), os.environ)

    def serve_http(self, surfaces: Sequence[Surface], host: str, port: int) -> int:
        from learning_bot.adapters.http.server import serve
        from learning_bot.adapters.http.settings import http_settings

        announce_public(self.settings, say)
        run = serve(
            self.bus,
            host=host,
            port=port,
            settings=http_settings(),
            surfaces=list(surfaces),
            announce=say,
        )
        return serve_until_stopped(run)

    def run_alone(self, surface: Surface) -> int:
        announce_public(self.settings, say)
        run_loop(_alone(surface))
        return EXIT_OK

    def close(self) -> None:
        if self._app is not None:
            self._app.close()


async def _alone(surface: Surface) -> None:
    """Run one surface until SIGINT/SIGTERM, then stop it."""
    import asyncio
    import contextlib
    import signal

    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stopping.set)
    say(f"learning-bot: {surface.name} connected out; stop with Ctrl-C")
    task = asyncio.create_task(surface.run())
    waiter = asyncio.create_task(stopping.wait())
    try:
        await asyncio.wait([task, waiter], return_when=asyncio.FIRST_COMPLETED)
    finally:
        await asyncio.wait_for(surface.stop(), 10)
        waiter.cancel()
        if task.done() and task.exception() is not None:
            raise CliError(f"the {surface.name} surface failed: {task.exception()}")
        task.cancel()
    say("learning-bot: stopped")
