"""Group commit: concurrent writers share one storage transaction instead of queueing for one
each. The first caller to arrive writes everything pending, later arrivals wait for it (or take
over when it is done), so a lone caller pays no extra latency and a busy server pays one commit
per batch instead of one per run."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

from engine.errors import Unavailable
from engine.ports import RecordResult, RunWriter
from engine.records import RunRecord


class _Ticket:
    __slots__ = ("done", "error", "learner_id", "result", "runs")

    def __init__(self, learner_id: int, runs: Sequence[RunRecord]) -> None:
        self.learner_id = learner_id
        self.runs = runs
        self.done = False
        self.result: RecordResult | None = None
        self.error: BaseException | None = None


class GroupCommitWriter:
    """A RunWriter that coalesces concurrent `record_runs` calls of one learner into one call
    of the writer it wraps. Which runs are duplicates stays the inner writer's decision: the
    batch goes down whole, and each caller gets back the statuses of its own runs."""

    def __init__(self, inner: RunWriter, max_batch: int = 1000, linger: float = 0.002) -> None:
        self.inner = inner
        self._max_batch = max_batch
        self._linger = linger
        self._cond = threading.Condition()
        self._pending: list[_Ticket] = []
        self._leading = False
        self._lingering = False
        self._last_batch = 1
        """Tickets in the previous batch: more than one means callers are arriving together."""

    def record_runs(self, learner_id: int, runs: Sequence[RunRecord]) -> RecordResult:
        ticket = _Ticket(learner_id, runs)
        with self._cond:
            self._pending.append(ticket)
            if self._lingering:
                self._cond.notify_all()
            self._lead_or_wait(ticket)
        if ticket.error is not None:
            raise ticket.error
        assert ticket.result is not None
        return ticket.result

    def _lead_or_wait(self, ticket: _Ticket) -> None:
        while not ticket.done:
            if self._leading:
                self._cond.wait()
                continue
            self._leading = True
            if self._last_batch > 1 and self._linger > 0:
                # Callers are arriving together: give the ones on their way a moment to join
                # this transaction rather than queue for the next (a lone caller never waits).
                deadline = time.monotonic() + self._linger
                self._lingering = True
                while len(self._pending) < self._last_batch:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self._cond.wait(left)
                self._lingering = False
            batch = self._take()
            self._last_batch = len(batch)
            self._cond.release()
            try:
                self._run(batch)
            finally:
                self._cond.acquire()
                self._leading = False
                self._cond.notify_all()

    def _take(self) -> list[_Ticket]:
        """The oldest pending ticket and every later one of the same learner that fits."""
        first = self._pending[0]
        batch: list[_Ticket] = []
        size = 0
        kept: list[_Ticket] = []
        for ticket in self._pending:
            fits = not batch or size + len(ticket.runs) <= self._max_batch
            if ticket.learner_id == first.learner_id and fits:
                batch.append(ticket)
                size += len(ticket.runs)
            else:
                kept.append(ticket)
        self._pending = kept
        return batch

    def _run(self, batch: list[_Ticket]) -> None:
        try:
            self._write(batch)
        except Unavailable as exc:
            for ticket in batch:
                ticket.error = exc
        except BaseException as exc:
            if len(batch) == 1:
                batch[0].error = exc
            else:
                # One bad ticket must not fail the others: write each on its own.
                for ticket in batch:
                    try:
                        self._write([ticket])
                    except BaseException as single:
                        ticket.error = single
        finally:
            for ticket in batch:
                ticket.done = True

    def _write(self, batch: list[_Ticket]) -> None:
        runs = [run for ticket in batch for run in ticket.runs]
        result = self.inner.record_runs(batch[0].learner_id, runs)
        start = 0
        for ticket in batch:
            end = start + len(ticket.runs)
            ticket.result = RecordResult(result.trace_ids[start:end], result.statuses[start:end])
            start = end

    def close(self) -> None:
        close = getattr(self.inner, "close", None)
        if close is not None:
            close()
