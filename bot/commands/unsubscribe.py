"""`/learning unsubscribe [alerts|digest daily|digest weekly|changes|all] [learner]`: stops
one subscription of this channel, or all of them (admins)."""

from __future__ import annotations

from dataclasses import dataclass

from learning_bot.bot.commands.base import CommandSpec, Context, Form, always, own_learner
from learning_bot.bot.commands.subscribe import (
    ACCESS,
    KINDS,
    LEARNER,
    handlers_for,
    kind_and_learner,
    kind_option,
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
    return handlers_for(ctx).unsubscribe(command.kind, ctx.invocation, ctx.learner)


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
    mutating=always,
    learner=own_learner,
    form=Form(
        "Stop one of this channel's subscriptions (admins)",
        (
            kind_option(
                "alerts (default), digest daily, digest weekly, changes, or all", (*KINDS, "all")
            ),
            LEARNER,
        ),
        build=lambda v: UnsubscribeCommand(
            None if v["kind"] == "all" else v["kind"] or "alerts", learner_option(v)
        ),
    ),
)
