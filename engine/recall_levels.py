"""The recall target's calibration kept in storage (the RecallLevels port), so that a restarted
process and every replica of a learner calibrate on the same uses.

The uses a learner's baseline sessions record (engine.recall_target.SessionLevels) are appended
to the store as they are observed, and the latest CALIBRATION_LEVELS of them are read back on
first use and again at most every SYNC_SECONDS (in the background when a scheduler is given):
every replica's, in the order they were stored. What a replica observed but could not store
(storage unavailable) is kept and stored with the next read. The rankings of the baseline
sessions still open stay in the process that opened them: a later run of such a session that
another replica observes does not calibrate. A store without the port keeps the calibration in
this process only, as before it was stored.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

from learning_bot.engine.errors import Unavailable
from learning_bot.engine.ports import RecallLevels
from learning_bot.engine.recall_target import (
    CALIBRATION_LEVELS,
    RecallCalibration,
    RecordedUse,
    SessionLevels,
)

SYNC_SECONDS = 10.0
"""How often a process reads the stored calibration again (other replicas' uses)."""

Schedule = Callable[[Callable[[], None]], None]


def stored_form(use: RecordedUse) -> tuple[float, float, str]:
    """A use as the store keeps it."""
    return (float(use.level), float(use.own), use.session)


def read_form(row: tuple[float, float, str]) -> RecordedUse:
    """A stored use as the calibration records it (a level no set reaches is math.inf)."""
    level, own, session = row
    return RecordedUse(float(level), float(own), str(session))


class SharedLevels:
    """A learner's SessionLevels whose calibration is the store's (RecallLevels), read back
    at most every `every` seconds of `clock`; uses are stamped with `wall_clock` (ms)."""

    def __init__(
        self,
        store: RecallLevels,
        learner_id: Callable[[], int],
        clock: Callable[[], float],
        wall_clock: Callable[[], int],
        schedule: Schedule | None = None,
        every: float = SYNC_SECONDS,
        keep: int = CALIBRATION_LEVELS,
    ) -> None:
        self.sessions = SessionLevels()
        self._store: RecallLevels | None = store
        self._learner_id = learner_id
        self._clock = clock
        self._wall_clock = wall_clock
        self._schedule = schedule
        self._every = every
        self._keep = keep
        self._read_at: float | None = None
        self._unsaved: list[RecordedUse] = []
        self._lock = threading.Lock()
        """Held while the unsaved uses are stored and the calibration read back."""

    @property
    def calibration(self) -> RecallCalibration:
        """The calibration a selection reads: the stored one, read on first use and again
        when SYNC_SECONDS have passed since the last read."""
        if self._store is not None:
            read_at = self._read_at
            if read_at is None:
                self.sync()
            elif self._clock() - read_at >= self._every:
                self._read_at = self._clock()  # one read per period, however many selects
                if self._schedule is not None:
                    self._schedule(self.sync)
                else:
                    self.sync()
        return self.sessions.calibration

    def observed(
        self,
        key: str,
        used: Iterable[str],
        message: str | None = None,
        prompt_tokens: float = 0.0,
        baseline: bool = False,
    ) -> None:
        """A run of session `key` used these arms, with its request's `message` and the
        `prompt_tokens` it read (SessionLevels.observed and .ran); the uses it records are
        stored at once (kept for the next read when storage is unavailable)."""
        self.sessions.ran(key, prompt_tokens, baseline)
        uses = self.sessions.observed(key, used, message)
        if not uses or self._store is None:
            return
        with self._lock:
            self._unsaved.extend(uses)
            self._save()

    def sync(self) -> None:
        """Store what waits to be stored, then read the latest uses back (every replica's):
        they become the calibration, followed by those still unsaved. Storage unavailable:
        the calibration stays this process's until the next read."""
        store = self._store
        if store is None:
            return
        with self._lock:
            self._read_at = self._clock()
            try:
                learner = self._learner_id()
                self._save()
                rows = store.recall_levels(learner, self._keep)
            except Unavailable:
                return
            fresh = RecallCalibration(self._keep, self.sessions.calibration.pricing)
            fresh.replace([*(read_form(r) for r in rows), *self._unsaved])
            self.sessions.calibration = fresh

    def _save(self) -> None:
        """Store the unsaved uses (under `_lock`); storage unavailable: they wait."""
        store = self._store
        if store is None or not self._unsaved:
            return
        try:
            store.add_recall_levels(
                self._learner_id(),
                [stored_form(u) for u in self._unsaved],
                at=self._wall_clock(),
                keep=self._keep,
            )
        except Unavailable:
            if len(self._unsaved) > self._keep:
                del self._unsaved[: len(self._unsaved) - self._keep]
            return
        self._unsaved.clear()
