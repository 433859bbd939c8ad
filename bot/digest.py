"""Daily and weekly digests: one card per subscribed channel with the period's runs, the
savings (cost where measured, tokens), the estimated recall, the arms whose posterior mean
moved most and the alerts still open; with a chart (matplotlib's Agg backend, the optional
`charts` extra) when it is installed, else the card alone.

A digest is due once the channel's local time (its subscription's time zone, else UTC) has
passed `digest_hour` on the first day after its period: a daily digest covers the previous
local day, a weekly one the previous ISO week (Monday to Sunday)."""

from __future__ import annotations

import io
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from learning_bot.bot.replies import (
    Column,
    Fields,
    Heading,
    Reply,
    ReplyKind,
    Table,
    Text,
    Visibility,
)
from learning_bot.engine.alert_records import AlertState, Subscription
from learning_bot.engine.alerts import FIRING, stored_finding
from learning_bot.engine.records import RunRecord

MOVED_ARMS = 5
"""Arms listed (and charted) as the ones that moved most."""


@dataclass(frozen=True, slots=True)
class Period:
    """The local period a digest covers, and its number (the message's episode)."""

    start_ms: int
    end_ms: int
    label: str
    number: int


def _zone(name: str | None) -> ZoneInfo:
    try:
        return ZoneInfo(name) if name else ZoneInfo("UTC")
    except (ZoneInfoNotFoundError, ValueError):
        return ZoneInfo("UTC")


def due_period(sub: Subscription, now_ms: int, digest_hour: int) -> Period | None:
    """The period whose digest is due for `sub` at `now_ms`, or None before `digest_hour`."""
    zone = _zone(sub.timezone)
    local = datetime.fromtimestamp(now_ms / 1000, tz=UTC).astimezone(zone)
    if local.hour < digest_hour:
        return None
    today = local.date()
    if sub.kind == "digest weekly":
        end_day = today - timedelta(days=today.weekday())  # this Monday
        start_day = end_day - timedelta(days=7)
        year, week, _ = start_day.isocalendar()
        label, number = f"week {year}-W{week:02d}", year * 100 + week
    else:
        end_day = today
        start_day = today - timedelta(days=1)
        label, number = start_day.isoformat(), start_day.toordinal()
    return Period(_ms(start_day, zone), _ms(end_day, zone), label, number)


def _ms(day: date, zone: ZoneInfo) -> int:
    return int(datetime(day.year, day.month, day.day, tzinfo=zone).timestamp() * 1000)


@dataclass(frozen=True, slots=True)
class DigestFacts:
    """What a digest shows, read from the learner by the scheduler."""

    learner: str
    period: Period
    runs: int
    selected_runs: int
    tokens: int
    cost_percent: float | None
    prompt_savings_percent: float | None
    recall: float | None
    moved: tuple[tuple[str, float, float], ...]
    """(arm, mean at the start, mean at the end), the largest moves first."""
    open_alerts: tuple[str, ...]
    trend: tuple[TrendPoint, ...] = ()
    """The period hour by hour (daily) or day by day (weekly): savings and recall."""


@dataclass(frozen=True, slots=True)
class TrendPoint:
    """One step of a digest's period: when it starts, the prompt tokens its selected runs
    saved against sending every arm offered (percent), and their estimated recall."""

    t: int
    token_saving: float | None
    recall: float | None


def trend(
    runs: list[RunRecord],
    period: Period,
    step_ms: int,
    recall_of: Any,
) -> tuple[TrendPoint, ...]:
    """The period's runs in steps of `step_ms`: each step with runs gets its token saving
    (selected runs: 1 - sent / offered tool tokens) and `recall_of(runs)`."""
    steps: dict[int, list[RunRecord]] = {}
    for run in runs:
        if period.start_ms <= run.timestamp < period.end_ms:
            start = period.start_ms + (run.timestamp - period.start_ms) // step_ms * step_ms
            steps.setdefault(start, []).append(run)
    points = []
    for start, group in sorted(steps.items()):
        selected = [r for r in group if not r.is_baseline]
        offered = sum(r.offered_tokens for r in selected)
        sent = sum(r.selected_tokens for r in selected)
        saving = 100.0 * (1.0 - sent / offered) if offered else None
        points.append(TrendPoint(start, saving, recall_of(group)))
    return tuple(points)


def period_runs(runs_newest_first: list[RunRecord], period: Period) -> list[RunRecord]:
    return [r for r in runs_newest_first if period.start_ms <= r.timestamp < period.end_ms]


def moved_arms(buckets: list[Any], period: Period) -> tuple[tuple[str, float, float], ...]:
    """From convergence buckets (t, value, arm_id): each arm's mean before and at the end of
    the period, the largest moves first."""
    before: dict[str, float] = {}
    after: dict[str, float] = {}
    for b in sorted(buckets, key=lambda b: b.t):
        if b.arm_id is None:
            continue
        if b.t < period.start_ms:
            before[b.arm_id] = b.value
        elif b.t < period.end_ms:
            after[b.arm_id] = b.value
            before.setdefault(b.arm_id, 0.5)
    moves = [(arm, before[arm], after[arm]) for arm in after]
    moves.sort(key=lambda m: (-abs(m[2] - m[1]), m[0]))
    return tuple(m for m in moves[:MOVED_ARMS] if abs(m[2] - m[1]) > 1e-9)


