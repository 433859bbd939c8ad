"""The records of proactive messages: a channel's subscription, an alert's stored state and a
message claimed for a channel. Plain values, shared by the bot (which decides) and storage
(which keeps them)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Subscription:
    """One channel's subscription to one learner's alerts, digests or changes."""

    id: int
    surface: str
    channel: str
    scope: str
    learner: str
    kind: str
    created_by: str
    created_at: int
    paused_at: int | None = None
    paused_reason: str | None = None
    timezone: str | None = None

    @property
    def paused(self) -> bool:
        return self.paused_at is not None


@dataclass(frozen=True, slots=True)
class AlertState:
    """One alert of one learner as stored: firing or resolved, in its `episode`."""

    learner: str
    alert: str
    state: str
    episode: int
    first_seen: int
    last_seen: int
    resolved_at: int | None
    detail: str
    """The numbers of its latest evaluation, as JSON."""


@dataclass(frozen=True, slots=True)
class SentMessage:
    """A proactive message claimed for one subscription: its platform id once sent."""

    subscription_id: int
    alert: str
    episode: int
    stage: str
    sent_at: int | None
    ref: str | None
