"""Numbers reported about a learner: the recommended baseline rate and the token savings."""

from __future__ import annotations

import math

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
