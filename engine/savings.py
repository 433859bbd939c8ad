"""The prompt-cost saving as measured: selected sessions against baseline sessions.

Baseline sessions (the `baselineRate` share, decided per session, every offered arm for the
whole session) are a randomised control group, so the saving is what the bill shows: the
prompt cost per run of selected sessions against that of baseline sessions, each priced from
the usage the provider reported (cache reads and writes included). The session is the unit of
randomisation, so the interval treats each session as one observation (a ratio of means with
its variance by linearisation, the interval taken on the log of the ratio).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from learning_bot.engine.cost import PriceTable, prompt_cost
from learning_bot.engine.usage import Usage

MIN_SESSIONS = 2
"""Sessions each group needs before a saving is shown (an interval needs two)."""

Z95 = 1.959963984540054


COST_WINDOW = 5000
"""The saving is measured over the learner's latest this many active runs (since its last full
reset): recent enough to describe the current model and tools."""


@dataclass(frozen=True, slots=True)
class SessionUsage:
    """The summed usage of one session's runs of one model. Runs without a session key are
    not counted: only a session's baseline offers every arm for all its turns (a per-request
    baseline run is packed under the budget like any other), so only sessions have a
    full-prompt control group."""

    key: str
    is_baseline: bool
    provider: str
    model: str
    runs: int
    input: int
    cache_read: int
    cache_write: int
    started: int = 0
    """When the session's first counted run was recorded (ms since the epoch)."""


def price_sessions(
    usages: Iterable[SessionUsage], prices: PriceTable
) -> tuple[list[SessionCost], bool]:
    """Each session's runs and prompt cost, and whether any run reported cache usage."""
    totals: dict[tuple[str, bool], list[float]] = {}
    cached = False
    for u in usages:
        cost = prompt_cost(
            Usage(input=u.input, cache_read=u.cache_read, cache_write=u.cache_write),
            prices.prices_for(u.provider, u.model),
        )
        cached = cached or u.cache_read > 0 or u.cache_write > 0
        entry = totals.setdefault((u.key, u.is_baseline), [0.0, 0.0])
        entry[0] += u.runs
        entry[1] += cost
    sessions = [SessionCost(base, int(runs), cost) for (_, base), (runs, cost) in totals.items()]
    return sessions, cached


@dataclass(frozen=True, slots=True)
class CostPoint:
    """The mean prompt cost per session of one group's sessions started in one window."""

    t: int
    group: str
    cost_per_session: float
    sessions: int


def cost_series(
    usages: Iterable[SessionUsage], prices: PriceTable, width_ms: int
) -> list[CostPoint]:
    """The mean prompt cost per session (input-token units) of baseline and of selected
    sessions, per window of `width_ms`, each session counted in the window it started in:
    the dashboard's cost-per-session chart."""
    sessions: dict[tuple[str, bool], list[float]] = {}
    for u in usages:
        cost = prompt_cost(
            Usage(input=u.input, cache_read=u.cache_read, cache_write=u.cache_write),
            prices.prices_for(u.provider, u.model),
        )
        entry = sessions.setdefault((u.key, u.is_baseline), [float(u.started), 0.0])
        entry[0] = min(entry[0], float(u.started))
        entry[1] += cost
    buckets: dict[tuple[int, bool], list[float]] = {}
    for (_, baseline), (started, cost) in sessions.items():
        totals = buckets.setdefault((int(started) // width_ms * width_ms, baseline), [0.0, 0.0])
        totals[0] += cost
        totals[1] += 1
    return [
        CostPoint(t, "baseline" if baseline else "selected", cost / count, int(count))
        for (t, baseline), (cost, count) in sorted(buckets.items())
    ]


@dataclass(frozen=True, slots=True)
class SessionCost:
    """One session's runs and their prompt cost (in input-token units)."""

    is_baseline: bool
    runs: int
    cost: float


@dataclass(frozen=True, slots=True)
class CostSavings:
    """`percent` saved per run against baseline sessions, with its 95% interval (`low`,
    `high`), or None with `reason` when it cannot be measured."""

    percent: float | None
    low: float | None
    high: float | None
    selected_sessions: int
    baseline_sessions: int
    selected_cost_per_run: float | None
    baseline_cost_per_run: float | None
    reason: str | None = None

    @property
    def sessions(self) -> int:
        return self.selected_sessions + self.baseline_sessions


def _ratio(group: list[SessionCost]) -> tuple[float, float]:
    """Cost per run over the group's sessions, and the variance of that ratio."""
    runs = sum(s.runs for s in group)
    cost = sum(s.cost for s in group)
    ratio = cost / runs
    m = len(group)
    mean_runs = runs / m
    spread = sum(((s.cost - ratio * s.runs) / mean_runs) ** 2 for s in group)
    return ratio, spread / (m * (m - 1))


def cost_savings(sessions: Iterable[SessionCost], *, cache_reported: bool) -> CostSavings:
    """The saving of selected sessions' prompt cost per run against baseline sessions'.

    `cache_reported`: whether the runs reported the provider's cache fields; without them a
    cost under the prompt cache cannot be told from a token count, and no figure is given."""
    selected = [s for s in sessions if s.runs > 0 and not s.is_baseline]
    baseline = [s for s in sessions if s.runs > 0 and s.is_baseline]
    counts = (len(selected), len(baseline))

    def unmeasured(reason: str) -> CostSavings:
        return CostSavings(None, None, None, *counts, None, None, reason)

    if not selected and not baseline:
        return unmeasured(
            "no run names a session (context.session_key): the saving is measured per session "
            "against full-prompt baseline sessions, and selection per request changes the "
            "tools at the head of the cached prompt on every turn"
        )
    if not cache_reported:
        return unmeasured(
            "the runs report no prompt-cache usage (cacheRead / cacheWrite), so their cost "
            "under the provider's cache is unknown"
        )
    if len(baseline) < MIN_SESSIONS or len(selected) < MIN_SESSIONS:
        return unmeasured(
            f"{len(selected)} selected and {len(baseline)} baseline sessions so far; "
            f"each group needs {MIN_SESSIONS}"
        )
    r_sel, v_sel = _ratio(selected)
    r_base, v_base = _ratio(baseline)
    if r_base <= 0 or r_sel <= 0:
        return unmeasured("the baseline sessions report no prompt cost")
    log_ratio = math.log(r_sel / r_base)
    se = math.sqrt(v_sel / r_sel**2 + v_base / r_base**2)
    percent = 100.0 * (1.0 - r_sel / r_base)
    low = 100.0 * (1.0 - math.exp(log_ratio + Z95 * se))
    high = 100.0 * (1.0 - math.exp(log_ratio - Z95 * se))
    return CostSavings(percent, low, high, *counts, r_sel, r_base)