def open_alert_titles(states: list[AlertState]) -> tuple[str, ...]:
    return tuple(stored_finding(s).title for s in states if s.state == FIRING)


def digest_card(facts: DigestFacts, kind: str, dashboard_url: str | None = None) -> Reply:
    """The digest as a card (surfaces render and escape it like any reply)."""
    which = "Weekly" if kind == "digest weekly" else "Daily"
    title = f"{which} digest — {facts.learner}, {facts.period.label}"
    if facts.runs == 0:
        text = f"{title}: no runs."
        return Reply(ReplyKind.INFO, (Text(text),), text, Visibility.PUBLIC)
    items = [("Runs", f"{facts.runs:,} ({facts.selected_runs:,} selected)")]
    items.append(("Tokens", f"{facts.tokens:,}"))
    if facts.cost_percent is not None:
        items.append(("Cost saving", f"{facts.cost_percent:.0f}%"))
    if facts.prompt_savings_percent is not None:
        items.append(("Prompt token saving", f"{facts.prompt_savings_percent:.0f}%"))
    if facts.recall is not None:
        items.append(("Estimated recall", f"{facts.recall * 100:.0f}%"))
    blocks: list[Any] = [Heading(title), Fields(tuple(items))]
    if facts.moved:
        rows = tuple((arm, f"{a:.2f}", f"{b:.2f}") for arm, a, b in facts.moved)
        columns = (Column("Arm"), Column("Mean before", "right"), Column("Mean after", "right"))
        blocks.append(Table(columns, rows, "Arms that moved most"))
    if facts.open_alerts:
        blocks.append(Text("Open alerts: " + "; ".join(facts.open_alerts)))
    if dashboard_url:
        blocks.append(Text(f"Dashboard: {dashboard_url}", muted=True))
    summary = f"{title}: {facts.runs:,} runs"
    return Reply(ReplyKind.INFO, tuple(blocks), summary, Visibility.PUBLIC)


def digest_chart(facts: DigestFacts) -> bytes | None:
    """A PNG of the period's savings and recall (when any step has them) above the arms that
    moved most (mean before and after), or None without matplotlib or with neither."""
    shown = [p for p in facts.trend if p.token_saving is not None or p.recall is not None]
    if not facts.moved and not shown:
        return None
    try:
        import matplotlib

        matplotlib.use("Agg")
        from matplotlib.figure import Figure
    except ImportError:
        return None
    heights = ([2.4] if shown else []) + ([0.5 + 0.45 * len(facts.moved)] if facts.moved else [])
    figure = Figure(figsize=(6.4, sum(heights) + 0.4), dpi=100)
    panels = figure.subplots(len(heights), 1, gridspec_kw={"height_ratios": heights}, squeeze=False)
    if shown:
        _trend_panel(panels[0][0], facts, shown)
    if facts.moved:
        _moved_panel(panels[-1][0], facts)
    figure.tight_layout()
    out = io.BytesIO()
    figure.savefig(out, format="png")
    return out.getvalue()


def _trend_panel(axes: Any, facts: DigestFacts, points: list[TrendPoint]) -> None:
    hours = [(p.t - facts.period.start_ms) / 3_600_000 for p in points]
    weekly = facts.period.end_ms - facts.period.start_ms > 2 * 86_400_000
    xs = [h / 24 for h in hours] if weekly else hours
    for name, values in (
        ("prompt token saving %", [p.token_saving for p in points]),
        ("estimated recall %", [None if p.recall is None else 100 * p.recall for p in points]),
    ):
        pairs = [(x, v) for x, v in zip(xs, values, strict=True) if v is not None]
        if pairs:
            axes.plot([x for x, _ in pairs], [v for _, v in pairs], marker="o", label=name)
    axes.set_ylim(min(0, *(v for p in points for v in (p.token_saving or 0,))), 100)
    axes.set_xlabel("day of the week" if weekly else "hour of the day")
    axes.set_ylabel("%")
    axes.set_title(f"{facts.learner}: savings and recall, {facts.period.label}")
    axes.legend(loc="lower right")


def _moved_panel(axes: Any, facts: DigestFacts) -> None:
    labels = [arm.rsplit(":", 1)[-1][:40] for arm, _, _ in facts.moved]
    positions = list(range(len(facts.moved)))
    axes.barh([p + 0.2 for p in positions], [a for _, a, _ in facts.moved], 0.4, label="before")
    axes.barh([p - 0.2 for p in positions], [b for _, _, b in facts.moved], 0.4, label="after")
    axes.set_yticks(positions, labels)
    axes.set_xlim(0, 1)
    axes.set_xlabel("posterior mean")
    axes.set_title(f"{facts.learner}: arms that moved most, {facts.period.label}")
    axes.legend(loc="lower right")
