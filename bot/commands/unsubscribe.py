"""`/learning unsubscribe [alerts|digest daily|digest weekly|changes|all] [learner]`: stops
one subscription of this channel, or all of them (admins)."""

from __future__ import annotations

from dataclasses import dataclass

from learning_bot.bot.commands.base import CommandSpec, Context, Form, Option
from learning_bot.bot.commands.subscribe import (
    ACCESS,
    KINDS,
    LEARNER,
    kind_and_learner,
    learner_option,
)
from learning_bot.bot.invocation import Command
from learning_bot.bot.replies import Reply


@dataclass(frozen=True, slots=True)
class UnsubscribeCommand(Command):
    kind: str | None = "alerts"
    """None: every kind."""
    learner: str | None = None


def parse(rest: list[str]) -> UnsubscribeCommand:
    return UnsubscribeCommand(*kind_and_learner("unsubscribe", rest))


def run(ctx: Context, command: UnsubscribeCommand) -> Reply:
    handlers = ctx.subscription_handlers()
    handlers.check_channel(ctx.invocation)
    handlers.check_learner(ctx.learner)
    return handlers.unsubscribe(command.kind, ctx.invocation, ctx.learner)


SPEC = CommandSpec(
    name="unsubscribe",
    type=UnsubscribeCommand,
    run=run,
    order=70,
    grammar=("unsubscribe [alerts|digest daily|digest weekly|changes|all] [learner]",),
    help=(
        "{cmd} unsubscribe [alerts|digest daily|digest weekly|changes|all] [learner] — stops "
        "one subscription of this channel (or all of them). Admins only."
    ),
    parse=parse,
    access=ACCESS,
    mutating=lambda command: True,
    learner=lambda command: command.learner,
    form=Form(
        "Stop one of this channel's subscriptions (admins)",
        (
            Option(
                "kind",
                str,
                "alerts (default), digest daily, digest weekly, changes, or all",
                default="alerts",
                choices=(*KINDS, "all"),
            ),
            LEARNER,
        ),
        build=lambda v: UnsubscribeCommand(
            None if v["kind"] == "all" else v["kind"] or "alerts", learner_option(v)
        ),
    ),
)
