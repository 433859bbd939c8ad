"""Beta posteriors, their statistics and the priors arms start from."""

from __future__ import annotations

import enum
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from learning_bot.engine.arms import Arm, ArmType, parse_arm_id
from learning_bot.engine.errors import InvalidInput


class Confidence(enum.StrEnum):
    """How much data stands behind a posterior, by its number of pulls."""

    NONE = "none"
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"
    VERY_HIGH = "very high"


def confidence_for_pulls(pulls: int) -> Confidence:
    """0 none, 1-4 low, 5-19 medium, 20-49 high, 50+ very high."""
    if pulls <= 0:
        return Confidence.NONE
    if pulls < 5:
        return Confidence.LOW
    if pulls < 20:
        return Confidence.MEDIUM
    if pulls < 50:
        return Confidence.HIGH
    return Confidence.VERY_HIGH


def now_ms() -> int:
    """The current time in Unix milliseconds, the unit every timestamp here uses."""
    return time.time_ns() // 1_000_000


WallClock = Callable[[], int]
"""Where a component reads the date and time (Unix ms): `now_ms` in the product; the App
hands its one clock to every service, the command bus and the alert scheduler, and tests
and simulations pass their own."""


def to_ms(at: int | float | datetime | None) -> int | None:
    """Normalise a timestamp (Unix ms or a datetime) to Unix milliseconds."""
    if at is None:
        return None
    if isinstance(at, datetime):
        return int(at.timestamp() * 1000)
    if isinstance(at, bool) or not isinstance(at, (int, float)) or not math.isfinite(at):
        raise InvalidInput(f"timestamp must be Unix milliseconds or a datetime, got {at!r}")
    return int(at)


def check_reward(reward: float) -> float:
    """Return `reward` as a float, or raise InvalidInput when it is not a number in [0, 1]."""
    if isinstance(reward, bool) or not isinstance(reward, (int, float)):
        raise InvalidInput(f"reward must be a number in [0, 1], got {reward!r}")
    value = float(reward)
    if not math.isfinite(value) or value < 0.0 or value > 1.0:
        raise InvalidInput(f"reward must be a number in [0, 1], got {reward!r}")
    return value


_Z95 = 1.96


@dataclass(frozen=True, slots=True)
class Posterior:
    """A Beta(alpha, beta) belief about how often an arm is used, with its pull count."""

    alpha: float
    beta: float
    pulls: int = 0
    last_updated: int | None = None
    """Unix milliseconds of the last update, or None when never updated."""

    def __post_init__(self) -> None:
        for name in ("alpha", "beta"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise InvalidInput(f"{name} must be a positive number, got {value!r}")
            if not math.isfinite(value) or value <= 0:
                raise InvalidInput(f"{name} must be a positive finite number, got {value!r}")
            object.__setattr__(self, name, float(value))
        if isinstance(self.pulls, bool) or not isinstance(self.pulls, int) or self.pulls < 0:
            raise InvalidInput(f"pulls must be a whole number >= 0, got {self.pulls!r}")
        object.__setattr__(self, "last_updated", to_ms(self.last_updated))

    @classmethod
    def trusted(cls, alpha: float, beta: float, pulls: int, last_updated: int | None) -> Posterior:
        """Build from values already checked (storage, the cache) without validating again:
        loading a thousand posteriors should not cost a thousand validations."""
        obj = object.__new__(cls)
        object.__setattr__(obj, "alpha", float(alpha))
        object.__setattr__(obj, "beta", float(beta))
        object.__setattr__(obj, "pulls", pulls)
        object.__setattr__(obj, "last_updated", last_updated)
        return obj

    @property
    def mean(self) -> float:
        return self.alpha / (self.alpha + self.beta)

    @property
    def variance(self) -> float:
        total = self.alpha + self.beta
        return (self.alpha * self.beta) / (total * total * (total + 1.0))

    def credible_interval(self, level: float = 0.95) -> tuple[float, float]:
        """Normal-approximation interval mean ± z·sd, clamped to [0, 1] (z = 1.96 at 95%)."""
        if not (isinstance(level, (int, float)) and 0.0 < level < 1.0):
            raise InvalidInput(f"level must be strictly between 0 and 1, got {level!r}")
        if level == 0.95:
            z = _Z95
        else:
            from statistics import NormalDist  # with decimal and fractions: not at start-up

            z = NormalDist().inv_cdf((1.0 + level) / 2.0)
        half = z * math.sqrt(self.variance)
        mean = self.mean
        return max(0.0, mean - half), min(1.0, mean + half)

    @property
    def confidence(self) -> Confidence:
        return confidence_for_pulls(self.pulls)

    def updated(self, reward: float, at: int | float | datetime | None = None) -> Posterior:
        """The posterior after one observation: alpha += r, beta += 1 - r, pulls += 1."""
        r = check_reward(reward)
        stamp = to_ms(at)
        return Posterior(
            self.alpha + r,
            self.beta + (1.0 - r),
            self.pulls + 1,
            now_ms() if stamp is None else stamp,
        )


CURATED_PRIOR = (3.0, 1.0)
LEARNED_PRIOR = (1.0, 1.0)
RESET_PRIOR = (1.0, 1.0)


def prior_parameters(arm_type: ArmType) -> tuple[float, float]:
    """(alpha, beta) of the initial prior: Beta(3,1) for curated types, Beta(1,1) for files."""
    return LEARNED_PRIOR if arm_type is ArmType.FILE else CURATED_PRIOR


def initial_prior(arm_or_type: Arm | ArmType | str) -> Posterior:
    """The posterior an arm starts from before any observation."""
    if isinstance(arm_or_type, Arm):
        arm_type = arm_or_type.type
    elif isinstance(arm_or_type, ArmType):
        arm_type = arm_or_type
    elif isinstance(arm_or_type, str):
        if ":" in arm_or_type:
            arm_type = parse_arm_id(arm_or_type).type
        else:
            try:
                arm_type = ArmType(arm_or_type)
            except ValueError:
                known = ", ".join(t.value for t in ArmType)
                raise InvalidInput(
                    f"unknown arm type {arm_or_type!r}; known types: {known}"
                ) from None
    else:
        raise InvalidInput(f"expected an Arm, ArmType or str, got {type(arm_or_type).__name__}")
    alpha, beta = prior_parameters(arm_type)
    return Posterior(alpha, beta)
