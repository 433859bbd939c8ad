"""Conditions logged by their changes, not by their occurrences: an outage under load (storage
unavailable, the spool full) happens on every request, and a line per request would write
millions of identical lines in an hour. One line when the condition starts, with its reason;
while it lasts, a summary at most once per `every` seconds (by an injected clock) of what it
has cost since; one line when it ends, with how long it lasted and the totals."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field

SUMMARY_SECONDS = 60.0


def duration(seconds: float) -> str:
    """`42 s`, `3 min 5 s`, `2 h 4 min`."""
    whole = int(seconds)
    if whole < 60:
        return f"{seconds:.1f} s" if seconds < 10 else f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60} s"
    return f"{whole // 3600} h {whole % 3600 // 60} min"


@dataclass(eq=False)
class StateLog:
    """One condition (`storage is unavailable`) of one logger. `occurred(reason)` at each
    occurrence, `count(what, n)` for what it cost (`run(s) spooled`), `ended()` when it is
    over; every method is thread-safe and cheap while the condition lasts."""

    log: logging.Logger
    condition: str
    _: KW_ONLY
    level: int = logging.WARNING
    every: float = SUMMARY_SECONDS
    clock: Callable[[], float] = time.monotonic
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    _since: float | None = field(default=None, init=False)
    _summarised: float = field(default=0.0, init=False)
    _reason: str = field(default="", init=False)
    _counts: dict[str, int] = field(default_factory=dict, init=False)

    @property
    def active(self) -> bool:
        return self._since is not None

    def occurred(
        self, reason: str, then: str = "", *, exc_info: BaseException | None = None
    ) -> None:
        """The condition holds (again): the first time, a line with `reason` and `then` (what
        happens meanwhile, e.g. `spooling runs until it answers`), and `exc_info`'s traceback
        when given; later, a summary when `every` seconds have passed since the last line."""
        with self._lock:
            now = self.clock()
            if self._since is None:
                self._since = self._summarised = now
                self._reason = reason
                self._counts = {}
                tail = f"; {then}" if then else ""
                self.log.log(
                    self.level, "%s (%s)%s", self.condition, reason, tail, exc_info=exc_info
                )
                return
            self._reason = reason
            if now - self._summarised < self.every:
                return
            self._summarised = now
            self.log.log(
                self.level,
                "%s for %s now (%s): %s",
                self.condition,
                duration(now - self._since),
                reason,
                self._totals() or "nothing affected yet",
            )

    def count(self, what: str, n: int = 1) -> None:
        """Add `n` to a total the summary and the end line report (only while it holds)."""
        if n <= 0 or self._since is None:
            return
        with self._lock:
            if self._since is not None:
                self._counts[what] = self._counts.get(what, 0) + n

    def ended(self, back: str, level: int = logging.INFO) -> None:
        """The condition is over: one line (`back`, e.g. `storage is back`) with how long it
        lasted and the totals; nothing when it did not hold."""
        with self._lock:
            if self._since is None:
                return
            lasted = self.clock() - self._since
            totals = self._totals()
            self._since = None
            self._counts = {}
        self.log.log(
            level, "%s after %s%s", back, duration(lasted), f": {totals}" if totals else ""
        )

    def _totals(self) -> str:
        return ", ".join(f"{n:,} {what}" for what, n in self._counts.items())
