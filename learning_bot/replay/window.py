"""The latest runs of a stream that is not in time order.

Logs are not always in time order: files of different weeks given in any order, requests
logged when their replies come back. The projection replays runs oldest first; `latest_runs`
keeps the latest `limit` of a stream by time (a heap: memory is bounded by `limit` runs and a
time per conversation cut), and gives them oldest first. A conversation whose earlier runs fell
outside the bound loses its kept runs up to its next idle gap, as engine.projection does at its
own bound: the prompt cache those runs read from is not known.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import dataclass

from learning_bot.engine.records import RunRecord


@dataclass(frozen=True, slots=True)
class Window:
    runs: list[RunRecord]
    """The kept runs, oldest first (file order among equal times)."""
    dropped: int
    """Runs older than the kept ones."""
    cut: int
    """Kept runs left out because their conversation's earlier runs were dropped."""


def latest_runs(runs: Iterable[RunRecord], limit: int, idle_ms: int) -> Window:
    """The latest `limit` runs of `runs` by time, oldest first (see the module)."""
    heap: list[tuple[int, int, RunRecord]] = []
    evicted: dict[str, int] = {}
    dropped = 0
    for seq, run in enumerate(runs):
        item = (run.timestamp, seq, run)
        if len(heap) < limit:
            heapq.heappush(heap, item)
            continue
        _, _, old = heapq.heappushpop(heap, item)
        dropped += 1
        if old.timestamp > evicted.get(old.session_key, -1):
            evicted[old.session_key] = old.timestamp
    kept: list[RunRecord] = []
    cut = 0
    for _, _, run in sorted(heap, key=lambda item: (item[0], item[1])):
        last = evicted.get(run.session_key)
        if last is not None:
            if run.timestamp - last <= idle_ms:
                evicted[run.session_key] = run.timestamp
                cut += 1
                continue
            del evicted[run.session_key]
        kept.append(run)
    return Window(kept, dropped, cut)
