"""The posterior cache a LearningService selects from.

Reading posteriors from storage costs more than sampling them, so each service keeps them in
memory. Its own committed updates are applied in place (a few float additions); other
replicas' writes show up as a newer learner version, which triggers a reload. A local write
is bracketed by `writing()`: its start and its in-memory update each bump a generation
counter, and a reload is installed only when the generation is the one it started under and
no local write is under way. So a reload is never installed over an update it did not read,
nor one that read a write committed but not applied yet (which the write's update would then
count a second time).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from learning_bot.engine.arms import parse_arm_id
from learning_bot.engine.config import Phase
from learning_bot.engine.forgetting import forget
from learning_bot.engine.ports import ArmRecord
from learning_bot.engine.posterior import Posterior, prior_parameters

if TYPE_CHECKING:  # numpy is imported on first selection, not at start-up
    from learning_bot.engine.inventory import ArmSet, PosteriorArrays


class CachedArm:
    """A cached arm: mutable, so this process's own updates cost a few float additions."""

    __slots__ = ("alpha", "beta", "cost", "label", "last", "prior", "pulls", "rewards")

    def __init__(self, record: ArmRecord) -> None:
        p = record.posterior
        self.label = record.label
        self.cost = record.token_cost
        self.alpha = p.alpha
        self.beta = p.beta
        self.pulls = p.pulls
        self.last = p.last_updated
        self.prior = record.forgets_toward or prior_parameters(parse_arm_id(record.arm_id).type)
        """What forgetting pulls the arm toward (engine.forgetting.forgetting_prior)."""
        self.rewards = recorded_rewards(record)
        """The rewards received since the last reset, as recorded (never decayed)."""

    @property
    def mean(self) -> float:
        return self.alpha / (self.alpha + self.beta)

    def posterior(self) -> Posterior:
        return Posterior.trusted(self.alpha, self.beta, self.pulls, self.last)

    def record(self, arm_id: str) -> ArmRecord:
        return ArmRecord(arm_id, self.label, self.cost, self.posterior(), rewards=self.rewards)


def recorded_rewards(record: ArmRecord) -> float:
    """The record's recorded rewards; a record that does not carry them is read as
    pulls - (beta - 1): every prior has beta 1 and each plain update adds 1 - r to beta."""
    if record.rewards is not None:
        return record.rewards
    p = record.posterior
    return min(float(p.pulls), max(0.0, p.pulls - (p.beta - 1.0)))


Gains = Mapping[str, Sequence[float]]
"""arm id -> (alpha gain, beta gain, pulls gained[, keep[, rewards]]): with keep
(engine.forgetting, 1 when absent) the entry becomes alpha * keep + prior_alpha * (1 - keep) +
alpha gain, the arithmetic storage applies, so cached posteriors equal stored ones; rewards
(the alpha gain when absent) is the sum of the rewards recorded, which forgetting leaves
whole."""


def _step(gain: Sequence[float]) -> tuple[float, float, int, float, float]:
    keep = float(gain[3]) if len(gain) > 3 else 1.0
    rewards = float(gain[4]) if len(gain) > 4 else float(gain[0])
    return float(gain[0]), float(gain[1]), int(gain[2]), keep, rewards


@dataclass
class _Aligned:
    version: int
    arrays: PosteriorArrays


class PosteriorCache:
    """One learner's posteriors as last read, plus this process's updates since."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.arms: dict[str, CachedArm] = {}
        self.version = -1
        """The learner version the entries reflect."""
        self.phase = Phase.PASSIVE
        self.checked_at = float("-inf")
        self.stale = True
        """The entries must be read again before use."""
        self.generation = 0
        """Grows with every local write's start and update: a reload read before one must
        not be installed."""
        self.writes = 0
        """Local writes under way (between their start and their in-memory update)."""
        self._aligned: weakref.WeakKeyDictionary[ArmSet, _Aligned] = weakref.WeakKeyDictionary()

    def install(
        self,
        phase: Phase,
        version: int,
        records: Mapping[str, ArmRecord] | None,
        generation: int,
        at: float,
    ) -> bool:
        """Install what a refresh read (records None: only the version was checked).
        Returns False, installing nothing but the phase, when a local write started or was
        applied after the read began (`generation`), or one is under way (it may have
        committed before the read, and its update would add it again): the next refresh
        reads again."""
        with self.lock:
            self.phase = phase
            if records is None:
                self.checked_at = at
                return True
            if self.generation != generation or self.writes:
                self.checked_at = float("-inf")
                return False
            self.arms = {aid: CachedArm(rec) for aid, rec in records.items()}
            self.version = version
            self.stale = False
            self._aligned = weakref.WeakKeyDictionary()
            self.checked_at = at
            return True

    @contextmanager
    def writing(self) -> Iterator[None]:
        """Bracket one local write and its `apply`: a reload read meanwhile is not installed."""
        with self.lock:
            self.generation += 1
            self.writes += 1
        try:
            yield
        finally:
            with self.lock:
                self.writes -= 1

    def invalidate(self, reload: bool = False) -> None:
        """Check the version on next use; with `reload`, read every posterior again."""
        self.checked_at = float("-inf")
        if reload:
            self.stale = True

    def apply(self, gains: Gains, at: int, version: int | None = None) -> None:
        """Apply this process's committed changes to the entries and every aligned array.
        `version` is the learner version the write produced, when the store reports it."""
        with self.lock:
            self.generation += 1
            changes = 0
            steps = {arm_id: _step(gain) for arm_id, gain in gains.items()}
            for arm_id, (da, db, n, keep, dr) in steps.items():
                entry = self.arms.get(arm_id)
                changes += n
                if entry is None:
                    self.invalidate(reload=True)
                    continue
                if keep != 1.0:
                    pa, pb = entry.prior
                    entry.alpha = forget(entry.alpha, pa, keep, da)
                    entry.beta = forget(entry.beta, pb, keep, db)
                else:
                    entry.alpha += da
                    entry.beta += db
                entry.pulls += n
                entry.rewards += dr
                entry.last = at
            aligned_sets = list(self._aligned.items())
            for arm_set, aligned in aligned_sets:
                index = arm_set.index
                arrays = aligned.arrays
                for arm_id, (da, db, n, keep, _) in steps.items():
                    i = index.get(arm_id)
                    if i is None:
                        continue
                    entry = self.arms.get(arm_id)
                    if entry is not None:  # the entry holds the exact result; copy it
                        arrays.alpha[i] = entry.alpha
                        arrays.beta[i] = entry.beta
                    elif keep != 1.0:
                        # not cached, so its prior is not known here: the reload the missing
                        # entry asked for (above) rebuilds these arrays before the next use
                        continue
                    else:
                        arrays.alpha[i] += da
                        arrays.beta[i] += db
                    arrays.pulls[i] += n
            self.version = version if version is not None else self.version + changes
            for _, aligned in aligned_sets:
                aligned.version = self.version

    def labels(self) -> dict[str, str]:
        with self.lock:
            return {aid: entry.label for aid, entry in self.arms.items()}

    def arrays(self, arm_set: ArmSet) -> PosteriorArrays:
        """The cached posteriors aligned to `arm_set` (call with the lock held)."""
        aligned = self._aligned.get(arm_set)
        if aligned is None or aligned.version != self.version:
            from learning_bot.engine.inventory import align_posteriors

            aligned = _Aligned(self.version, align_posteriors(arm_set, self.arms))
            self._aligned[arm_set] = aligned
        return aligned.arrays
