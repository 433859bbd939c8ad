"""Traces are read in pieces bounded by their size in memory, not by their number: a listing of
wide traces holds few at a time, one of narrow traces many, and the pieces together are exactly
the listing (exports read every trace this way, `GET traces` a page)."""

from __future__ import annotations

from learning_bot.engine import Arm, ReportedArm, RunReport, ToolCall
from learning_bot.engine.service import LearningService
from learning_bot.storage import SqlStore
from learning_bot.storage.reads import BYTES_PER_ARM, BYTES_PER_TRACE

WIDE = [Arm(f"tool:wide:T{i:03d}", 10) for i in range(300)]
NARROW = WIDE[:3]


def run(trace_id: str, arms: list[Arm], context: dict[str, str] | None = None) -> RunReport:
    return RunReport(
        trace_id=trace_id,
        arms=tuple(ReportedArm(a) for a in arms),
        tool_calls=(ToolCall(arms[0].name),),
        channel="C1",
        context=context or {},
    )


def test_pieces_are_bounded_by_arms_and_text_not_by_trace_count(
    store: SqlStore, active: LearningService
) -> None:
    for i in range(6):
        active.observe(run(f"wide-{i}", WIDE))
    for i in range(40):
        active.observe(run(f"narrow-{i}", NARROW))
    big = {"notes": "x" * 1_000_000}  # a trace whose context outweighs any number of arms
    active.observe(run("heavy-context", NARROW, big))
    wide_weight = BYTES_PER_TRACE + len(WIDE) * BYTES_PER_ARM
    store.piece_bytes = 2 * wide_weight + 100  # two wide traces (and their "{}"), many narrow
    learner = active.learner_id

    listing = list(store.iter_trace_pieces(learner))
    sizes = [[len(r.arms) for r in piece] for piece in listing]
    # wide traces two by two, narrow ones many to a piece, the heavy one alone
    assert sizes[:3] == [[300, 300]] * 3
    narrow_pieces = sizes[3:-1]
    assert all(len(p) > 2 for p in narrow_pieces)
    assert sum(len(p) for p in narrow_pieces) == 40
    assert listing[-1][0].trace_id == "heavy-context" and len(listing[-1]) == 1
    for piece in listing:
        arms = sum(len(r.arms) for r in piece)
        assert len(piece) == 1 or arms * BYTES_PER_ARM <= store.piece_bytes
    # the pieces are the whole listing, oldest first, every arm read
    flat = [r for piece in listing for r in piece]
    assert [r.trace_id for r in flat] == [r.trace_id for r in store.iter_traces(learner)]
    assert [r.trace_id for r in flat][:7] == [*(f"wide-{i}" for i in range(6)), "narrow-0"]
    assert flat[0].arms[0].arm_id == WIDE[0].id

    # without arms the same listing, the records holding none
    bare = list(store.iter_traces(learner, with_arms=False))
    assert [r.trace_id for r in bare] == [r.trace_id for r in flat]
    assert all(r.arms == () for r in bare)

    # a page, newest first, in pieces too, the same as the page read whole
    page_pieces = list(store.trace_pieces(learner, 10, 36))
    assert len(page_pieces) > 1
    page = [r for piece in page_pieces for r in piece]
    whole, total = active.traces(limit=10, offset=36)
    assert page == whole and total == 47
    assert [r.trace_id for r in page][4:] == ["narrow-0", *(f"wide-{i}" for i in range(5, 0, -1))]
