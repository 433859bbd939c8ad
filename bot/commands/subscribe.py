"""`/learning subscribe [alerts|digest daily|digest weekly|changes] [learner]`: this channel
gets a learner's alerts (default), a daily or weekly digest, or its phase changes and
resets (admins). The messages themselves are sent by bot.alerting."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from learning_bot.bot.commands.base import (
    CommandSpec,
    Context,
    Form,
    Option,
    UsageError,
    admins,
    always,
    own_learner,
    shown,
    unexpected,
)
from learning_bot.bot.invocation import Command
from learning_bot.bot.replies import Reply
from learning_bot.bot.subscriptions import SUBSCRIPTION_KINDS
from learning_bot.engine.bounds import MAX_LEARNER_NAME, check_learner_name
from learning_bot.engine.errors import InvalidInput

if TYPE_CHECKING:
    from learning_bot.bot.subscriptions import SubscriptionHandlers

KINDS = tuple(SUBSCRIPTION_KINDS)
ACCESS = admins("change this channel's subscriptions")


@dataclass(frozen=True, slots=True)
class SubscribeCommand(Command):
    """Subscribe this channel to a learner's alerts, digests or changes (admins)."""

    kind: str = "alerts"
    """One of bot.subscriptions.SUBSCRIPTION_KINDS."""
    learner: str | None = None
    """None: the learner this workspace or guild is mapped to."""


def kind_and_learner(head: str, rest: list[str]) -> tuple[str | None, str | None]:
    """`[alerts|digest daily|digest weekly|changes] [learner]` (`all` too for unsubscribe):
    the kind (None: all) and the learner named, if any."""
    words = [w.lower() for w in rest]
    kind: str | None = "alerts"
    taken = 0
    if words[:1] == ["digest"]:
        if len(words) < 2 or words[1] not in ("daily", "weekly"):
            raise UsageError("'digest' needs daily or weekly, e.g. subscribe digest daily", head)
        kind, taken = f"digest {words[1]}", 2
    elif words[:1] and words[0] in ("alerts", "changes"):
        kind, taken = words[0], 1
    elif words[:1] == ["all"] and head == "unsubscribe":
        kind, taken = None, 1
    learner = rest[taken] if len(rest) > taken else None
    if len(rest) > taken + 1:
        raise unexpected(rest[taken + 1], head)
    if learner is not None:
        try:
            check_learner_name(learner)
        except InvalidInput as exc:
            raise UsageError(
                f"{shown(learner)!r} is neither alerts, digest daily, digest weekly, changes "
                f"nor a learner name ({exc})",
                head,
            ) from None
    return kind, learner


def learner_option(values: Mapping[str, Any]) -> str | None:
    """The `learner` option, checked against the learner-name rule."""
    learner = values["learner"]
    return None if learner is None else check_learner_name(learner)


def parse(rest: list[str]) -> SubscribeCommand:
    kind, learner = kind_and_learner("subscribe", rest)
    assert kind is not None
    return SubscribeCommand(kind, learner)


def handlers_for(ctx: Context) -> SubscriptionHandlers:
    """The subscription handlers, once this channel can have subscriptions and the learner
    exists."""
    handlers = ctx.subscription_handlers()
    handlers.check_channel(ctx.invocation)
    handlers.check_learner(ctx.learner)
    return handlers


def run(ctx: Context, command: SubscribeCommand) -> Reply:
    return handlers_for(ctx).subscribe(command.kind, ctx.invocation, ctx.learner)


LEARNER = Option(
    "learner", str, "The learner (default: this server's)", low=1, high=MAX_LEARNER_NAME
)


def kind_option(description: str, choices: tuple[str, ...]) -> Option:
    """The `kind` option (alerts when left out)."""
    return Option("kind", str, description, default="alerts", choices=choices)


SPEC = CommandSpec(
    name="subscribe",
    type=SubscribeCommand,
    run=run,
    order=60,
    grammar=("subscribe [alerts|digest daily|digest weekly|changes] [learner]",),
    help=(
        "{cmd} subscribe [alerts|digest daily|digest weekly|changes] [learner] — this channel "
        "gets the learner's alerts (default), a daily or weekly digest, or its phase changes "
        "and resets. Admins only."
    ),
    parse=parse,
    access=ACCESS,
    mutating=always,
    learner=own_learner,
    form=Form(
        "Post a learner's alerts, digests or changes in this channel (admins)",
        (
            kind_option(
                "alerts (default), digest daily, digest weekly, or changes (phase, resets)", KINDS
            ),
            LEARNER,
        ),
        build=lambda v: SubscribeCommand(v["kind"] or "alerts", learner_option(v)),
    ),
)
