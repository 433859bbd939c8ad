"""What status reads of a learner: its posteriors, the summary of its runs (savings, the
estimated recall, the measured prompt-cost saving, its sessions' decisions) and the useful
arms selection starves. Reads only (the StoreReads port), so the read-only view of a SQLite
file serves them."""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from learning_bot.engine.cache import CachedArm
from learning_bot.engine.cached_learner import CachedLearner, arm_view
from learning_bot.engine.config import Phase
from learning_bot.engine.cost import PriceTable
from learning_bot.engine.errors import InvalidInput
from learning_bot.engine.metrics import estimated_recall, usefulness_estimates
from learning_bot.engine.ports import RunStats, StoreReads
from learning_bot.engine.savings import CostSavings, cost_savings, price_sessions
from learning_bot.engine.starvation import STARVATION_WINDOW, StarvedArm, starved_arms
from learning_bot.engine.starvation import ArmRecord as StarvationArm
from learning_bot.engine.views import ArmView, Status, Summary, summarise

if TYPE_CHECKING:
    from learning_bot.engine.records import RunRecord

RECALL_WINDOW = 300
"""The estimated recall reads the inclusion rates of this many latest selected runs: recent
enough that the posteriors describe the same usage (after a change in usage, a longer window
mixes runs from before it with posteriors that have moved on)."""

Counts = Mapping[str, tuple[int, int, int]]
"""arm id -> (runs that included it, runs that offered it, runs that included and used it)."""


PASSIVE_ONLY = (
    "the learner is passive (every run sends every component): the saving is measured once "
    "it is active, selected sessions against full-prompt baseline sessions"
)


class Reports:
    """posteriors, summary, status, recall_of and starved_arms of one learner."""

    def __init__(self, store: StoreReads, learner: CachedLearner, prices: PriceTable) -> None:
        self.store = store
        self.learner = learner
        self.prices = prices

    def posteriors(self) -> list[ArmView]:
        """Every known arm's posterior, highest mean first."""
        learner = self.learner
        learner.refresh()
        config = learner.config
        seeds = set(config.seed_arm_ids)
        views = [arm_view(a, e, config, seeds) for a, e in learner.cache.arms.items()]
        views.sort(key=lambda v: (-v.mean, v.arm_id))
        return views

    def recall_of(self, runs: Iterable[RunRecord]) -> float | None:
        """The estimated recall (engine.metrics.estimated_recall) of these runs alone: their
        selected, active, unguarded runs, each left-out arm's use estimated from the arm's
        usage probability as the learner knows it now (a digest's points over its period)."""
        counts: dict[str, list[int]] = {}
        for run in runs:
            if run.is_baseline or run.phase is not Phase.ACTIVE or run.guard is not None:
                continue
            for arm in run.arms:
                c = counts.setdefault(arm.arm_id, [0, 0, 0])
                c[0] += arm.included
                c[1] += 1
                c[2] += arm.included and arm.referenced
        if not counts:
            return None
        self.learner.refresh()
        return estimated_recall(
            self._usefulness(), {k: (v[0], v[1], v[2]) for k, v in sorted(counts.items())}
        )

    def summary(self) -> tuple[Summary, Counts]:
        """The summary, and the inclusion counts of the latest selected runs it read."""
        learner_id = self.learner.learner_id
        store = self.store
        stats = store.run_stats(learner_id)
        self.learner.refresh()
        recall = None
        counts: Counts = {}
        if stats.selected_runs:
            counts = store.inclusion_counts(learner_id, RECALL_WINDOW)
            recall = estimated_recall(self._usefulness(), counts)
        arms = list(self.learner.cache.arms.values())
        pulls = sum(e.pulls for e in arms)
        reward = sum(e.rewards for e in arms)
        summary = summarise(stats, len(arms), recall, pulls, reward, self._cost_savings(stats))
        summary = replace(summary, session_decisions=store.session_decisions(learner_id))
        return summary, counts

    def starved_arms(self, counts: Counts | None = None) -> list[StarvedArm]:
        """Useful arms that selection now leaves out of nearly every run (engine.starvation)."""
        learner = self.learner
        if counts is None:
            learner.refresh()
            counts = self.store.inclusion_counts(learner.learner_id, STARVATION_WINDOW)
        with learner.cache.lock:
            entries = list(learner.cache.arms.items())
        arms = (StarvationArm(a, e.label, e.pulls, e.rewards) for a, e in entries)
        return starved_arms(arms, counts, frozenset(learner.config.seed_arm_ids))

    def _cost_savings(self, stats: RunStats) -> CostSavings | None:
        """The measured prompt-cost saving over the latest runs (engine.savings)."""
        usages = self.store.session_usage(self.learner.learner_id)
        sessions, cached = price_sessions(usages, self.prices)
        savings = cost_savings(sessions, cache_reported=cached)
        passive = self.learner.config.phase is Phase.PASSIVE
        if passive and savings.sessions == 0 and stats.trace_count:
            # Passive runs belong to no selected or baseline session.
            return replace(savings, reason=PASSIVE_ONLY)
        return savings

    def _usefulness(self) -> dict[str, float]:
        """Each cached arm's estimated usage probability (engine.metrics)."""
        cache = self.learner.cache
        with cache.lock:
            entries = list(cache.arms.items())
        evidence: dict[str, tuple[float, float]] = {}
        for arm_id, e in entries:
            pa, pb = e.prior
            evidence[arm_id] = (e.alpha - pa, e.beta - pb)
        return usefulness_estimates(evidence)

    def status(self, top: int) -> Status:
        """See LearningService.status."""
        if isinstance(top, bool) or not isinstance(top, int) or not 1 <= top <= 100:
            raise InvalidInput("top must be a whole number from 1 to 100")
        summary, counts = self.summary()
        learner = self.learner
        config = learner.config
        seeds = set(config.seed_arm_ids)
        items = list(learner.cache.arms.items())

        def order(item: tuple[str, CachedArm]) -> tuple[float, str]:
            return (-item[1].mean, item[0])

        # Only the arms shown are turned into views: status stays cheap with many arms.
        best = tuple(arm_view(a, e, config, seeds) for a, e in heapq.nsmallest(top, items, order))
        worst: tuple[ArmView, ...] = ()
        left_out = 0
        if len(items) > top:
            candidates = [item for item in items if item[0] not in seeds]
            left_out = len(items) - len(candidates)
            worst = tuple(
                arm_view(a, e, config, seeds) for a, e in heapq.nlargest(top, candidates, order)
            )
        return Status(
            learner.name,
            config.phase,
            config,
            summary,
            best,
            worst,
            self.store.last_reset(learner.learner_id),
            left_out,
            tuple(self.starved_arms()) if counts else (),
        )
