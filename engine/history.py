"""A learner's history: its traces, a page at a time, streamed or all of them (exports), and
its time series (tokens per run, their sum, each arm's posterior mean over time, the prompt
cost per session)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from learning_bot.engine.cache import CachedArm
from learning_bot.engine.cached_learner import CachedLearner
from learning_bot.engine.cost import PriceTable
from learning_bot.engine.errors import InvalidInput
from learning_bot.engine.inputs import check_page
from learning_bot.engine.ports import Store
from learning_bot.engine.savings import cost_series

if TYPE_CHECKING:
    from learning_bot.engine.records import RunRecord
    from learning_bot.engine.store_records import TimeBucket

WINDOWS = {"1h": 3_600_000, "1d": 86_400_000}
TIMESERIES_METRICS = ("tokens", "totalTokens", "convergence", "sessionCost")


class History:
    """traces, trace_pieces, iter_traces and timeseries of one learner."""

    def __init__(
        self,
        store: Store,
        learner: CachedLearner,
        wall_clock: Callable[[], int],
        prices: PriceTable,
    ) -> None:
        self.store = store
        self.learner = learner
        self._wall_clock = wall_clock
        self.prices = prices

    def traces(self, limit: int, offset: int) -> tuple[list[RunRecord], int]:
        """A page of traces, newest first, and the total number stored."""
        check_page(limit, offset)
        return self.store.trace_page(self.learner.learner_id, limit, offset)

    def trace_pieces(self, limit: int, offset: int) -> tuple[Iterator[list[RunRecord]], int]:
        """The page `traces` answers, read lazily in pieces bounded by their size in memory
        (a streamed answer), and the total number stored."""
        check_page(limit, offset)
        learner_id = self.learner.learner_id
        total = self.store.run_stats(learner_id).all_time_traces
        return self.store.trace_pieces(learner_id, limit, offset), total

    def iter_traces(self, with_arms: bool) -> Iterator[RunRecord]:
        """Every trace, oldest first, read in pieces bounded by their size in memory
        (exports); `with_arms` off leaves the arm outcomes unread."""
        return self.store.iter_traces(self.learner.learner_id, with_arms=with_arms)

    def timeseries(
        self, metric: str, window: str, buckets: int, at: int | None
    ) -> list[TimeBucket]:
        """See LearningService.timeseries."""
        if window not in WINDOWS:
            raise InvalidInput(f"window must be one of {', '.join(WINDOWS)}, got {window!r}")
        if metric not in TIMESERIES_METRICS:
            raise InvalidInput(
                f"metric must be one of {', '.join(TIMESERIES_METRICS)}, got {metric!r}"
            )
        width = WINDOWS[window]
        since = ((self._wall_clock() if at is None else at) // width - buckets + 1) * width
        learner_id = self.learner.learner_id
        if metric == "sessionCost":
            from learning_bot.engine.store_records import TimeBucket

            usages = self.store.session_usage_since(learner_id, since)
            return [
                TimeBucket(p.t, p.cost_per_session, None, p.sessions, p.group)
                for p in cost_series(usages, self.prices, width)
            ]
        rows = self.store.timeseries(
            learner_id, "tokens" if metric == "totalTokens" else metric, width, since
        )
        if metric == "totalTokens":
            return rows
        if metric == "tokens":  # the average per run, as the original's "Avg Tokens/Run" chart
            return [replace(r, value=r.value / r.count if r.count else 0.0) for r in rows]
        self.learner.refresh()
        return convergence(rows, self.learner.cache.arms)


def convergence(rows: list[TimeBucket], arms: Mapping[str, CachedArm]) -> list[TimeBucket]:
    """Each arm's posterior mean at the end of each window: walked back from its current
    posterior (`arms`) through the observations each window's row counts (`count` of them,
    `value` their mean reward)."""
    from learning_bot.engine.store_records import TimeBucket

    by_arm: dict[str, list[TimeBucket]] = {}
    for row in rows:
        if row.arm_id is not None:
            by_arm.setdefault(row.arm_id, []).append(row)
    out: list[TimeBucket] = []
    for arm_id, arm_rows in by_arm.items():
        entry = arms.get(arm_id)
        if entry is None:
            continue
        alpha, beta = entry.alpha, entry.beta
        points = []
        for row in sorted(arm_rows, key=lambda b: -b.t):
            points.append(TimeBucket(row.t, alpha / (alpha + beta), arm_id))
            n = row.count
            gained = row.value * n
            alpha = max(alpha - gained, 1e-9)
            beta = max(beta - (n - gained), 1e-9)
        out.extend(reversed(points))
    out.sort(key=lambda b: (b.t, b.arm_id or ""))
    return out
