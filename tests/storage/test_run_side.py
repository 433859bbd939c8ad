"""The select and observe side of a LearningService (engine.run_side): wired once, on first
use, and never by a process that only reads."""

from __future__ import annotations

import threading
from typing import Any

from learning_bot.engine import Arm, LearningConfig, Phase, ReportedArm, RunReport
from learning_bot.engine.run_side import LazyRunSide
from learning_bot.engine.service import LearningService
from learning_bot.storage import SqlStore

ARMS = [Arm(f"tool:t:T{i}", 100) for i in range(6)]


def test_reads_and_changes_do_not_wire_the_select_side(store: SqlStore) -> None:
    service = LearningService(store, LearningConfig(phase=Phase.ACTIVE), rng=1, cache_ttl=0)
    service.status()
    service.summary()
    service.timeseries("tokens")
    service.reset(actor="admin")
    service.undo_reset(actor="admin")
    assert service._run_side.made is None

    selection = service.select(ARMS, session_key="s")
    assert service._run_side.made is not None
    kept = set(selection.selected)
    arms = tuple(ReportedArm(a, included=a.id in kept) for a in ARMS)
    assert service.observe(RunReport(trace_id="t1", arms=arms)).recorded


def test_a_reset_after_wiring_makes_the_context_evidence_read_again(store: SqlStore) -> None:
    service = LearningService(store, LearningConfig(phase=Phase.ACTIVE), rng=1, cache_ttl=60)
    service.select(ARMS)
    context = service._run_side.get().context
    context.evidence()
    assert context._checked_at != float("-inf")
    service.reset(actor="admin")
    assert context._checked_at == float("-inf")


def test_concurrent_first_uses_wire_the_side_once(store: SqlStore) -> None:
    """The first caller wires while the others wait on the lock: every caller gets the same
    side, so no select's session state is kept in a side thrown away."""
    entered, release = threading.Event(), threading.Event()
    calls: list[int] = []
    service = LearningService(store, LearningConfig(phase=Phase.ACTIVE), rng=1)
    wire = service._run_side._wire

    def slow_wire() -> Any:
        calls.append(1)
        entered.set()
        assert release.wait(30)
        return wire()

    lazy = LazyRunSide(slow_wire)
    got: list[Any] = []
    first = threading.Thread(target=lambda: got.append(lazy.get()))
    first.start()
    assert entered.wait(30)
    others = [threading.Thread(target=lambda: got.append(lazy.get())) for _ in range(4)]
    for thread in others:
        thread.start()
    # Without the lock each of them would be inside `wire` by now; give them the time.
    for _ in range(50):
        if len(calls) > 1:
            break
        threading.Event().wait(0.01)
    release.set()
    for thread in [first, *others]:
        thread.join(30)
    assert len(calls) == 1
    assert len(got) == 5 and all(side is got[0] for side in got)
