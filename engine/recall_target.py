"""The recall target (SPEC section 4b, `recallTarget`): the least-cost set whose estimated
recall meets the target, instead of the set that fills a token budget.

The estimator: with p_i an arm's chance of being used by a turn of this request's session
(the posterior mean of its usefulness: under the request's context when the context policy
draws, else the learner-wide posterior, the pooled one when the policy pools), a set S is
expected to keep

    estimated recall(S) = sum of p_i over S / sum of p_i over every arm

of the components the session will use (each turn's uses counted, as the study and status
count them). Arms are added, after the forced ones (seeds, under-explored arms, arms owed a
try), in the order of their Thompson score per token of cost, until the estimate reaches the
target; an arm that would take the set past `token_budget` is skipped (the budget is a cap).
Ranking by the draw rather than by p_i keeps Thompson sampling's exploration; the stopping
rule reads p_i, the posterior predictive, so the estimate is an expectation, not a draw.
"""

from __future__ import annotations

import numpy as np

from engine.inventory import BoolArray, FloatArray, IntArray

SLACK = 1e-12
"""Rounding allowed when the estimate is compared with the target."""


def pack_to_target(
    means: FloatArray,
    rank: FloatArray,
    costs: IntArray,
    forced: BoolArray,
    target: float,
    budget: int,
    eligible: BoolArray | None = None,
) -> tuple[BoolArray, int, float]:
    """(the chosen arms, their tokens, their estimated recall): the forced arms, then the
    others by `rank` (highest first, ties in inventory order) while the estimated recall of
    `means` stays below `target`, each that fits under `budget` with the arms chosen before
    it. Arms whose mean is 0, and arms outside `eligible` when it is given, are never added
    (the former add cost and no recall)."""
    mask = forced.copy()
    used = int(costs[mask].sum())
    total = float(means.sum())
    if total <= 0.0:
        return mask, used, 1.0
    goal = target * total
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
