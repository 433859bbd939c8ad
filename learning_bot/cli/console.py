"""`learning-bot console`: the interactive prompt, on the local database or a running server."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from learning_bot.cli.parser import Command

if TYPE_CHECKING:
    from learning_bot.settings import Settings


def _run(args: argparse.Namespace, settings: Settings) -> int:
    if args.url:
        from learning_bot.adapters.terminal import remote_sender, run_console

        return run_console(remote_sender(args.url, args.learner, "console"))
    from learning_bot.adapters.terminal import local_sender, run_console
    from learning_bot.cli.chat import learner_app

    with learner_app(settings, args) as app:
        return run_console(local_sender(app.bus, "console", surface="console"))


COMMAND = Command(
    name="console",
    help="an interactive prompt for the commands, with history and Tab completion",
    description=(
        "An interactive prompt: type status, reward, reset, phase or help as after "
        "`learning-bot`. Up and Down walk the history (kept in the data directory), Tab "
        "completes commands and arm ids or labels, `quit` leaves."
    ),
    run=_run,
    no_url=None,
)
