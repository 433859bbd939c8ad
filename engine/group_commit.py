"""Group commit: concurrent callers share one storage transaction instead of queueing for one
each. The first caller to arrive writes everything pending, later arrivals wait for it (or take
over when it is done), so a lone caller pays no extra latency and a busy server pays one commit
per batch instead of one per run."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Generic, TypeVar

from engine.errors import Unavailable

T = TypeVar("T")


class _Ticket(Generic[T]):
    __slots__ = ("done", "error", "items", "result")

    def __init__(self, items: Sequence[T]) -> None:
        self.items = items
        self.done = False
        self.result: dict[str, str] = {}
        self.error: BaseException | None = None


class GroupCommit(Generic[T]):
    """Coalesce concurrent `submit` calls into calls of `write`.

    `write(items)` stores a batch in one transaction and returns each key's status
    ("inserted", "duplicate", "spooled"...); `key(item)` names an item (a trace id): an item
    whose key is already in the batch is not written again and reads as a duplicate.
    """

    def __init__(
        self,
        write: Callable[[list[T]], Mapping[str, str]],
        key: Callable[[T], str],
        max_batch: int = 1000,
        linger: float = 0.002,
    ) -> None:
        self._write = write
        self._key = key
        self._max_batch = max_batch
        self._linger = linger
        self._cond = threading.Condition()
        self._pending: list[_Ticket[T]] = []
        self._leading = False
        self._lingering = False
        self._last_batch = 1
        """Tickets in the previous batch: more than one means callers are arriving together."""

    def submit(self, items: Sequence[T]) -> dict[str, str]:
        """Write `items` (alone or with others' items); returns each item's status by key."""
        ticket: _Ticket[T] = _Ticket(items)
        with self._cond:
            self._pending.append(ticket)
            if self._lingering:
                self._cond.notify_all()
            self._lead_or_wait(ticket)
        if ticket.error is not None:
            raise ticket.error
        return ticket.result

    def _lead_or_wait(self, ticket: _Ticket[T]) -> None:
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

    def _take(self) -> list[_Ticket[T]]:
        batch: list[_Ticket[T]] = []
        size = 0
        while self._pending and (
            not batch or size + len(self._pending[0].items) <= self._max_batch
        ):
            ticket = self._pending.pop(0)
            batch.append(ticket)
            size += len(ticket.items)
        return batch

    def _run(self, batch: list[_Ticket[T]]) -> None:
        try:
            self._write_batch(batch)
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
                        self._write_batch([ticket])
                    except BaseException as single:
                        ticket.error = single
        finally:
            for ticket in batch:
                ticket.done = True

    def _write_batch(self, batch: list[_Ticket[T]]) -> None:
        seen: set[str] = set()
        items: list[T] = []
        owners: list[tuple[_Ticket[T], list[str], list[str]]] = []
        for ticket in batch:
            mine: list[str] = []
            repeated: list[str] = []
            for item in ticket.items:
                k = self._key(item)
                if k in seen:
                    repeated.append(k)
                    continue
                seen.add(k)
                items.append(item)
                mine.append(k)
            owners.append((ticket, mine, repeated))
        statuses = self._write(items) if items else {}
        for ticket, mine, repeated in owners:
            result = {k: statuses.get(k, "duplicate") for k in mine}
            result.update(dict.fromkeys(repeated, "duplicate"))
            ticket.result = result
