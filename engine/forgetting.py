"""Forgetting: the one arithmetic by which stored posteriors, the service's cache and the
simulations pull an arm's evidence back toward its prior.

With a half-life of h observations, each observation of an arm first scales the evidence the
arm holds beyond its prior by keep = 0.5 ** (1 / h), then adds the new reward:

    alpha' = alpha * keep + prior_alpha * (1 - keep) + r
    beta'  = beta  * keep + prior_beta  * (1 - keep) + (1 - r)

so evidence older than h observations of the arm counts half. n observations in order fold
into one step (F, Ga, Gb): alpha' = alpha * F + prior_alpha * (1 - F) + Ga, which is what the
storage hot path writes in one SQL statement. With no half-life keep is 1, F is 1 and the
update is the plain alpha += r, beta += 1 - r of SPEC section 5, to the bit.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from learning_bot.engine.errors import InvalidInput


def forgetting_prior(
    type_prior: tuple[float, float],
    base_alpha: float,
    base_beta: float,
    base_pulls: int,
    reset_at: int,
) -> tuple[float, float]:
    """The prior an arm's evidence decays toward, from its stored row.

    - The row's base, when the base holds no evidence: a new arm at its type's prior, a seed
      arm at seedBoost's Beta(b, 1), an arm just reset at Beta(1, 1).
    - Beta(1, 1) for an arm reset at some point since (`reset_at`, the last trace before its
      reset, is set): a reset returns an arm to Beta(1, 1) (SPEC section 6), so that is what
      it forgets toward, not its type's optimistic prior.
    - Otherwise its type's prior.

    Storage evaluates the same rule in SQL (storage.forgetting) on the same row, so stored
    posteriors, the cache and `db verify` agree."""
    if base_pulls == 0:
        return float(base_alpha), float(base_beta)
    if reset_at > 0:
        return 1.0, 1.0
    return type_prior


def keep_factor(half_life: float | None) -> float:
    """The share of an arm's evidence kept at each of its observations (1: never forget)."""
    if half_life is None or half_life == 0:
        return 1.0
    if isinstance(half_life, bool) or not isinstance(half_life, (int, float)):
        raise InvalidInput(f"half_life must be a number >= 0, got {half_life!r}")
    if not math.isfinite(half_life) or half_life < 0:
        raise InvalidInput(f"half_life must be a number >= 0, got {half_life!r}")
    return float(0.5 ** (1.0 / float(half_life)))


@dataclass(slots=True)
class Fold:
    """Observations of one arm folded into one step: alpha' = alpha * keep + prior_alpha *
    (1 - keep) + alpha_gain (beta alike)."""

    keep: float = 1.0
    alpha_gain: float = 0.0
    beta_gain: float = 0.0
    pulls: int = 0
    rewards: float = 0.0
    """The rewards folded, as recorded (forgetting does not decay this sum)."""

    def add(self, reward: float, keep: float) -> None:
        """One more observation, after those already folded."""
        self.keep *= keep
        self.alpha_gain = self.alpha_gain * keep + reward
        self.beta_gain = self.beta_gain * keep + (1.0 - reward)
        self.pulls += 1
        self.rewards += reward

    def as_tuple(self) -> tuple[float, float, float, float, float]:
        """(alpha gain, beta gain, pulls, keep, rewards): the cache's Gains entry."""
        return (self.alpha_gain, self.beta_gain, float(self.pulls), self.keep, self.rewards)


def fold(rewards: Iterable[float], keep: float) -> Fold:
    """The single step equal to observing `rewards` in order."""
    out = Fold()
    for r in rewards:
        out.add(r, keep)
    return out


def forget(value: float, prior: float, keep: float, gain: float) -> float:
    """One folded step on alpha (or beta): value * keep + prior * (1 - keep) + gain.

    Storage evaluates the same expression in SQL, in the same order."""
    return value * keep + prior * (1.0 - keep) + gain
