"""The recall target (SPEC section 4b, `recallTarget`): the least-cost set whose estimated
recall meets the target, instead of the set that fills a token budget.

The estimator. p_i is an arm's posterior mean usefulness for this request (under the
request's context when the context policy draws, else the learner-wide posterior, the pooled
one when the policy pools). The arms are ranked by p_i per token of cost (after the forced
ones: seeds, under-explored arms, arms owed a try); a set that stops at mass share tau,

    share(S) = sum of p_i over S / sum of p_i over every arm,

is the cheapest way to that share. The p_i rank well but are not calibrated probabilities
(the context-aware posterior sums evidence over a request's features, which dilutes it over
common words), so tau = target kept far more on BFCL and a little less on the task-type
workloads than the target asked (BENCHMARKS.md). The share at which to stop is therefore
calibrated on what a runtime reports of baseline sessions, which offer every arm: for each
arm a baseline session used, its level is the share of the set ranked before it at the
session's opening. A set stopping at tau keeps every used arm whose level is below tau, so
the smallest tau above the ceil((n + 1) x target)-th smallest of n recorded levels keeps the
target's share of the arms used (a split-conformal bound, for sessions like the recorded ones).
Until enough levels are recorded for a target (n >= 1 / (1 - target) - 1), the share is the
target itself, the uncalibrated estimate.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Sequence

import numpy as np

from learning_bot.engine.inventory import BoolArray, FloatArray, IntArray

SLACK = 1e-12
"""Rounding allowed when the estimate is compared with the target."""
EVERY_ARM = 2.0
"""A share no set reaches: stop never (every arm of positive mean the budget allows)."""
CALIBRATION_LEVELS = 200
"""Levels of used arms a calibration keeps: the latest, since the ranking they measure improves
as the learner learns (older levels make the sets too large). 200 is about the uses of 35
baseline sessions on BFCL and 20 on the task-type workloads; 5,000 and 1,000 kept 0.02-0.08
more than the target on BFCL, 150 0.024 less at 0.90 (BENCHMARKS.md)."""


def ranked(means: FloatArray, costs: IntArray) -> FloatArray:
    """The order of the arms that are not forced in: posterior mean per token of cost,
    highest first (a free arm first when useful)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        rank = means / costs
    return np.where(np.isnan(rank), -np.inf, rank)


def pack_to_target(
    means: FloatArray,
    rank: FloatArray,
    costs: IntArray,
    forced: BoolArray,
    share: float,
    budget: int,
    eligible: BoolArray | None = None,
) -> tuple[BoolArray, int, float]:
    """(the chosen arms, their tokens, their share of the means): the forced arms, then the
    others by `rank` (highest first, ties in inventory order) while the share of `means` kept
    stays below `share`, each that fits under `budget` with the arms chosen before it. Arms
    whose mean is 0, and arms outside `eligible` when it is given, are never added (the
    former add cost and no recall)."""
    mask = forced.copy()
    used = int(costs[mask].sum())
    total = float(means.sum())
    if total <= 0.0:
        return mask, used, 1.0
    goal = share * total
    kept = float(means[mask].sum())
    if kept + SLACK * total >= goal:
        return mask, used, kept / total
    candidates = ~mask & (means > 0.0)
    if eligible is not None:
        candidates &= eligible
    rest = np.flatnonzero(candidates)
    order = rest[np.argsort(-rank[rest], kind="stable")]
    for i, cost, mean in zip(
        order.tolist(), costs[order].tolist(), means[order].tolist(), strict=True
    ):
        if used + cost > budget:
            continue
        mask[i] = True
        used += cost
        kept += mean
        if kept + SLACK * total >= goal:
            break
    return mask, used, kept / total


def inclusion_levels(
    means: FloatArray, rank: FloatArray, forced: BoolArray, used: Sequence[int]
) -> list[float]:
    """For each arm in `used`: the share of `means` held by the arms `pack_to_target` takes
    before it (0 for a forced arm; never, math.inf, for an arm of mean 0). A set that stops at
    share tau (no budget cap) holds exactly the used arms whose level is below tau."""
    total = float(means.sum())
    if total <= 0.0:
        return [0.0 if forced[i] else math.inf for i in used]
    rest = np.flatnonzero(~forced & (means > 0.0))
    order = rest[np.argsort(-rank[rest], kind="stable")]
    before = np.full(len(means), math.inf)
    start = float(means[forced].sum())
    cumulative = start + np.concatenate(([0.0], np.cumsum(means[order])[:-1]))
    before[order] = cumulative / total
    before[forced] = 0.0
    return [float(before[i]) for i in used]


class RecallCalibration:
    """The levels (`inclusion_levels`) of the arms baseline sessions used, the latest
    `keep`, and the share to stop at for a recall target."""

    def __init__(self, keep: int = CALIBRATION_LEVELS) -> None:
        self._levels: deque[float] = deque(maxlen=keep)
        self._sorted: list[float] | None = []

    def __len__(self) -> int:
        return len(self._levels)

    def record(self, levels: Iterable[float]) -> None:
        self._levels.extend(levels)
        self._sorted = None

    def share(self, target: float) -> float:
        """The share at which a set keeps `target` of the arms used, by the recorded levels
        (split conformal: above the ceil((n + 1) x target)-th smallest level; EVERY_ARM when
        that level is one no set reaches); `target` itself while too few levels are recorded
        for it."""
        n = len(self._levels)
        k = math.ceil((n + 1) * target - 1e-9)
        if n == 0 or k > n:
            return target
        if self._sorted is None:
            self._sorted = sorted(self._levels)
        level = self._sorted[k - 1]
        if not math.isfinite(level):
            return EVERY_ARM
        return min(EVERY_ARM, level + 1e-9)


class SessionLevels:
    """A learner's calibration and the baseline sessions waiting to report what they used:
    each one's ranking at its opening (arm ids, means, ranks, forced arms), by session key,
    the latest `keep` sessions (at 1,000 arms about 24 KB each)."""

    def __init__(self, keep: int = 256) -> None:
        self.calibration = RecallCalibration()
        self._keep = keep
        self._open: dict[str, tuple[dict[str, int], FloatArray, FloatArray, BoolArray]] = {}

    def opened(
        self,
        key: str,
        ids: Sequence[str],
        means: FloatArray,
        rank: FloatArray,
        forced: BoolArray,
    ) -> None:
        """A baseline session `key` was decided: how its arms ranked at its opening."""
        self._open.pop(key, None)
        self._open[key] = ({a: i for i, a in enumerate(ids)}, means, rank, forced)
        while len(self._open) > self._keep:
            del self._open[next(iter(self._open))]

    def observed(self, key: str, used: Iterable[str]) -> None:
        """A run of session `key` used these arms: when the session is an open baseline
        session, their levels calibrate the target."""
        hit = self._open.get(key)
        if hit is None:
            return
        position, means, rank, forced = hit
        mine = [position[a] for a in used if a in position]
        if mine:
            self.calibration.record(inclusion_levels(means, rank, forced, mine))
