"""The latest runs of logs out of time order, oldest first, conversations cut by the bound
left out up to their next idle gap."""

from __future__ import annotations

from learning_bot.engine.config import Phase
from learning_bot.engine.records import ArmOutcomeRecord, RunRecord
from learning_bot.engine.usage import Usage
from learning_bot.replay.window import latest_runs

ARM = ArmOutcomeRecord("tool:agent:search", "search", True, True, 100, None)


def run(key: str, at: int) -> RunRecord:
    return RunRecord(
        trace_id=f"{key}@{at}",
        run_id=f"{key}@{at}",
        session_id="",
        session_key=key,
        channel="",
        conversation=key,
        timestamp=at,
        provider="anthropic",
        model="m",
        is_baseline=False,
        phase=Phase.PASSIVE,
        guard=None,
        usage=Usage(),
        duration_ms=0,
        system_prompt_chars=0,
        aborted=False,
        error=None,
        context={},
        arms=(ARM,),
    )


def test_runs_out_of_order_come_back_oldest_first() -> None:
    # a second file of an earlier week given after the first, and a late-logged request
    runs = [run("b", 5_000), run("b", 7_000), run("b", 6_000), run("a", 1_000), run("a", 2_000)]
    window = latest_runs(runs, 10, idle_ms=300_000)
    assert [r.trace_id for r in window.runs] == ["a@1000", "a@2000", "b@5000", "b@6000", "b@7000"]
    assert (window.dropped, window.cut) == (0, 0)


def test_the_bound_keeps_the_latest_and_cuts_conversations_begun_before() -> None:
    runs = [
        run("a", 1_000),
        run("a", 2_000),  # dropped by the bound
        run("b", 3_000),
        run("a", 4_000),  # a continues within its idle gap: its cached prefix is not known
        run("a", 900_000),  # after an idle gap: a new start, kept
        run("c", 5_000),
    ]
    window = latest_runs(runs, 4, idle_ms=300_000)
    assert [r.trace_id for r in window.runs] == ["b@3000", "c@5000", "a@900000"]
    assert (window.dropped, window.cut) == (2, 1)
