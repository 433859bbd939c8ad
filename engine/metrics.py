"""Numbers reported about a learner: the recommended baseline rate, the token savings and the
estimated recall of selection."""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import lru_cache

from learning_bot.engine.errors import InvalidInput


def recommended_baseline_rate(arm_count: int) -> float:
    """1-10 arms: 0.20; 11-50 arms: 0.10; more than 50: 0.05."""
    if isinstance(arm_count, bool) or not isinstance(arm_count, int) or arm_count < 0:
        raise InvalidInput(f"arm_count must be a whole number >= 0, got {arm_count!r}")
    if arm_count <= 10:
        return 0.20
    if arm_count <= 50:
        return 0.10
    return 0.05


def token_savings_percent(baseline_avg: float | None, selected_avg: float | None) -> float | None:
    """((baseline - selected) / baseline) * 100, or None when either average is missing."""
    if baseline_avg is None or selected_avg is None:
        return None
    if not (math.isfinite(baseline_avg) and math.isfinite(selected_avg)) or baseline_avg <= 0:
        return None
    return (baseline_avg - selected_avg) / baseline_avg * 100.0


RECALL_GRID = 48
"""Support points of the usage distribution `usefulness_estimates` fits: sin^2 spacing, dense
near 0 and 1 where rarely and always used components sit."""
RECALL_ITERATIONS = 60
_SUPPORT = tuple(math.sin(math.pi * (j + 0.5) / (2 * RECALL_GRID)) ** 2 for j in range(RECALL_GRID))
_LOG_P = tuple(math.log(x) for x in _SUPPORT)
_LOG_Q = tuple(math.log1p(-x) for x in _SUPPORT)
_NEGLIGIBLE = math.log(1e-12)


def usefulness_estimates(evidence: Mapping[str, tuple[float, float]]) -> dict[str, float]:
    """Each arm's usage probability from its evidence, by empirical Bayes.

    `evidence` maps an arm id to its (uses, non-uses) beyond its type's prior (fractional
    under forgetting). The distribution of usage probabilities over all the arms is fitted by
    maximum marginal likelihood on `RECALL_GRID` support points (EM, `RECALL_ITERATIONS`
    steps from uniform), and each arm's estimate is its posterior mean under that
    distribution. An arm seen a handful of times is read against how the learner's arms in
    general turned out: 0 uses in 5 observations reads as "rarely used" (about the rate of
    the rarely used arms), not as the 8% a flat prior gives, and that bias, summed over every
    run that left such arms out, is what an estimate of recall cannot afford. Arms with a lot
    of evidence keep their observed rate.

    The fit is the costliest part of a status (about 2 ms at 30 arms) and its input changes
    only when an arm does: the last four fits are kept, keyed by the evidence itself, so a
    server asked for the same status again answers from the same figures."""
    key = tuple((arm_id, (uses, misses)) for arm_id, (uses, misses) in evidence.items())
    return dict(_fit(key))


Evidence = tuple[tuple[str, tuple[float, float]], ...]


@lru_cache(maxsize=4)
def _fit(evidence: Evidence) -> dict[str, float]:
    """usefulness_estimates on the evidence as (arm id, (uses, non-uses)) pairs, in order."""
    groups: dict[tuple[float, float], list[str]] = {}
    for arm_id, (uses, misses) in evidence:
        key = (round(max(uses, 0.0), 9), round(max(misses, 0.0), 9))
        groups.setdefault(key, []).append(arm_id)
    if not groups:
        return {}
    rows: list[tuple[list[int], list[float], int]] = []
    for uses, misses in groups:
        logs = [uses * lp + misses * lq for lp, lq in zip(_LOG_P, _LOG_Q, strict=True)]
        top = max(logs)
        cells = [j for j, v in enumerate(logs) if v - top > _NEGLIGIBLE]
        rows.append((cells, [math.exp(logs[j] - top) for j in cells], len(groups[(uses, misses)])))
    total = float(sum(weight for _, _, weight in rows))
    g = [1.0 / RECALL_GRID] * RECALL_GRID
    for _ in range(RECALL_ITERATIONS):
        acc = [0.0] * RECALL_GRID
        for cells, lik, weight in rows:
            parts = [v * g[j] for j, v in zip(cells, lik, strict=True)]
            norm = sum(parts)
            if norm <= 0.0:
                continue
            share = weight / norm
            for j, v in zip(cells, parts, strict=True):
                acc[j] += v * share
        g = [max(a / total, 1e-12) for a in acc]
    out: dict[str, float] = {}
    for ids, (cells, lik, _) in zip(groups.values(), rows, strict=True):
        parts = [v * g[j] for j, v in zip(cells, lik, strict=True)]
        norm = sum(parts)
        mean = sum(p * _SUPPORT[j] for j, p in zip(cells, parts, strict=True)) / norm
        for arm_id in ids:
            out[arm_id] = mean
    return out


def estimated_recall(
    usefulness: Mapping[str, float], inclusion: Mapping[str, tuple[int, int, int]]
) -> float | None:
    """The estimated share of the components the model used that selection kept.

    Over recent selected working runs: the uses of included arms are observed (hits); the
    uses of the arms left out are not, and are estimated as each arm's usage probability
    times the runs that left it out. Recall = hits / (hits + estimated misses). Only the
    left-out side is estimated, so the figure is exact when selection leaves nothing out.
    None before any selected working run."""
    hits = 0.0
    missed = 0.0
    runs = 0
    for arm_id, (included, offered, used) in inclusion.items():
        hits += used
        runs = max(runs, offered)
        left_out = offered - included
        if left_out > 0:
            missed += usefulness.get(arm_id, 0.0) * left_out
    if runs == 0 or hits + missed <= 0.0:
        return None
    return hits / (hits + missed)
