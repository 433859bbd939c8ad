"""What a session review reads of its learner, from the service's posterior cache
(engine.session_review.LearnerView)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from learning_bot.engine.cache import PosteriorCache
from learning_bot.engine.errors import Unavailable
from learning_bot.engine.ports import SessionUsages

SESSION_TURNS_SECONDS = 60.0
"""How long the learner's mean session length is trusted before it is read again."""


@dataclass(eq=False)
class CachedLearnerView:
    """Pulls and posterior means from the posterior cache; the mean session length from the
    learner's stored session usage, read at most every SESSION_TURNS_SECONDS."""

    _cache: Callable[[], PosteriorCache]
    _store: SessionUsages
    _learner_id: Callable[[], int]
    _clock: Callable[[], float]
    _turns: float | None = field(default=None, init=False)
    _turns_read_at: float = field(default=float("-inf"), init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)

    def pulls(self, arm_id: str) -> int:
        entry = self._cache().arms.get(arm_id)
        return int(entry.pulls) if entry is not None else 0

    def mean(self, arm_id: str) -> float:
        entry = self._cache().arms.get(arm_id)
        return float(entry.mean) if entry is not None else 0.5

    def observations(self) -> int:
        return int(sum(entry.pulls for entry in list(self._cache().arms.values())))

    def mean_session_turns(self) -> float | None:
        now = self._clock()
        with self._lock:
            if now - self._turns_read_at < SESSION_TURNS_SECONDS:
                return self._turns
            self._turns_read_at = now
        turns: float | None = None
        with contextlib.suppress(Unavailable):
            usages = self._store.session_usage(self._learner_id())
            runs: dict[str, int] = {}
            for usage in usages:
                runs[usage.key] = runs.get(usage.key, 0) + usage.runs
            if runs:
                turns = sum(runs.values()) / len(runs)
        with self._lock:
            self._turns = turns
        return turns


__all__ = ["SESSION_TURNS_SECONDS", "CachedLearnerView"]
