"""The confirm and cancel buttons of a confirmation prompt (or `confirm` typed at the
console): never typed after `/learning`; the bus spends the confirmation exactly once."""

from __future__ import annotations

from dataclasses import dataclass

from learning_bot.bot.commands.base import CommandSpec, Context, anyone
from learning_bot.bot.invocation import Command
from learning_bot.bot.replies import Reply


@dataclass(frozen=True, slots=True)
class ConfirmCommand(Command):
    """A click on a confirmation's confirm button (or `confirm` typed at the console)."""

    token: str


def run(ctx: Context, command: ConfirmCommand) -> Reply:
    return ctx.confirm(command.token)


SPEC = CommandSpec(
    name="confirm",
    type=ConfirmCommand,
    run=run,
    order=2000,
    access=anyone,
    mutating=lambda command: True,
    rate_limited=False,
)
