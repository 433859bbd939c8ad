"""What the command bus needs from storage: idempotency keys, rate-limit counters, the command
audit and pending confirmations. `storage.command_log.SqlCommandLog` implements it; records
cross this boundary as plain values, so storage needs nothing from this package."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from learning_bot.engine.alert_records import AlertState, SentMessage, Subscription
    from learning_bot.engine.store_records import AuditEntry

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class PendingConfirmation:
    """A destructive command waiting for its confirm or cancel click; used exactly once."""

    token: str
    learner: str
    actor_id: str
    surface: str
    command: str
    """The command to run on confirmation, as JSON."""
    summary: str
    created_at: int
    expires_at: int
    used_at: int | None = None
    used_by: str | None = None
    outcome: str | None = None
    """The reply the confirmation produced, as JSON."""

    @classmethod
    def from_mapping(cls, row: Mapping[str, Any]) -> PendingConfirmation:
        return cls(**{name: row[name] for name in cls.__slots__})

    def to_mapping(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}


class CommandBatch(Protocol):
    """Command-log operations that run together in one transaction."""

    def claim(self, key: str, at: int, lease_ms: int | None = None) -> tuple[bool, str | None]:
        """Claim an idempotency key: (True, None) when new, else (False, its stored reply or
        None while the first execution still runs). A claim is a lease: one without a reply
        that is older than `lease_ms` (its process died, or it outlived the deadline) is taken
        over, and the command runs again, once."""
        ...

    def hit_rate_limit(self, key: str, window_ms: int, at: int) -> int:
        """Count one more command for `key` in the window holding `at`; the count so far."""
        ...

    def finish(self, key: str, reply: str) -> None:
        """Store the reply of a claimed key."""
        ...

    def audit(self, learner: str, entry: AuditEntry) -> None:
        """Record a command in the learner's audit log (nothing when the learner does not
        exist: a refused command never creates one)."""
        ...


class CommandStore(Protocol):
    def in_transaction(self, work: Callable[[CommandBatch], T]) -> T:
        """Run `work` in one write transaction (retried as a whole on a transient error)."""
        ...

    def release_command(self, key: str) -> None: ...

    def marking(self, key: str, reply: str) -> AbstractContextManager[None]:
        """While the block runs (this thread), the first transaction that changes a learner
        also stores `reply` as claim `key`'s reply, in that transaction (when the claim has
        none yet): a change and the record that it was made commit together."""
        ...

    def create_confirmation(self, confirmation: Mapping[str, Any]) -> None: ...

    def get_confirmation(self, token: str) -> Mapping[str, Any] | None: ...

    def use_confirmation(
        self, token: str, actor_id: str, at: int, lease_ms: int | None = None
    ) -> bool:
        """Mark the confirmation used; False when it already was (exactly-once). A use
        without an outcome older than `lease_ms` is a dead process's: it is taken over."""
        ...

    def finish_confirmation(self, token: str, outcome: str) -> None: ...


class SubscriptionStore(Protocol):
    """Subscriptions, alert states, the messages owed to channels and the sender's lease."""

    def subscribe(self, subscription: Subscription) -> tuple[Subscription, bool]:
        """Store it (its id is ignored); (the stored one, True) when new, else the existing one
        resumed if it was paused, and False."""
        ...

    def unsubscribe(self, surface: str, channel: str, learner: str, kind: str | None) -> int:
        """Remove the channel's subscriptions to the learner (of one kind, or every kind);
        how many there were."""
        ...

    def subscriptions(
        self, *, surface: str | None = None, channel: str | None = None
    ) -> list[Subscription]: ...

    def pause(self, subscription_id: int, reason: str, at: int) -> bool:
        """Pause it with the reason; False when it already was."""
        ...

    def alert_states(self, learner: str) -> list[AlertState]: ...

    def save_alert_state(self, state: AlertState) -> None: ...

    def claim_message(
        self,
        subscription_id: int,
        alert: str,
        episode: int,
        stage: str,
        holder: str,
        at: int,
        stale_before: int | None = None,
    ) -> bool:
        """Claim the right to send one message; False when it was claimed already (unless
        that claim was never sent nor failed and was made before `stale_before`)."""
        ...

    def release_message(self, subscription_id: int, alert: str, episode: int, stage: str) -> None:
        """Give up an unsent claim (the send failed for a reason worth retrying)."""
        ...

    def message_sent(
        self,
        subscription_id: int,
        alert: str,
        episode: int,
        stage: str,
        at: int,
        ref: str | None,
        error: str | None = None,
    ) -> None: ...

    def sent_message(
        self, subscription_id: int, alert: str, episode: int, stage: str
    ) -> SentMessage | None: ...

    def sent_since(self, surface: str, channel: str, since: int) -> int:
        """Messages claimed for the channel after `since` (its rate limit)."""
        ...

    def acquire_lease(self, name: str, holder: str, at: int, ttl_ms: int) -> bool:
        """Take or renew the lease; False while another holder's lease runs."""
        ...
