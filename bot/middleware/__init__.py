"""The command bus's middleware: one concern per module, in the order the bus runs them.

Each middleware sees a `Call` twice: `before` the command runs (it may answer instead, e.g. a
replayed or refused command) and `after`, with the reply. The bus runs every `before` that
needs storage in one transaction and every `after` in another, so a command costs at most two
command-log transactions whatever the chain holds."""

from __future__ import annotations

from dataclasses import dataclass

from learning_bot.bot.commands import Command
from learning_bot.bot.invocation import Invocation
from learning_bot.bot.ports import CommandBatch
from learning_bot.bot.replies import Reply


@dataclass(frozen=True, slots=True)
class Call:
    """One command on its way through the bus."""

    invocation: Invocation
    command: Command
    learner: str
    """The learner the command acts on."""


class Middleware:
    """Base class: does nothing; a concern overrides what it needs."""

    def touches_store(self, call: Call) -> bool:
        """Whether `before` or `after` use the command log for this call."""
        return False

    def before(self, call: Call, batch: CommandBatch | None) -> Reply | None:
        """An answer that stops the call here, or None to go on."""
        return None

    def after(self, call: Call, reply: Reply, batch: CommandBatch | None) -> None:
        """Called with the reply of every call that got past `before`."""
