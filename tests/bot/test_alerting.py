"""The alert scheduler over a real database: a poisoning run trips the starvation and
accuracy alerts once each, their resolution updates the card and follows up in its thread;
a second scheduler (another replica, or a restart) sends nothing twice; a channel the bot
was removed from pauses its subscription after one failure."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from learning_bot.bot.alerting import AlertScheduler, AlertSettings, ChannelGone
from learning_bot.bot.bus import LearnerServices
from learning_bot.bot.replies import Reply
from learning_bot.engine import LearningConfig, Phase
from learning_bot.engine.alert_records import Subscription
from learning_bot.engine.errors import Unavailable
from learning_bot.engine.service import LearningService
from learning_bot.storage import SqlStore
from learning_bot.storage.alerts import SqlAlertStore
from tests.storage.helpers import ARMS, report

WEB = "tool:web:WebSearch"
WEDNESDAY = int(datetime(2026, 12, 9, 10, tzinfo=UTC).timestamp() * 1000)
"""10:00 UTC on a Wednesday: a daily digest is due, a weekly one (Mondays) is not."""


@dataclass
class RecordingSender:
    """A sender that keeps what it was asked to send (the scheduler's side of a surface)."""

    surface: str = "slack"
    gone: set[str] = field(default_factory=set)
    posts: list[tuple[str, str, str | None]] = field(default_factory=list)
    updates: list[tuple[str, str, str]] = field(default_factory=list)
    uploads: list[tuple[str, str, bytes, str | None]] = field(default_factory=list)

    async def post(self, channel: str, card: Reply, thread: str | None = None) -> str:
        if channel in self.gone:
            raise ChannelGone("not_in_channel")
        self.posts.append((channel, card.summary, thread))
        return f"ts-{len(self.posts)}"

    async def update(self, channel: str, ref: str, card: Reply) -> None:
        self.updates.append((channel, ref, card.summary))

    async def upload(
        self, channel: str, filename: str, data: bytes, title: str, thread: str | None
    ) -> None:
        self.uploads.append((channel, filename, data, thread))


@pytest.fixture
def store(sqlite_url: str) -> SqlStore:
    return SqlStore(sqlite_url)


def _services(store: SqlStore) -> tuple[LearnerServices, LearningService]:
    config = LearningConfig.for_policy("seed", phase=Phase.ACTIVE)

    def make(learner: str) -> LearningService:
        return LearningService(store, config, learner=learner, cache_ttl=0)

    services = LearnerServices(make, config, names=store.learner_names)
    return services, services.get("default")


def _runs(service: LearningService, start: int, count: int, *, poisoned: bool) -> None:
    for i in range(start, start + count):
        if poisoned:  # the web tool left out, and no included arm ever counted as used
            service.observe(report(f"t{i}", calls=("Grep",), excluded={WEB}))
        else:
            service.observe(report(f"t{i}", calls=("Read", "WebSearch")))


async def test_poisoning_fires_each_alert_once_and_resolves_in_its_thread(store: SqlStore) -> None:
    services, service = _services(store)
    alerts = SqlAlertStore(store.engine)
    _runs(service, 0, 100, poisoned=False)
    alerts.subscribe(Subscription(0, "slack", "C-alerts", "T1", "default", "alerts", "U1", 0))
    gone, _ = alerts.subscribe(
        Subscription(0, "slack", "C-gone", "T1", "default", "alerts", "U1", 0)
    )
    sender = RecordingSender(gone={"C-gone"})
    settings = AlertSettings(interval=0.05)
    first = AlertScheduler(alerts, services, [sender], settings, holder="a")
    assert await first.tick(now=1_000) == 0  # healthy: nothing to say

    _runs(service, 100, 60, poisoned=True)
    assert [s.arm_id for s in service.status().starved] == [WEB]
    assert await first.tick(now=2_000) == 2
    titles = sorted(summary for channel, summary, _ in sender.posts if channel == "C-alerts")
    assert titles == ["FIRING: Reward rate collapsed", "FIRING: Starved arm: WebSearch"]
    # one failure to post pauses the channel's subscription, once
    [paused] = [s for s in alerts.subscriptions() if s.id == gone.id]
    assert paused.paused and paused.paused_reason == "not_in_channel"

    # another replica (or this one restarted) with the lease expired: nothing is sent twice
    again = AlertScheduler(alerts, services, [sender], settings, holder="b")
    assert await again.tick(now=2_000 + settings.lease_ms + 1) == 0
    assert len(sender.posts) == 2

    _runs(service, 160, 120, poisoned=False)
    assert await again.tick(now=900_000) == 2
    follow_ups = [(summary, thread) for _, summary, thread in sender.posts[2:]]
    assert sorted(follow_ups) == [
        ("Resolved: Reward rate collapsed.", "ts-1"),
        ("Resolved: Starved arm: WebSearch.", "ts-2"),
    ] or sorted(follow_ups) == [
        ("Resolved: Reward rate collapsed.", "ts-2"),
        ("Resolved: Starved arm: WebSearch.", "ts-1"),
    ]
    assert sorted(u[2] for u in sender.updates) == [
        "RESOLVED: Reward rate collapsed",
        "RESOLVED: Starved arm: WebSearch",
    ]
    assert await again.tick(now=950_000) == 0


async def test_a_replica_without_the_lease_sends_nothing(store: SqlStore) -> None:
    services, service = _services(store)
    alerts = SqlAlertStore(store.engine)
    _runs(service, 0, 100, poisoned=False)
    alerts.subscribe(Subscription(0, "slack", "C1", "T1", "default", "alerts", "U1", 0))
    _runs(service, 100, 60, poisoned=True)
    sender = RecordingSender()
    holder = AlertScheduler(alerts, services, [sender], AlertSettings(interval=60), holder="a")
    other = AlertScheduler(alerts, services, [sender], AlertSettings(interval=60), holder="b")
    assert await holder.tick(now=1_000) == 2
    assert await other.tick(now=2_000) == 0


async def test_changes_reach_the_changes_subscription(store: SqlStore) -> None:
    services, service = _services(store)
    alerts = SqlAlertStore(store.engine)
    _runs(service, 0, 5, poisoned=False)
    alerts.subscribe(Subscription(0, "slack", "C1", "T1", "default", "changes", "U1", 0))
    sender = RecordingSender()
    scheduler = AlertScheduler(alerts, services, [sender], AlertSettings(interval=60))
    await scheduler.tick(now=1_000)
    assert sender.posts == []  # the first values are only recorded
    service.reset([ARMS[0].id], actor="U1")
    service.set_phase(Phase.PASSIVE, actor="U1")
    assert await scheduler.tick(now=2_000) == 2
    assert sorted(s for _, s, _ in sender.posts) == ["Phase is now PASSIVE", "Reset #1 was made"]


async def test_two_replicas_evaluating_at_once_send_each_alert_once(database_url: str) -> None:
    """Two schedulers (two replicas) on one database, ticking together, and again after the
    lease changed hands: each alert reaches the channel once."""
    store = SqlStore(database_url)
    try:
        services, service = _services(store)
        alerts = SqlAlertStore(store.engine)
        _runs(service, 0, 100, poisoned=False)
        alerts.subscribe(Subscription(0, "slack", "C1", "T1", "default", "alerts", "U1", 0))
        _runs(service, 100, 60, poisoned=True)
        sender = RecordingSender()
        settings = AlertSettings(interval=60)
        replicas = [
            AlertScheduler(alerts, services, [sender], settings, holder=name) for name in "ab"
        ]
        sent = await asyncio.gather(*(r.tick(now=1_000) for r in replicas))
        assert sorted(sent) == [0, 2]
        later = 1_000 + settings.lease_ms + 1
        sent = await asyncio.gather(*(r.tick(now=later) for r in replicas))
        assert sent == [0, 0] and len(sender.posts) == 2
    finally:
        store.close()


async def test_a_daily_digest_is_sent_once_with_its_chart_and_quiet_channels_stay_quiet(
    store: SqlStore,
) -> None:
    services, service = _services(store)
    alerts = SqlAlertStore(store.engine)
    day = 86_400_000
    now = WEDNESDAY
    yesterday = now - day
    for i in range(40):
        service.observe(report(f"d{i}", calls=("Read",), timestamp=yesterday - 3_600_000 + i))
    alerts.subscribe(Subscription(0, "slack", "C1", "T1", "default", "digest daily", "U1", 0))
    alerts.subscribe(Subscription(0, "slack", "C2", "T1", "default", "digest weekly", "U1", 0))
    sender = RecordingSender()
    scheduler = AlertScheduler(alerts, services, [sender], AlertSettings(interval=60))
    assert await scheduler.tick(now=now) == 1  # the weekly one had no runs: skipped
    [(channel, summary, _)] = sender.posts
    assert channel == "C1" and summary.startswith("Daily digest — default") and "40 runs" in summary
    [(_, filename, png, thread)] = sender.uploads
    assert png.startswith(b"\x89PNG") and thread == "ts-1" and filename.endswith(".png")
    assert await scheduler.tick(now=now + 60_000) == 0  # once per period


async def test_a_dead_lettered_run_alerts_once(sqlite_url: str, tmp_path: Path) -> None:
    from learning_bot.storage.spool import Spool
    from learning_bot.storage.spooling_store import SpoolingStore

    store = SqlStore(sqlite_url)
    spooling = SpoolingStore(store, Spool(tmp_path / "spool"), retry_seconds=60)
    config = LearningConfig.for_policy("seed", phase=Phase.ACTIVE)

    def make(learner: str) -> LearningService:
        return LearningService(
            store, config, learner=learner, cache_ttl=0, writer=spooling, spool=spooling
        )

    services = LearnerServices(make, config, names=store.learner_names)
    service = services.get("default")
    service.observe(report("stored"))
    [stored], _ = service.traces(limit=1)
    spooling.spool.append(service.learner_id, [replace(stored, trace_id="spooled")])
    # a line no codec reads any more (a lone surrogate), as an older version could write it
    [path] = sorted(spooling.spool.dir.glob("*.jsonl"))
    line = json.loads(path.read_text().splitlines()[0])
    line["traceId"] = "bad-\ud800"
    path.write_text(json.dumps(line) + "\n")
    spooling.replay_now()
    assert spooling.health()["deadLetters"] == 1

    alerts = SqlAlertStore(store.engine)
    alerts.subscribe(Subscription(0, "discord", "42", "G1", "default", "alerts", "U1", 0))
    sender = RecordingSender(surface="discord")
    scheduler = AlertScheduler(alerts, services, [sender], AlertSettings(interval=60))
    assert await scheduler.tick(now=1_000) == 1
    assert await scheduler.tick(now=2_000) == 0
    assert [s for _, s, _ in sender.posts] == ["FIRING: Runs were dead-lettered"]
    spooling.close()
    store.close()


class FlakyAlertStore(SqlAlertStore):
    """The database going away: every lease round trip fails while `down`."""

    down = False

    def acquire_lease(self, name: str, holder: str, at: int, ttl_ms: int) -> bool:
        if self.down:
            raise Unavailable("database is unavailable")
        return super().acquire_lease(name, holder, at, ttl_ms)


class ForgetfulAlertStore(SqlAlertStore):
    """The database refusing the write that records a message as sent, `refusals` times."""

    refusals = 0

    def message_sent(self, *args: Any, **kwargs: Any) -> None:
        if self.refusals > 0:
            self.refusals -= 1
            raise Unavailable("database is locked")
        super().message_sent(*args, **kwargs)


async def test_a_message_sent_whose_record_fails_is_recorded_later_and_never_sent_again(
    store: SqlStore,
) -> None:
    services, service = _services(store)
    alerts = ForgetfulAlertStore(store.engine)
    _runs(service, 0, 100, poisoned=False)
    alerts.subscribe(Subscription(0, "slack", "C1", "T1", "default", "alerts", "U1", 0))
    sender = RecordingSender()
    settings = AlertSettings(interval=0.05)
    scheduler = AlertScheduler(alerts, services, [sender], settings, holder="a")
    _runs(service, 100, 60, poisoned=True)
    alerts.refusals = 2  # both cards go out; neither can be recorded
    assert await scheduler.tick(now=2_000) == 2
    # past the lease the open claims could be taken over: still nothing is sent again, and
    # once the database takes the writes, the messages are recorded as sent
    alerts.refusals = 1
    assert await scheduler.tick(now=2_000 + settings.lease_ms + 1) == 0
    assert await scheduler.tick(now=2_000 + 2 * settings.lease_ms + 2) == 0
    assert len(sender.posts) == 2
    other = AlertScheduler(alerts, services, [sender], settings, holder="b")
    assert await other.tick(now=2_000 + 4 * settings.lease_ms) == 0
    assert len(sender.posts) == 2


async def test_storage_down_longer_than_the_threshold_alerts_and_resolves(
    store: SqlStore,
) -> None:
    services, service = _services(store)
    service.observe(report("t0"))
    alerts = FlakyAlertStore(store.engine)
    alerts.subscribe(Subscription(0, "slack", "C1", "T1", "default", "alerts", "U1", 0))
    sender = RecordingSender()
    settings = AlertSettings(interval=60, storage_down_after=120)
    holder = AlertScheduler(alerts, services, [sender], settings, holder="a")
    other = AlertScheduler(alerts, services, [sender], settings, holder="b")
    assert await holder.tick(now=1_000) == 0
    assert await other.tick(now=1_000) == 0  # not the lease holder
    alerts.down = True
    assert await holder.tick(now=2_000) == 0  # the outage starts
    assert await holder.tick(now=100_000) == 0  # not yet for long enough
    assert await other.tick(now=200_000) == 0  # only the last holder speaks
    assert await holder.tick(now=200_000) == 1
    assert await holder.tick(now=300_000) == 0  # once per outage
    alerts.down = False
    assert await holder.tick(now=400_000) == 1
    assert [s for _, s, _ in sender.posts] == [
        "FIRING: Storage unavailable",
        "Resolved: Storage unavailable.",
    ]
    assert sender.posts[1][2] == "ts-1" and sender.updates[0][1] == "ts-1"


async def test_a_channel_gets_at_most_its_hourly_share_and_the_rest_waits(store: SqlStore) -> None:
    services, service = _services(store)
    alerts = SqlAlertStore(store.engine)
    _runs(service, 0, 100, poisoned=False)
    alerts.subscribe(Subscription(0, "slack", "C1", "T1", "default", "alerts", "U1", 0))
    _runs(service, 100, 60, poisoned=True)  # two alerts fire
    sender = RecordingSender()
    settings = AlertSettings(interval=60, per_channel_per_hour=1)
    scheduler = AlertScheduler(alerts, services, [sender], settings, holder="a")
    assert await scheduler.tick(now=1_000) == 1
    assert await scheduler.tick(now=60_000) == 0  # the hour's share is spent
    assert await scheduler.tick(now=1_000 + 3_600_000) == 1  # the other one, an hour later
    assert len({summary for _, summary, _ in sender.posts}) == 2


def test_a_digest_charts_savings_and_recall_over_its_period(store: SqlStore) -> None:
    """The digest's trend: the period hour by hour, each hour's token saving counted from its
    selected runs (sent against offered tokens) and its estimated recall; the chart has it."""
    from learning_bot.bot.digest import digest_chart, due_period

    services, service = _services(store)
    alerts = SqlAlertStore(store.engine)
    day = 86_400_000
    now = WEDNESDAY
    start = now // day * day - day  # yesterday 00:00 UTC
    # 09:xx: every arm sent; 15:xx: WebSearch (900 of 2,050 tokens) left out
    for i in range(5):
        service.observe(report(f"a{i}", timestamp=start + 9 * 3_600_000 + i))
        service.observe(
            report(f"b{i}", excluded=("tool:web:WebSearch",), timestamp=start + 15 * 3_600_000 + i)
        )
    service.observe(report("base", baseline=True, timestamp=start + 15 * 3_600_000 + 9))
    sub = Subscription(1, "slack", "C1", "T1", "default", "digest daily", "U1", 0)
    alerts.subscribe(sub)
    scheduler = AlertScheduler(alerts, services, [RecordingSender()], AlertSettings(interval=60))
    period = due_period(sub, now, scheduler.settings.digest_hour)
    assert period is not None
    facts = scheduler._digest_facts(sub, period)
    assert [p.t for p in facts.trend] == [start + 9 * 3_600_000, start + 15 * 3_600_000]
    first, second = facts.trend
    assert first.token_saving == 0.0
    assert second.token_saving == pytest.approx(100 * 900 / 2050)  # the baseline run not counted
    assert first.recall == 1.0  # nothing left out
    assert second.recall is not None and second.recall <= 1.0
    png = digest_chart(facts)
    assert png is not None and png.startswith(b"\x89PNG")


async def test_an_alert_still_firing_gets_a_note_in_its_thread_each_period(
    store: SqlStore,
) -> None:
    services, service = _services(store)
    alerts = SqlAlertStore(store.engine)
    _runs(service, 0, 100, poisoned=False)
    alerts.subscribe(Subscription(0, "slack", "C1", "T1", "default", "alerts", "U1", 0))
    _runs(service, 100, 60, poisoned=True)
    sender = RecordingSender()
    settings = AlertSettings(interval=60, remind_after=1_000.0)
    scheduler = AlertScheduler(alerts, services, [sender], settings)
    assert await scheduler.tick(now=1_000) == 2
    cards = {"ts-1", "ts-2"}  # the two cards' message refs, as the recording sender numbers them
    assert await scheduler.tick(now=500_000) == 0  # not yet a period
    assert await scheduler.tick(now=1_000 + 1_000_001) == 2
    notes = [(summary, thread) for _, summary, thread in sender.posts[2:]]
    assert all(s.startswith("Still firing after 0 hours: ") for s, _ in notes), notes
    assert {thread for _, thread in notes} == cards
    assert await scheduler.tick(now=1_000 + 1_050_000) == 0  # once per period
    # another replica, once the lease has passed to it, in the same period: nothing twice
    again = AlertScheduler(alerts, services, [sender], settings, holder="restarted")
    later = 1_000 + 1_050_000 + settings.lease_ms + 1
    assert later < 1_000 + 2_000_000
    assert await again.tick(now=later) == 0
    assert await again.tick(now=1_000 + 2_000_001 + settings.lease_ms) == 2  # the next period
    assert len(sender.posts) == 6


@pytest.mark.parametrize(
    ("name", "raw"),
    [
        ("LEARNING_BOT_ALERT_INTERVAL", "0"),
        ("LEARNING_BOT_ALERT_INTERVAL", "soon"),
        ("LEARNING_BOT_ALERTS_PER_HOUR", "-1"),
        ("LEARNING_BOT_DIGEST_HOUR", "24"),
        ("LEARNING_BOT_SKIP_EMPTY_DIGESTS", "maybe"),
        ("LEARNING_BOT_ALERT_REMIND_HOURS", "-2"),
        ("LEARNING_BOT_ALERT_REMIND_HOURS", "nan"),
    ],
)
def test_alert_settings_refuse_bad_values_naming_them(name: str, raw: str) -> None:
    from learning_bot.alerts import alert_settings
    from learning_bot.engine.errors import InvalidConfig

    with pytest.raises(InvalidConfig, match=name):
        alert_settings({name: raw})


def test_alert_settings_read_the_environment() -> None:
    from learning_bot.alerts import alert_settings

    settings = alert_settings({"LEARNING_BOT_ALERT_REMIND_HOURS": "0.5"})
    assert settings.remind_after == 1800.0
    assert alert_settings({"LEARNING_BOT_ALERT_REMIND_HOURS": "0"}).remind_after == 0.0
    assert alert_settings({}).remind_after == 86_400.0


@dataclass
class Workspaces:
    """A surface installed in several workspaces: a recording sender per workspace."""

    surface: str = "slack"
    each: dict[str, RecordingSender] = field(default_factory=dict)

    async def for_scope(self, scope: str) -> RecordingSender:
        if scope == "T-gone":
            raise ChannelGone("learning-bot is not installed in the Slack workspace T-gone")
        return self.each.setdefault(scope, RecordingSender())

    async def post(self, channel: str, card: Reply, thread: str | None = None) -> str:
        raise AssertionError("a workspace's sender posts, never the surface's")

    async def update(self, channel: str, ref: str, card: Reply) -> None:
        raise AssertionError("a workspace's sender updates, never the surface's")

    async def upload(
        self, channel: str, filename: str, data: bytes, title: str, thread: str | None
    ) -> None:
        raise AssertionError("a workspace's sender uploads, never the surface's")


async def test_each_workspaces_channels_get_its_own_senders_messages(store: SqlStore) -> None:
    services, service = _services(store)
    alerts = SqlAlertStore(store.engine)
    _runs(service, 0, 100, poisoned=False)
    alerts.subscribe(Subscription(0, "slack", "C1", "T1", "default", "alerts", "U1", 0))
    alerts.subscribe(Subscription(0, "slack", "C9", "T-gone", "default", "alerts", "U1", 0))
    _runs(service, 100, 60, poisoned=True)
    workspaces = Workspaces()
    scheduler = AlertScheduler(alerts, services, [workspaces], AlertSettings(interval=60))
    assert await scheduler.tick(now=1_000) == 2
    assert {channel for channel, _, _ in workspaces.each["T1"].posts} == {"C1"}
    [gone] = [s for s in alerts.subscriptions() if s.scope == "T-gone"]
    assert gone.paused and "not installed" in (gone.paused_reason or "")
