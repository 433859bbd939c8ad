"""`/learning subscribe`, `unsubscribe` and `subscriptions`: which channel hears of which
learner's alerts, digests and changes. The proactive messages themselves are sent by
bot.alerting; these only store who wants them."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Protocol

from learning_bot.bot.formatting import fmt_time
from learning_bot.bot.invocation import Invocation
from learning_bot.bot.ports import SubscriptionStore
from learning_bot.bot.replies import Column, Reply, ReplyKind, Table, Text
from learning_bot.engine.errors import InvalidInput, Unavailable
from learning_bot.engine.posterior import WallClock, now_ms

if TYPE_CHECKING:
    from learning_bot.engine.alert_records import Subscription


class Learners(Protocol):
    def get(self, learner: str, *, create: bool = True) -> object:
        """The learner's service; NotFound for an unknown learner when not `create`."""
        ...


CHANNEL_SURFACES = frozenset({"slack", "discord"})
"""The surfaces whose channels the bot can post to."""

WHAT = {
    "alerts": "alerts (starved arms, accuracy or savings collapsing, dead letters, storage)",
    "digest daily": "a daily digest",
    "digest weekly": "a weekly digest",
    "changes": "phase changes, resets and undos",
}
"""What a channel can subscribe to, and how a reply names it."""

SUBSCRIPTION_KINDS = tuple(WHAT)
"""What a channel can subscribe to: alerts, a daily or weekly digest, phase changes/resets."""


def subscription_state(sub: Subscription) -> str:
    """`active`, or `paused since ...: why` (what status and the list show)."""
    if sub.paused_at is None:
        return "active"
    return f"paused since {fmt_time(sub.paused_at)}: {sub.paused_reason or 'unknown'}"


class SubscriptionHandlers:
    """What the three subscription commands do, and how their answers read."""

    def __init__(
        self, store: SubscriptionStore, services: Learners, clock: WallClock = now_ms
    ) -> None:
        self.store = store
        self.services = services
        self.clock = clock

    @staticmethod
    def check_channel(invocation: Invocation) -> None:
        """InvalidInput unless the invocation comes from a channel the bot can post to."""
        if invocation.surface not in CHANNEL_SURFACES or not invocation.conversation:
            raise InvalidInput(
                "subscriptions belong to a Slack or Discord channel: run this in the channel "
                "that should receive the messages"
            )

    def check_learner(self, learner: str) -> None:
        """NotFound for a learner that does not exist."""
        self.services.get(learner, create=False)

    def with_paused_notice(self, reply: Reply, invocation: Invocation) -> Reply:
        """A status asked in a channel with paused subscriptions says so."""
        if invocation.surface not in CHANNEL_SURFACES or not invocation.conversation:
            return reply
        try:
            subs = self.store.subscriptions(
                surface=invocation.surface, channel=invocation.conversation
            )
        except Unavailable:
            return reply
        paused = [s for s in subs if s.paused]
        if not paused:
            return reply
        kinds = ", ".join(f"{s.kind} ({s.paused_reason})" for s in paused)
        note = Text(f"Paused subscriptions here: {kinds}. See /learning subscriptions.")
        data = {**reply.data, "pausedSubscriptions": [s.kind for s in paused]}
        return replace(reply, blocks=(*reply.blocks, note), data=data, compact=None)

    def subscribe(self, kind: str, invocation: Invocation, learner: str) -> Reply:
        if kind not in SUBSCRIPTION_KINDS:
            raise InvalidInput(f"cannot subscribe to {kind!r}")
        from learning_bot.engine.alert_records import Subscription

        sub, created = self.store.subscribe(
            Subscription(
                id=0,
                surface=invocation.surface,
                channel=invocation.conversation,
                scope=invocation.scope,
                learner=learner,
                kind=kind,
                created_by=invocation.actor.id,
                created_at=self.clock(),
            )
        )
        what = WHAT[sub.kind]
        text = (
            f"This channel now gets {what} for learner {learner}."
            if created
            else f"This channel already gets {what} for learner {learner}; it is active."
        )
        return Reply(
            ReplyKind.OK,
            (Text(text),),
            text,
            data={"subscription": sub.id, "kind": sub.kind, "learner": learner, "new": created},
        )

    def unsubscribe(self, kind: str | None, invocation: Invocation, learner: str) -> Reply:
        """`kind` None: every kind."""
        removed = self.store.unsubscribe(invocation.surface, invocation.conversation, learner, kind)
        what = "any subscription" if kind is None else WHAT[kind]
        text = (
            f"This channel no longer gets {what} for learner {learner}."
            if removed
            else f"This channel had no subscription to {what} for learner {learner}."
        )
        return Reply(ReplyKind.OK, (Text(text),), text, data={"removed": removed})

    def list(self, invocation: Invocation) -> Reply:
        subs = self.store.subscriptions(surface=invocation.surface, channel=invocation.conversation)
        if not subs:
            text = "This channel has no subscriptions. Admins add one with /learning subscribe."
            return Reply(ReplyKind.INFO, (Text(text),), text, data={"subscriptions": []})
        rows = tuple(
            (s.kind, s.learner, s.created_by, fmt_time(s.created_at), subscription_state(s))
            for s in subs
        )
        table = Table(
            (Column("Kind"), Column("Learner"), Column("By"), Column("Since"), Column("State")),
            rows,
            "Subscriptions of this channel",
        )
        paused = [s for s in subs if s.paused]
        blocks: list[Text | Table] = [table]
        if paused:
            blocks.append(
                Text(
                    f"{len(paused)} paused: the bot could not post here. Invite it back and "
                    "run /learning subscribe again to resume.",
                    muted=True,
                )
            )
        summary = f"{len(subs)} subscription(s), {len(paused)} paused"
        return Reply(
            ReplyKind.INFO,
            tuple(blocks),
            summary,
            data={
                "subscriptions": [
                    {
                        "kind": s.kind,
                        "learner": s.learner,
                        "by": s.created_by,
                        "since": s.created_at,
                        "paused": s.paused,
                        "pausedReason": s.paused_reason,
                    }
                    for s in subs
                ]
            },
        )
