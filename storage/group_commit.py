"""Group commit: concurrent writers share one storage transaction instead of queueing for one
each. The first caller to arrive leads: it waits, for a few milliseconds at most, for the
callers it knows to be on their way, then writes everything pending in one call; later
arrivals wait for it (or lead the next batch when it is done). A lone caller pays no extra
latency, and a busy server pays one commit per batch instead of one per run.

A caller is known to be on its way when it was announced (`announce`, by a server that has
taken a request and is preparing it: the leader then waits until every announced caller has
arrived, and writes the moment none is left on its way), or, for callers nobody announces, by
the last batch: when that held several, the leader waits until as many are pending."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from types import TracebackType

from engine.errors import Unavailable
from engine.ports import RecordResult, RunWriter
from engine.records import RunRecord

_local = threading.local()


class _Ticket:
    __slots__ = ("announced", "done", "error", "learner_id", "result", "runs")

    def __init__(self, learner_id: int, runs: Sequence[RunRecord], announced: bool) -> None:
        self.learner_id = learner_id
        self.runs = runs
        self.announced = announced
        self.done = False
        self.result: RecordResult | None = None
        self.error: BaseException | None = None


class Arrival:
    """A caller announced to a GroupCommitWriter: on its way to `record_runs` until the thread
    that entered it (`with arrival:`) calls `record_runs`, or until it is closed. Closing is
    idempotent; whoever announced a caller closes it, whatever happened to it."""

    __slots__ = ("_done", "_writer")

    def __init__(self, writer: GroupCommitWriter) -> None:
        self._writer = writer
        self._done = False

    def __enter__(self) -> Arrival:
        _local.arrival = self
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        _local.arrival = None
        self.close()

    def close(self) -> None:
        writer = self._writer
        with writer._cond:
            self._arrive(writer)

    def _arrive(self, writer: GroupCommitWriter) -> None:
        """No longer on the way (call with the writer's lock held)."""
        if not self._done:
            self._done = True
            writer._on_the_way -= 1
            if writer._lingering:
                writer._cond.notify_all()


class GroupCommitWriter:
    """A RunWriter that coalesces concurrent `record_runs` calls of one learner into one call
    of the writer it wraps. Which runs are duplicates stays the inner writer's decision: the
    batch goes down whole, and each caller gets back the statuses of its own runs.

    `linger` bounds how long a leader waits for the callers on their way (seconds)."""

    def __init__(self, inner: RunWriter, max_batch: int = 1000, linger: float = 0.004) -> None:
        self.inner = inner
        self._max_batch = max_batch
        self._linger = linger
        self._cond = threading.Condition()
        self._pending: list[_Ticket] = []
        self._leading = False
        self._lingering = False
        self._on_the_way = 0
        """Announced callers that have not called `record_runs` yet."""
        self._last_unannounced = 1
        """Tickets nobody announced in the previous batch: more than one means such callers
        are arriving together."""

    def announce(self) -> Arrival:
        """Count a caller on its way to `record_runs`; enter the returned Arrival in the thread
        that will call it, and close it when the caller is done (see `Arrival`)."""
        with self._cond:
            self._on_the_way += 1
        return Arrival(self)

    def record_runs(self, learner_id: int, runs: Sequence[RunRecord]) -> RecordResult:
        arrival: Arrival | None = getattr(_local, "arrival", None)
        if arrival is not None and arrival._writer is not self:
            arrival = None
        ticket = _Ticket(learner_id, runs, arrival is not None)
        with self._cond:
            self._pending.append(ticket)
            if arrival is not None:
                arrival._arrive(self)
            if self._lingering:
                self._cond.notify_all()
            self._lead_or_wait(ticket)
        if ticket.error is not None:
            raise ticket.error
        assert ticket.result is not None
        return ticket.result

    def _expecting(self) -> bool:
        """Whether callers are still on their way to join the pending batch."""
        if self._on_the_way > 0:
            return True
        if self._last_unannounced <= 1:
            return False
        pending = sum(1 for ticket in self._pending if not ticket.announced)
        return pending < self._last_unannounced

    def _lead_or_wait(self, ticket: _Ticket) -> None:
        while not ticket.done:
            if self._leading:
                self._cond.wait()
                continue
            self._leading = True
            if self._linger > 0 and self._expecting():
                # Give the callers on their way a moment to join this transaction rather than
                # queue for the next; write as soon as none is left (a lone caller never waits).
                deadline = time.monotonic() + self._linger
                self._lingering = True
                while self._expecting() and len(self._pending) < self._max_batch:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self._cond.wait(left)
                self._lingering = False
            batch = self._take()
            self._last_unannounced = sum(1 for t in batch if not t.announced)
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
