"""Numbers reported about a learner: the recommended baseline rate, the token savings and the
estimated recall of selection."""

from __future__ import annotations

import math
from collections.abc import Mapping

from engine.errors import InvalidInput


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


def usefulness_estimate(alpha: float, beta: float, prior_alpha: float, prior_beta: float) -> float:
    """An arm's usage probability from the evidence its posterior holds beyond its prior.

    The curated prior Beta(3, 1) is optimistic on purpose (it makes selection try an arm);
    for estimating how often an arm is used it would pull rarely used arms up to 0.75, so the
    evidence is read alone, with a Jeffreys half-count on either side."""
    used = max(alpha - prior_alpha, 0.0)
    unused = max(beta - prior_beta, 0.0)
    return (used + 0.5) / (used + unused + 1.0)


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
