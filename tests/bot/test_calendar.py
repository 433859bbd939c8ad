"""The scheduler on the calendar: through a week of weekdays, month ends (30, 31 and 28 days),
the year end (ISO week 53 of 2026) and the leap day of 2028, in UTC, behind it (Los Angeles,
across the change to summer time) and ahead of it (Auckland), the scheduler and the learner
both reading one injected clock, a round every two hours. Each local day's daily digest comes
once, at the first round from 09:00 local, for the local day before; each weekly digest once,
on Monday, for the ISO week before; an alert still firing gets its note each day in its
thread."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from learning_bot.bot.alerting import AlertScheduler, AlertSettings
from learning_bot.bot.bus import LearnerServices
from learning_bot.bot.digest import due_period
from learning_bot.bot.replies import Reply
from learning_bot.engine import LearningConfig, Phase
from learning_bot.engine.alert_records import Subscription
from learning_bot.engine.service import LearningService
from learning_bot.engine.session_simulation import SimulatedClock
from learning_bot.storage import SqlStore
from learning_bot.storage.alerts import SqlAlertStore
from tests.storage.helpers import report

HOUR = 3_600_000
DAY = 24 * HOUR
WEB = "tool:web:WebSearch"
ZONES = ("UTC", "America/Los_Angeles", "Pacific/Auckland")

SPANS = {
    # the first and last day (UTC midnights) the scheduler runs through
    "every weekday": (date(2026, 12, 6), date(2026, 12, 15)),
    "the year end and ISO week 53": (date(2026, 12, 27), date(2027, 1, 6)),
    "February of a common year": (date(2027, 2, 26), date(2027, 3, 3)),
    "summer time in Los Angeles": (date(2027, 3, 12), date(2027, 3, 16)),
    "a month of 30 days": (date(2027, 4, 29), date(2027, 5, 3)),
    "the leap day": (date(2028, 2, 26), date(2028, 3, 3)),
}


def utc_ms(day: date, hour: int = 0) -> int:
    return int(datetime(day.year, day.month, day.day, hour, tzinfo=UTC).timestamp() * 1000)


def local(ms: int, zone: str) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).astimezone(ZoneInfo(zone))


@dataclass
class ClockedSender:
    """Keeps what it was asked to post, with the clock's time at each post."""

    clock: SimulatedClock
    surface: str = "slack"
    posts: list[tuple[int, str, str, str | None]] = field(default_factory=list)

    async def post(self, channel: str, card: Reply, thread: str | None = None) -> str:
        self.posts.append((self.clock(), channel, card.summary, thread))
        return f"ts-{len(self.posts)}"

    async def update(self, channel: str, ref: str, card: Reply) -> None:
        pass

    async def upload(
        self, channel: str, filename: str, data: bytes, title: str, thread: str | None
    ) -> None:
        pass

    def to(self, channel: str) -> list[tuple[int, str, str | None]]:
        return [(at, summary, thread) for at, c, summary, thread in self.posts if c == channel]


def label(summary: str) -> str:
    """The period of a digest's summary ("Daily digest — default, 2028-02-29: no runs.")."""
    return summary.split(", ", 1)[1].split(":", 1)[0]


def expected_dailies(ticks: list[int], zone: str) -> list[tuple[int, str]]:
    """(when, label) of each daily digest: the first tick of each local day from 09:00 local,
    labelled with the day before."""
    firsts: dict[date, int] = {}
    for at in ticks:
        when = local(at, zone)
        if when.hour >= 9:
            firsts.setdefault(when.date(), at)
    return [(at, (day - timedelta(days=1)).isoformat()) for day, at in firsts.items()]


def expected_weeklies(ticks: list[int], zone: str) -> list[tuple[int, str]]:
    """(when, label) of each weekly digest: the first tick of each local ISO week from 09:00
    local (Monday, unless the span starts later in the week), labelled with the week before."""
    firsts: dict[date, int] = {}
    for at in ticks:
        when = local(at, zone)
        if when.hour >= 9:
            monday = when.date() - timedelta(days=when.weekday())
            firsts.setdefault(monday, at)
    out = []
    for monday, at in firsts.items():
        year, week, _ = (monday - timedelta(days=7)).isocalendar()
        out.append((at, f"week {year}-W{week:02d}"))
    return out


