"""The dashboard's cost-per-session chart (`timeseries` metric `sessionCost`): the mean prompt
cost per session of baseline and of selected sessions, each session counted in the window it
started in, priced from the usage the runs reported."""

from __future__ import annotations

import pytest

from learning_bot.engine import LearningConfig, Phase
from learning_bot.engine.arms import Arm
from learning_bot.engine.cost import ANTHROPIC, prompt_cost
from learning_bot.engine.errors import InvalidInput
from learning_bot.engine.observation import ReportedArm, RunReport
from learning_bot.engine.posterior import now_ms
from learning_bot.engine.service import LearningService
from learning_bot.engine.usage import Usage
from learning_bot.storage import SqlStore

HOUR = 3_600_000
ARMS = [Arm(f"tool:x:t{i}", 100, f"t{i}") for i in range(4)]


def report(key: str, baseline: bool, at: int, usage: Usage, n: int) -> RunReport:
    return RunReport(
        trace_id=f"{key}-{n}",
        arms=tuple(ReportedArm(a, True) for a in ARMS),
        session_key=key,
        timestamp=at,
        provider="anthropic",
        model="claude-sonnet-4",
        is_baseline=baseline,
        usage=usage,
    )


def test_cost_per_session_per_group_and_window(database_url: str) -> None:
    store = SqlStore(database_url)
    service = LearningService(store, LearningConfig(phase=Phase.ACTIVE), rng=1, cache_ttl=0)
    try:
        hour = now_ms() // HOUR * HOUR
        earlier = hour - 2 * HOUR
        # (session, baseline, start, [usage per turn])
        sessions = [
            ("b1", True, earlier, [Usage(input=4000), Usage(input=100, cache_read=3900)]),
            ("b2", True, earlier + 60_000, [Usage(input=200, cache_write=3800)]),
            ("s1", False, earlier + 5_000, [Usage(input=1000), Usage(input=50, cache_read=950)]),
            # starts before `hour` and runs into it: counted where it started
            ("s2", False, hour - 1_000, [Usage(input=900), Usage(input=20, cache_read=880)]),
            ("s3", False, hour + 10, [Usage(input=10, cache_write=1200)]),
        ]
        expected: dict[tuple[int, str], list[float]] = {}
        n = 0
        for key, baseline, start, turns in sessions:
            cost = 0.0
            for i, usage in enumerate(turns):
                n += 1
                at = start + i * 2_000  # the second turn of s2 falls in the next hour
                service.observe(report(key, baseline, at, usage, n))
                cost += prompt_cost(usage, ANTHROPIC)
            window = start // HOUR * HOUR
            expected.setdefault((window, "baseline" if baseline else "selected"), []).append(cost)

        series = service.timeseries("sessionCost", "1h")
        got = {(b.t, b.group): (b.value, b.count) for b in series}
        assert got == {k: pytest.approx((sum(v) / len(v), len(v))) for k, v in expected.items()}
        assert all(b.arm_id is None for b in series)
        # Priced: a turn read from the cache costs a tenth of one sent uncached.
        assert got[(earlier // HOUR * HOUR, "baseline")][0] == pytest.approx(
            (4000 + 100 + 390 + 200 + 3800 * 1.25) / 2
        )
        with pytest.raises(InvalidInput, match="sessionCost"):
            service.timeseries("sessionCosts", "1h")
    finally:
        store.close()


def test_runs_without_a_session_are_not_in_the_chart(tmp_path: object) -> None:
    store = SqlStore(f"sqlite:///{tmp_path}/learning.sqlite")
    service = LearningService(store, LearningConfig(phase=Phase.ACTIVE), rng=1, cache_ttl=0)
    try:
        service.observe(report("", False, now_ms(), Usage(input=100, cache_read=10), 1))
        assert service.timeseries("sessionCost", "1d") == []
    finally:
        store.close()
