"""Authorisation: guests only read; resets, phase changes and subscriptions are for admins (a
surface's own admins, or ids on the LEARNING_BOT_ADMINS allow-list); rewards optionally too."""

from __future__ import annotations

from collections.abc import Set

from bot.commands import (
    CancelCommand,
    Command,
    ConfirmCommand,
    PhaseCommand,
    ResetCommand,
    RewardCommand,
    SubscribeCommand,
    UnsubscribeCommand,
    is_mutating,
)
from bot.errors import FORBIDDEN
from bot.invocation import Invocation
from bot.middleware import Call, Middleware
from bot.ports import CommandBatch
from bot.replies import Reply, error_reply
from engine.errors import Forbidden

ADMIN_LIST_HINT = "have your id added to the admin allow-list (LEARNING_BOT_ADMINS)"


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
        """Raise Forbidden when the actor may not run `command` here."""
        if not is_mutating(command) or isinstance(command, ConfirmCommand | CancelCommand):
            return
        if invocation.actor.is_guest:
            raise Forbidden("Guests can look at status, but cannot change the learning layer.")
        if isinstance(command, RewardCommand):
            if self.reward_admins_only and not self.is_admin(invocation):
                raise Forbidden("Only admins can give rewards in this workspace.")
            return
        if isinstance(command, ResetCommand | PhaseCommand) and not self.is_admin(invocation):
            what = "reset posteriors" if isinstance(command, ResetCommand) else "change the phase"
            raise Forbidden(f"Only admins can {what}. Ask a workspace admin, or {ADMIN_LIST_HINT}.")
        if isinstance(command, SubscribeCommand | UnsubscribeCommand) and not self.is_admin(
            invocation
        ):
            raise Forbidden(
                f"Only admins can change this channel's subscriptions. Ask a workspace admin, "
                f"or {ADMIN_LIST_HINT}."
            )

    def before(self, call: Call, batch: CommandBatch | None) -> Reply | None:
        try:
            self.check(call.invocation, call.command)
        except Forbidden as exc:
            return error_reply(str(exc), code=FORBIDDEN.code)
        return None