@pytest.mark.parametrize("span", list(SPANS), ids=list(SPANS))
async def test_digests_and_reminders_keep_the_calendar(sqlite_url: str, span: str) -> None:
    first, last = SPANS[span]
    clock = SimulatedClock(utc_ms(first) - HOUR)
    store = SqlStore(sqlite_url)
    config = LearningConfig.for_policy("seed", phase=Phase.ACTIVE)

    def make(learner: str) -> LearningService:
        return LearningService(store, config, learner=learner, cache_ttl=3600, wall_clock=clock)

    services = LearnerServices(make, config, names=store.learner_names)
    service = services.get("default")
    for i in range(100):
        service.observe(report(f"ok{i}", calls=("Read", "WebSearch"), timestamp=clock()))
    for i in range(60):  # the web tool left out, and no included arm ever counted as used
        service.observe(report(f"bad{i}", calls=("Grep",), excluded={WEB}, timestamp=clock()))
    alerts = SqlAlertStore(store.engine)
    alerts.subscribe(Subscription(0, "slack", "alerts", "T1", "default", "alerts", "U1", 0))
    for zone in ZONES:
        for kind in ("digest daily", "digest weekly"):
            channel = f"{kind}/{zone}"
            alerts.subscribe(
                Subscription(0, "slack", channel, "T1", "default", kind, "U1", 0, timezone=zone)
            )
    sender = ClockedSender(clock)
    settings = AlertSettings(interval=60, skip_empty_digests=False, remind_after=86_400.0)
    scheduler = AlertScheduler(alerts, services, [sender], settings, clock=clock)

    ticks = list(range(utc_ms(first), utc_ms(last) + 1, 2 * HOUR))  # 09:00 local or 10:00
    for at in ticks:
        clock.ms = at
        await scheduler.tick()  # the round reads the clock itself

    for zone in ZONES:
        dailies = [(at, label(s)) for at, s, _ in sender.to(f"digest daily/{zone}")]
        assert dailies == expected_dailies(ticks, zone), zone
        weeklies = [(at, label(s)) for at, s, _ in sender.to(f"digest weekly/{zone}")]
        assert weeklies == expected_weeklies(ticks, zone), zone
        assert all(local(at, zone).weekday() == 0 for at, _ in weeklies[1:]), zone

    cards = sender.to("alerts")[:2]
    assert sorted(s for _, s, _ in cards) == [
        "FIRING: Reward rate collapsed",
        "FIRING: Starved arm: WebSearch",
    ]
    assert {at for at, _, _ in cards} == {ticks[0]}
    notes = sender.to("alerts")[2:]
    days = (ticks[-1] - ticks[0]) // DAY
    assert len(notes) == 2 * days
    for n, (at, summary, thread) in enumerate(notes):
        day = n // 2 + 1
        assert at == ticks[0] + day * DAY
        since = "24 hours" if day == 1 else f"{day} days"
        assert summary.startswith(f"Still firing after {since}: "), summary
        assert thread in {"ts-1", "ts-2"}
    store.close()


@pytest.mark.parametrize("zone", ZONES)
def test_every_hour_of_the_calendar_edges_has_the_right_periods(zone: str) -> None:
    """due_period hour by hour over every span: a daily period is the whole local day before
    (local midnight to local midnight, 23 or 25 hours across a change of clocks); a weekly one
    the whole ISO week before this local Monday."""
    for span, (first, last) in SPANS.items():
        for at in range(utc_ms(first), utc_ms(last) + 1, HOUR):
            now = local(at, zone)
            for kind in ("digest daily", "digest weekly"):
                sub = Subscription(1, "slack", "C1", "T1", "default", kind, "U1", 0, timezone=zone)
                period = due_period(sub, at, 9)
                if now.hour < 9:
                    assert period is None
                    continue
                assert period is not None
                start, end = local(period.start_ms, zone), local(period.end_ms, zone)
                assert (start.hour, start.minute, end.hour, end.minute) == (0, 0, 0, 0), span
                if kind == "digest daily":
                    assert end.date() == now.date(), span
                    assert start.date() == now.date() - timedelta(days=1), span
                    assert period.label == start.date().isoformat()
                else:
                    assert end.weekday() == 0 and 0 <= (now.date() - end.date()).days < 7, span
                    assert (end.date() - start.date()).days == 7, span
                    year, week, _ = start.date().isocalendar()
                    assert period.label == f"week {year}-W{week:02d}"
                hours = (period.end_ms - period.start_ms) / HOUR
                days = 1 if kind == "digest daily" else 7
                assert hours in {24 * days - 1, 24 * days, 24 * days + 1}, span
