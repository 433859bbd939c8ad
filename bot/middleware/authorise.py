"""Authorisation: guests only read; resets, phase changes and subscriptions are for admins (a
surface's own admins, or ids on the LEARNING_BOT_ADMINS allow-list); rewards optionally too."""

from __future__ import annotations

from collections.abc import Set

from learning_bot.bot.commands import (
    CancelCommand,
    Command,
    ConfigCommand,
    ConfirmCommand,
    PhaseCommand,
    ResetCommand,
    RewardCommand,
    SubscribeCommand,
    UnsubscribeCommand,
    is_mutating,
)
from learning_bot.bot.errors import FORBIDDEN
from learning_bot.bot.invocation import Invocation
from learning_bot.bot.middleware import Call, Middleware
from learning_bot.bot.ports import CommandBatch
from learning_bot.bot.replies import Reply, error_reply
from learning_bot.engine.errors import Forbidden

CHAT_SURFACES = frozenset({"slack", "discord"})
"""Surfaces whose admins are a workspace's or a guild's, not the deployment's."""
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
        if isinstance(command, ConfigCommand):
            self._check_config(invocation, command)
            return
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

    def _check_config(self, invocation: Invocation, command: ConfigCommand) -> None:
        """Settings are for admins to change; naming a learner other than the conversation's
        in a chat workspace (where admins are the workspace's) needs the allow-list, so one
        workspace's admins cannot change another's learner."""
        if command.changes:
            if invocation.actor.is_guest:
                raise Forbidden("Guests can look at settings, but cannot change them.")
            if not self.is_admin(invocation):
                raise Forbidden(
                    f"Only admins can change a learner's settings. Ask a workspace admin, or "
                    f"{ADMIN_LIST_HINT}."
                )
        if (
            command.learner is not None
            and invocation.surface in CHAT_SURFACES
            and not self.on_allow_list(invocation)
        ):
            raise Forbidden(
                f"Naming a learner in config is for operators: {ADMIN_LIST_HINT}, or leave "
                "the learner out to use this conversation's."
            )

    def on_allow_list(self, invocation: Invocation) -> bool:
        actor_id = invocation.actor.id
        return actor_id in self.admins or f"{invocation.surface}:{actor_id}" in self.admins

    def before(self, call: Call, batch: CommandBatch | None) -> Reply | None:
        try:
            self.check(call.invocation, call.command)
        except Forbidden as exc:
            return error_reply(str(exc), code=FORBIDDEN.code)
        return None
