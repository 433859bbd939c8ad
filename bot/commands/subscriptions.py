"""`/learning subscriptions`: what this channel is subscribed to, and whether the bot could
not post here (a paused subscription)."""

from __future__ import annotations

from dataclasses import dataclass

from learning_bot.bot.commands.base import CommandSpec, Context, Form, anyone, no_words
from learning_bot.bot.invocation import Command
from learning_bot.bot.replies import Reply


@dataclass(frozen=True, slots=True)
class SubscriptionsCommand(Command):
    """This channel's subscriptions (and whether any is paused)."""


def run(ctx: Context, command: SubscriptionsCommand) -> Reply:
    handlers = ctx.subscription_handlers()
    handlers.check_channel(ctx.invocation)
    return handlers.list(ctx.invocation)


SPEC = CommandSpec(
    name="subscriptions",
    type=SubscriptionsCommand,
    run=run,
    order=80,
    grammar=("subscriptions",),
    help=(
        "{cmd} subscriptions — what this channel is subscribed to, and whether the bot could "
        "not post here (a paused subscription)."
    ),
    parse=no_words("subscriptions", SubscriptionsCommand()),
    access=anyone,
    form=Form("What this channel is subscribed to, and if paused"),
)
