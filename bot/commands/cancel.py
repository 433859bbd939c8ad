"""The cancel button of a confirmation prompt (or `cancel` typed at the console)."""

from __future__ import annotations

from dataclasses import dataclass

from learning_bot.bot.commands.confirm import button
from learning_bot.bot.invocation import Command


@dataclass(frozen=True, slots=True)
class CancelCommand(Command):
    token: str


SPEC = button("cancel", CancelCommand, 2001, lambda ctx: ctx.cancel)
