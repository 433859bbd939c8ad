"""Starved arms: arms that were useful and that selection now leaves out of nearly every run.

The one definition, used by `/learning status` (which flags them) and by the starvation alert.
A learner that learns from a broken signal (a reference detector that never sees a tool used,
rewards poisoned by a model change) drives useful arms' posteriors down until Thompson
Sampling stops including them, and then it never sees them again: nothing in the posteriors
alone says something is wrong. What does: an arm with a record of being useful that the recent
runs offered and almost always left out.

Thresholds (over the working runs among the learner's latest `STARVATION_WINDOW` active
selected runs, as `Store.inclusion_counts` counts them):

- offered in at least `MIN_OFFERED` of them, and included in at most `MAX_INCLUDED_SHARE`
  of the runs that offered it;
- useful: at least `MIN_PULLS` pulls since its last reset with at least `USEFUL_ACCURACY` of
  them rewarded, or used by the model in at least `USEFUL_USE_SHARE` of the recent runs that
  did include it;
- not a seed arm (seed arms are always included).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

STARVATION_WINDOW = 50
"""Latest active selected runs read: short, so a learner that stopped including an arm a few
dozen runs ago says so (a window of hundreds would still hold the runs from before)."""
MIN_OFFERED = 20
MAX_INCLUDED_SHARE = 0.05
MIN_PULLS = 5
USEFUL_ACCURACY = 0.3
USEFUL_USE_SHARE = 0.5


@dataclass(frozen=True, slots=True)
class ArmRecord:
    """What starvation needs to know of an arm: its label and its record since its reset."""

    arm_id: str
    label: str
    pulls: int
    rewards: float


@dataclass(frozen=True, slots=True)
class StarvedArm:
    arm_id: str
    label: str
    included: int
    """Recent runs that included it."""
    offered: int
    """Recent runs that offered it."""
    pulls: int
    accuracy: float | None
    """Rewards per pull since its last reset (None without pulls)."""

    @property
    def included_share(self) -> float:
        return self.included / self.offered if self.offered else 0.0


def starved_arms(
    arms: Iterable[ArmRecord],
    inclusion: Mapping[str, tuple[int, int, int]],
    seeds: Collection[str] = (),
) -> list[StarvedArm]:
    """The starved arms, the least included first (then by id)."""
    out: list[StarvedArm] = []
    for arm in arms:
        if arm.arm_id in seeds or arm.arm_id not in inclusion:
            continue
        included, offered, used = inclusion[arm.arm_id]
        if offered < MIN_OFFERED or included > MAX_INCLUDED_SHARE * offered:
            continue
        accuracy = arm.rewards / arm.pulls if arm.pulls else None
        useful = (
            arm.pulls >= MIN_PULLS and accuracy is not None and accuracy >= USEFUL_ACCURACY
        ) or (included > 0 and used >= USEFUL_USE_SHARE * included)
        if useful:
            out.append(StarvedArm(arm.arm_id, arm.label, included, offered, arm.pulls, accuracy))
    out.sort(key=lambda s: (s.included_share, s.arm_id))
    return out
