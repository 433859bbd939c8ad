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
    usefulness: Mapping[str, float], inclusion: Mapping[str, tuple[int, int]]
) -> float | None:
    """The estimated share of the components the model used that selection kept.

    Over the arms offered in recent selected runs, the usefulness-weighted share of them
    included: sum(p_i * included_i / offered_i) / sum(p_i), with p_i each arm's estimated
    usage probability. It is the expected recall of those runs when an arm's use does not
    depend on whether the others were included. None before any selected run."""
    num = den = 0.0
    for arm_id, (included, offered) in inclusion.items():
        if offered <= 0:
            continue
        p = usefulness.get(arm_id)
        if p is None:
            continue
        num += p * included / offered
        den += p
    if den <= 0.0:
        return None
    return num / den
