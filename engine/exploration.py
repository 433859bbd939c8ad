"""The exploration bound: no arm is starved for good (docs/context.md, "No tool starved for good").

Thompson sampling stops offering an arm whose posterior is low, and an arm that is not offered
is never observed again: a bug that poisoned its posterior, or a run of bad luck, would keep it
out for ever. The bound: an arm left out of `after_selections` consecutive selections of a
learner (default 500) is owed a try, and the next selection includes it as it includes a seed
(at most `per_select` such arms per selection, the longest left out first); being included
starts its count again. So with k arms owed a try at once, each is included within
`after_selections` + k selections of its last inclusion.

The count is the learner's, not the process's. A service reads it from the stored runs when it
first selects (storage's `left_out_runs`: of the learner's latest `after_selections`
active-phase runs, every replica's, those since each arm's last inclusion) and counts its own
selections from there; at most every SYNC_SECONDS it reads it again if storage holds runs the
process did not store itself (another replica's). Precisely: an arm offered in every selection
is force-included at the latest when the runs stored since its last included run, as of the
process's last read, plus the process's own selections since that read reach
`after_selections`; a restart does not start the count again, and replicas count each other's
runs within SYNC_SECONDS. From storage the count is in runs: a session's runs each count (its
later selects draw nothing), and an arm loaded through tool search counts as included, which
can only bring a try earlier; a selection whose run is never reported counts only in the
process that made it. An arm none of the read runs included counts from its first appearance
in them; one that appears in none starts at the process's current selection. A process alone
on its learner keeps counting its own selections, so its selections are those of a simulation
with the same seed.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from learning_bot.engine.errors import InvalidInput
from learning_bot.engine.inventory import ArmSet, BoolArray

DEFAULT_AFTER_SELECTIONS = 500
SYNC_SECONDS = 10.0
"""How often at most a service reads the counts from the stored runs again (when storage holds
runs it did not store)."""


@dataclass(frozen=True, slots=True)
class ExplorationBound:
    after_selections: int = DEFAULT_AFTER_SELECTIONS
    """Consecutive selections an arm may be left out of before it is owed a try (0: never)."""
    per_select: int = 1
    """Arms owed a try that one selection includes at most."""

    def __post_init__(self) -> None:
        if self.after_selections < 0 or self.per_select < 0:
            raise InvalidInput("after_selections and per_select must be >= 0")


class _Lasts:
    """One inventory's last inclusions (`lasts`, in selections), the arms whose count its
    selections changed since it was written back (`touched`), and a lower bound of `lasts`
    (`floor`: inclusions only raise a count, so a bound once true stays one)."""

    __slots__ = ("floor", "ids", "lasts", "touched")

    def __init__(self, ids: tuple[str, ...], lasts: npt.NDArray[np.int64]) -> None:
        self.ids = ids
        self.lasts = lasts
        self.touched = np.zeros(len(ids), dtype=bool)
        self.floor = int(lasts.min()) if len(lasts) else 0


class OwedTries:
    """Each arm's last inclusion, counted in selections, and the arms owed a try."""

    def __init__(self, bound: ExplorationBound) -> None:
        self.bound = bound
        self.count = 0
        """Selections made so far."""
        self._last: dict[str, int] = {}
        self._fresh: set[str] = set()
        """Arms this process included since the last `sync`."""
        self._lock = threading.Lock()
        self._cached: _Lasts | None = None

    def _lasts(self, arm_set: ArmSet) -> _Lasts:
        """The last inclusions of `arm_set`'s arms as an array, kept while the inventory is
        the same; what its selections change is written back to the per-arm counts when
        another inventory comes, or at `sync`."""
        cached = self._cached
        if cached is not None and cached.ids is arm_set.ids:
            return cached
        self._write_back()
        last = self._last
        count = self.count
        lasts = np.fromiter(
            (last.setdefault(a, count) for a in arm_set.ids), dtype=np.int64, count=len(arm_set)
        )
        made = self._cached = _Lasts(arm_set.ids, lasts)
        return made

    def _write_back(self) -> None:
        cached = self._cached
        if cached is None or not cached.touched.any():
            return
        ids, lasts = cached.ids, cached.lasts
        for i in np.flatnonzero(cached.touched).tolist():
            self._last[ids[i]] = int(lasts[i])
            self._fresh.add(ids[i])
        cached.touched[:] = False

    def mask(self, arm_set: ArmSet) -> BoolArray | None:
        """The arms to force into this selection, or None (the usual case)."""
        bound = self.bound
        if bound.after_selections <= 0 or bound.per_select <= 0 or not len(arm_set):
            return None
        with self._lock:
            cached = self._lasts(arm_set)
            if self.count - cached.floor < bound.after_selections:
                return None  # the common case, without an array operation
            lasts = cached.lasts
            cached.floor = int(lasts.min())
            if self.count - cached.floor < bound.after_selections:
                return None
            owed = self.count - lasts >= bound.after_selections
            candidates = np.flatnonzero(owed)
            if candidates.size > bound.per_select:
                oldest = np.argsort(lasts[candidates], kind="stable")[: bound.per_select]
                candidates = candidates[oldest]
        out = np.zeros(len(arm_set), dtype=bool)
        out[candidates] = True
        return out

    def included(self, arm_set: ArmSet, mask: BoolArray) -> None:
        """A selection was made over `arm_set` and included the arms `mask` marks."""
        if self.bound.after_selections <= 0:
            return
        with self._lock:
            self.count += 1
            cached = self._lasts(arm_set)
            cached.lasts[mask] = self.count
            cached.touched |= mask

    def sync(self, left_out: Mapping[str, int]) -> None:
        """Take the learner's counts read from storage: arm id -> runs since its last
        inclusion (every replica's). An arm this process included since the last sync keeps
        the smaller count (its run may not be stored yet); an arm not in `left_out` keeps this
        process's count."""
        with self._lock:
            self._write_back()
            count = self.count
            last = self._last
            fresh = self._fresh
            for arm_id, runs in left_out.items():
                if arm_id in fresh:
                    runs = min(runs, count - last.get(arm_id, count))
                last[arm_id] = count - runs
            fresh.clear()
            self._cached = None
