"""The confirm and cancel buttons of a confirmation prompt (or `confirm` typed at the
console): never typed after `/learning`; the bus spends the confirmation exactly once."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from learning_bot.bot.commands.base import C, CommandSpec, Context, always, anyone
from learning_bot.bot.invocation import Command
from learning_bot.bot.replies import Reply


@dataclass(frozen=True, slots=True)
class ConfirmCommand(Command):
    """A click on a confirmation's confirm button (or `confirm` typed at the console)."""

    token: str


def button(
    name: str, command: type[C], order: int, answer: Callable[[Context], Callable[[str], Reply]]
) -> CommandSpec[C]:
    """A button of a confirmation prompt: anyone may press it (the bus checks that it is
    the asker), not rate-limited; `answer` is what the context does with its token."""

    def run(ctx: Context, command: Any) -> Reply:
        return answer(ctx)(command.token)

    return CommandSpec(
        name=name,
        type=command,
        run=run,
        order=order,
        access=anyone,
        mutating=always,
        rate_limited=False,
    )


SPEC = button("confirm", ConfirmCommand, 2000, lambda ctx: ctx.confirm)
