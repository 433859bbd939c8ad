"""The console: an interactive prompt where `/learning ...` behaves exactly as in chat."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TextIO

from bot.commands import CancelCommand, Command, ConfirmCommand
from bot.render_text import render_text
from bot.replies import Reply

BANNER = (
    "learning-bot console — type /learning commands as you would in chat "
    "(/learning help lists them); `confirm`/`cancel` answer a confirmation; `quit` leaves."
)


def run_console(
    send: Callable[[Command | str], Reply],
    *,
    read: Callable[[str], str] = input,
    out: TextIO = sys.stdout,
) -> int:
    """Read commands until EOF or `quit`; returns the exit code."""
    print(BANNER, file=out, flush=True)
    pending: str | None = None
    while True:
        try:
            line = read("learning> ").strip()
        except EOFError:
            print(file=out)
            return 0
        except KeyboardInterrupt:
            print(file=out)
            return 130
        if not line:
            continue
        word = line.lower()
        if word in ("quit", "exit", "/quit", "/exit"):
            return 0
        if word in ("confirm", "cancel", "yes", "no"):
            if pending is None:
                print("Nothing to confirm.", file=out, flush=True)
                continue
            command = (
                ConfirmCommand(pending) if word in ("confirm", "yes") else CancelCommand(pending)
            )
            pending = None
            reply = send(command)
        else:
            if word.startswith("/") and not word.startswith("/learning"):
                print(
                    f"Unknown command {line.split()[0]!r}; try /learning help.",
                    file=out,
                    flush=True,
                )
                continue
            reply = send(line)
            tokens = [a.token for a in reply.actions if a.command == "confirm"]
            pending = tokens[0] if tokens else pending
        print(render_text(reply), file=out, flush=True)
