"""The cancel button of a confirmation prompt (or `cancel` typed at the console)."""

from __future__ import annotations

from dataclasses import dataclass

from learning_bot.bot.commands.base import CommandSpec, Context, anyone
from learning_bot.bot.invocation import Command
from learning_bot.bot.replies import Reply


@dataclass(frozen=True, slots=True)
class CancelCommand(Command):
    token: str


def run(ctx: Context, command: CancelCommand) -> Reply:
    return ctx.cancel(command.token)


SPEC = CommandSpec(
    name="cancel",
    type=CancelCommand,
    run=run,
    order=2001,
    access=anyone,
    mutating=lambda command: True,
    rate_limited=False,
)
