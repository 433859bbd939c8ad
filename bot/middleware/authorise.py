"""Authorisation: guests only read; resets, phase changes and subscriptions are for admins (a
surface's own admins, or ids on the LEARNING_BOT_ADMINS allow-list); rewards optionally too."""

from __future__ import annotations

from collections.abc import Set

from learning_bot.bot.commands.registry import spec_of
from learning_bot.bot.errors import FORBIDDEN
from learning_bot.bot.invocation import Command, Invocation
from learning_bot.bot.middleware import Call, Middleware
from learning_bot.bot.ports import CommandBatch
from learning_bot.bot.replies import Reply, error_reply
from learning_bot.engine.errors import Forbidden


class Authorise(Middleware):
    def __init__(self, admins: Set[str], reward_admins_only: bool) -> None:
        self.admins = admins
        self.reward_admins_only = reward_admins_only

    def is_admin(self, invocation: Invocation) -> bool:
        actor = invocation.actor
        return (
            actor.is_admin
            or actor.id in self.admins
            or f"{invocation.surface}:{actor.id}" in self.admins
        )

    def check(self, invocation: Invocation, command: Command) -> None:
        """Raise Forbidden when the actor may not run `command` here (the command's own
        access rule, for what it changes; some guard their reads too)."""
        try:
            spec = spec_of(command)
        except ValueError:  # not a command: the bus answers that
            return
        if spec.guards_reads or spec.mutating(command):
            spec.access(self, invocation, command)

    def on_allow_list(self, invocation: Invocation) -> bool:
        actor_id = invocation.actor.id
        return actor_id in self.admins or f"{invocation.surface}:{actor_id}" in self.admins

    def before(self, call: Call, batch: CommandBatch | None) -> Reply | None:
        try:
            self.check(call.invocation, call.command)
        except Forbidden as exc:
            return error_reply(str(exc), code=FORBIDDEN.code)
        return None
