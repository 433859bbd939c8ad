"""The exploration bound's counts as one service keeps them (engine.exploration): read from
the stored runs on first use, and again at most every SYNC_SECONDS when other replicas stored
runs, so that the bound counts every replica's runs and survives a restart."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from learning_bot.engine.errors import Unavailable

if TYPE_CHECKING:  # numpy is imported on first selection, not at start-up
    from learning_bot.engine.exploration import ExplorationBound, OwedTries
    from learning_bot.engine.ports import RunStats

Schedule = Callable[[Callable[[], None]], None]
"""Runs a callable soon, somewhere that does not make the caller wait."""


class ExplorationReads(Protocol):
    """What the counts read of storage: the learner's stored runs and, per arm, its runs since
    its last inclusion (the LeftOutRuns port)."""

    def run_stats(self, learner_id: int) -> RunStats: ...

    def left_out_runs(self, learner_id: int, window: int) -> dict[str, int]: ...


@dataclass(eq=False)
class ExplorationCounts:
    """The arms owed a try, counted from the stored runs plus this process's selections."""

    store: ExplorationReads
    _learner_id: Callable[[], int]
    _clock: Callable[[], float]
    _schedule: Schedule | None = None
    _bound: ExplorationBound | None = None
    _owed: OwedTries | None = field(default=None, init=False)
    _synced_at: float = field(default=float("-inf"), init=False)
    _every: float = field(default=0.0, init=False)
    """SYNC_SECONDS, read with the bound's module on first use."""
    _runs: int | None = field(default=None, init=False)
    """The learner's stored runs as of the last read, plus the runs this process stored
    since: when storage holds no others, its count is the learner's."""

    def owed(self) -> OwedTries:
        """The counts: read from the stored runs on first use, read again at most every
        SYNC_SECONDS (in the background when a scheduler was given)."""
        owed = self._owed
        if owed is None:
            from learning_bot.engine.exploration import SYNC_SECONDS, ExplorationBound, OwedTries

            self._every = SYNC_SECONDS
            owed = self._owed = OwedTries(self._bound or ExplorationBound())
            self._synced_at = self._clock()
            self.sync(first=True)
        elif self._clock() - self._synced_at >= self._every:
            self._synced_at = self._clock()
            if self._schedule is not None:
                self._schedule(self.sync)
            else:
                self.sync()
        return owed

    def sync(self, first: bool = False) -> None:
        """Read the counts from the stored runs: on first use, and later when storage holds
        runs this process did not store (another replica's), so that a process alone keeps
        counting its own selections."""
        owed = self._owed
        if owed is None:
            return
        window = owed.bound.after_selections
        if window <= 0:
            return
        learner_id = self._learner_id
        with contextlib.suppress(Unavailable):  # keep this process's counts meanwhile
            runs = self.store.run_stats(learner_id()).all_time_traces
            if not first and runs == self._runs:
                return
            owed.sync(self.store.left_out_runs(learner_id(), window))
            self._runs = runs

    def stored(self, runs: int) -> None:
        """This process stored `runs` more runs of the learner."""
        if self._runs is not None:
            self._runs += runs
