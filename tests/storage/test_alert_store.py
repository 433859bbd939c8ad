"""Subscriptions, alert states, claimed messages and the sender's lease, on SQLite and
PostgreSQL."""

from __future__ import annotations

from learning_bot.engine.alert_records import AlertState, Subscription
from learning_bot.storage import SqlStore
from learning_bot.storage.alerts import SqlAlertStore


def _sub(kind: str = "alerts", channel: str = "C1") -> Subscription:
    return Subscription(0, "slack", channel, "T1", "default", kind, "U1", 1000)


def test_subscribe_is_idempotent_and_resumes_a_paused_one(store: SqlStore) -> None:
    alerts = SqlAlertStore(store.engine)
    first, created = alerts.subscribe(_sub())
    assert created and first.id > 0 and not first.paused
    assert alerts.pause(first.id, "channel_not_found", 2000)
    assert not alerts.pause(first.id, "again", 3000)
    paused = alerts.subscriptions(surface="slack", channel="C1")
    assert [(s.paused_at, s.paused_reason) for s in paused] == [(2000, "channel_not_found")]
    again, created = alerts.subscribe(_sub())
    assert not created and again.id == first.id and not again.paused
    alerts.subscribe(_sub("digest daily"))
    alerts.subscribe(_sub(channel="C2"))
    assert alerts.unsubscribe("slack", "C1", "default", "alerts") == 1
    assert [s.kind for s in alerts.subscriptions(channel="C1")] == ["digest daily"]
    assert alerts.unsubscribe("slack", "C1", "default", None) == 1
    assert [s.channel for s in alerts.subscriptions()] == ["C2"]


def test_a_message_is_claimed_once_and_counts_against_its_channel(store: SqlStore) -> None:
    alerts = SqlAlertStore(store.engine)
    sub, _ = alerts.subscribe(_sub())
    assert alerts.claim_message(sub.id, "starvation:web", 1, "firing", "a", 10_000)
    assert not alerts.claim_message(sub.id, "starvation:web", 1, "firing", "b", 10_001)
    assert alerts.sent_message(sub.id, "starvation:web", 1, "firing").sent_at is None  # type: ignore[union-attr]
    # an unsent claim older than `stale_before` is taken over; a newer one is not
    assert not alerts.claim_message(sub.id, "starvation:web", 1, "firing", "c", 10_100, 10_000)
    assert alerts.claim_message(sub.id, "starvation:web", 1, "firing", "c", 10_100, 10_001)
    alerts.release_message(sub.id, "starvation:web", 1, "firing")
    assert alerts.sent_message(sub.id, "starvation:web", 1, "firing") is None
    assert alerts.claim_message(sub.id, "starvation:web", 1, "firing", "a", 10_000)
    alerts.message_sent(sub.id, "starvation:web", 1, "firing", 10_002, "1700000000.0001")
    sent = alerts.sent_message(sub.id, "starvation:web", 1, "firing")
    assert sent is not None and sent.ref == "1700000000.0001" and sent.sent_at == 10_002
    assert alerts.sent_since("slack", "C1", 9_999) == 1
    assert alerts.sent_since("slack", "C1", 10_000) == 0
    assert alerts.sent_since("slack", "C2", 0) == 0


def test_alert_state_round_trips_and_lease_has_one_holder(store: SqlStore) -> None:
    alerts = SqlAlertStore(store.engine)
    state = AlertState("default", "accuracy", "firing", 1, 5, 6, None, '{"recent": 0.03}')
    alerts.save_alert_state(state)
    alerts.save_alert_state(AlertState("default", "accuracy", "resolved", 1, 5, 9, 9, "{}"))
    [stored] = alerts.alert_states("default")
    assert (stored.state, stored.resolved_at, stored.first_seen) == ("resolved", 9, 5)
    assert alerts.acquire_lease("alerts", "a", 1000, 500)
    assert not alerts.acquire_lease("alerts", "b", 1200, 500)
    assert alerts.acquire_lease("alerts", "a", 1300, 500)  # renewed by its holder
    assert alerts.acquire_lease("alerts", "b", 1801, 500)  # expired: taken over
    assert not alerts.acquire_lease("alerts", "a", 1900, 500)
