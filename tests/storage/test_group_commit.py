"""Group commit: concurrent runs share one transaction; a leader waits for announced callers
on their way, and never for one that was withdrawn."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

from engine.ports import RecordResult
from engine.records import RunRecord
from engine.service import LearningService
from storage import SqlStore
from storage.group_commit import GroupCommitWriter
from tests.storage.helpers import report


class CountingWriter:
    """The real store, with the size of each transaction it is given written down."""

    def __init__(self, store: SqlStore) -> None:
        self.store = store
        self.batches: list[int] = []

    def record_runs(self, learner_id: int, runs: Sequence[RunRecord]) -> RecordResult:
        self.batches.append(len(runs))
        return self.store.record_runs(learner_id, runs)


def wait_until_lingering(writer: GroupCommitWriter) -> None:
    """Until the leader holds its transaction open for someone (a guard, not a timing)."""
    deadline = time.monotonic() + 30
    while not writer._lingering:
        assert time.monotonic() < deadline, "the leader did not wait for the announced caller"
        time.sleep(0.001)


def test_a_leader_waits_for_an_announced_caller_and_writes_both_at_once(
    active: LearningService, store: SqlStore
) -> None:
    inner = CountingWriter(store)
    writer = GroupCommitWriter(inner, linger=60.0)
    active.writer = writer
    arrival = writer.announce()
    first = threading.Thread(target=lambda: active.observe(report("first")))
    first.start()
    wait_until_lingering(writer)  # the leader holds the transaction open for the announced one
    with arrival:
        second = active.observe(report("second"))
    first.join(timeout=30)
    assert not first.is_alive()
    assert inner.batches == [2]
    assert second.recorded
    assert active.traces()[1] == 2
    assert active.verify().ok


def test_a_withdrawn_caller_releases_the_leader(active: LearningService, store: SqlStore) -> None:
    inner = CountingWriter(store)
    writer = GroupCommitWriter(inner, linger=60.0)
    active.writer = writer
    arrival = writer.announce()
    first = threading.Thread(target=lambda: active.observe(report("alone")))
    first.start()
    wait_until_lingering(writer)
    arrival.close()  # the request failed before reaching the writer
    arrival.close()  # closing twice changes nothing
    first.join(timeout=30)
    assert not first.is_alive()  # within the join, far inside the 60 s linger
    assert inner.batches == [1]
    assert writer._on_the_way == 0


def test_a_lone_caller_writes_at_once_and_announcements_balance(
    active: LearningService, store: SqlStore
) -> None:
    inner = CountingWriter(store)
    writer = GroupCommitWriter(inner, linger=60.0)
    active.writer = writer
    with writer.announce():
        assert active.observe(report("lone")).recorded
    other = GroupCommitWriter(inner)
    with other.announce():  # an arrival of another writer does not count for this one
        assert active.observe(report("second")).recorded
    assert inner.batches == [1, 1]
    assert writer._on_the_way == 0
    assert other._on_the_way == 0


def test_many_announced_callers_all_land_once(active: LearningService, store: SqlStore) -> None:
    inner = CountingWriter(store)
    writer = GroupCommitWriter(inner)
    active.writer = writer
    results: list[bool] = []
    barrier = threading.Barrier(8)

    def go(k: int) -> None:
        arrival = writer.announce()
        barrier.wait()
        try:
            with arrival:
                for i in range(5):
                    results.append(active.observe(report(f"t{k}-{i % 3}")).recorded)
        finally:
            arrival.close()

    threads = [threading.Thread(target=go, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert sorted(results).count(True) == 8 * 3
    assert sum(inner.batches) == 8 * 5
    assert active.traces()[1] == 8 * 3
    assert active.verify().ok
    assert writer._on_the_way == 0
