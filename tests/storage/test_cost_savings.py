"""The measured prompt-cost saving (SPEC 4a, engine.savings) against the simulator's truth:
simulated sessions through the real LearningService, each run's usage from the prefix-cache
model (engine.prompt_cache), the saving read back from `service.summary()`.

Two truths. The simulator's group saving: its own prompt cost per run of the selected sessions
against that of the baseline (full-prompt) sessions, the quantity status estimates from the
stored usage, so the two agree within 3 points (they differ only where a session's usage is
split or windowed). The counterfactual saving (`engine.session_simulation.true_saving`): the
selected sessions against the same sessions sent with every tool; the measured figure
compares with other sessions (the baseline ones), so it differs by sampling error, and its
95% interval covers it."""

from __future__ import annotations

import numpy as np
import pytest

from learning_bot.engine import LearningConfig, Phase
from learning_bot.engine.service import LearningService
from learning_bot.engine.session_simulation import (
    EveryArm,
    ServiceTurns,
    SessionRun,
    SessionShape,
    SimulatedClock,
    draw_sessions,
    run_sessions,
    true_saving,
)
from learning_bot.engine.simulation import make_tool_workload
from learning_bot.storage import SqlStore

SHAPE = SessionShape(mean_turns=5.0, history_tokens=500, long_gap_rate=0.0)


def group_saving(run: SessionRun) -> float:
    """The simulator's saving of selected sessions' prompt cost per run against baseline
    sessions', in percent."""
    base = run.baseline
    selected = run.prompt_cost[~base].sum() / run.turns[~base].sum()
    baseline = run.prompt_cost[base].sum() / run.turns[base].sum()
    return float(100.0 * (1.0 - selected / baseline))


def drive(url: str, sessions: int, *, caching: bool = True) -> tuple[LearningService, float, float]:
    """`sessions` sessions through a new service on `url`: the service, the simulator's
    group saving and its counterfactual saving."""
    workload = make_tool_workload(40, 16_000, seed=11)
    drawn = draw_sessions(workload, sessions, np.random.default_rng(11), SHAPE)
    config = LearningConfig(
        phase=Phase.ACTIVE,
        token_budget=5_600,
        baseline_rate=0.3,
        session_growth="off",
        session_idle_seconds=3_600,  # no session outlives its idle window: one coin per session
    )
    store = SqlStore(url)
    clock = SimulatedClock()
    service = LearningService(store, config, rng=11, cache_ttl=0, wall_clock=clock)
    start_ms = clock.ms = 1_700_000_000_000
    policy = ServiceTurns(service, workload, clock, start_ms=start_ms, per_session=True)
    selected: SessionRun = run_sessions(workload, drawn, policy, shape=SHAPE, caching=caching)
    full = run_sessions(workload, drawn, EveryArm(40), shape=SHAPE, caching=caching)
    truth = true_saving(selected, full)
    assert truth is not None
    return service, group_saving(selected), truth


def test_measured_saving_matches_the_simulators_truth(tmp_path: object) -> None:
    service, group, truth = drive(f"sqlite:///{tmp_path}/learning.sqlite", 200)
    try:
        savings = service.summary().prompt_cost_savings
        assert savings is not None and savings.percent is not None, savings
        assert savings.baseline_sessions >= 30 and savings.selected_sessions >= 100
        assert abs(savings.percent - group) <= 3.0, (savings.percent, group)
        assert savings.low is not None and savings.high is not None
        assert savings.low <= truth <= savings.high, (savings.low, truth, savings.high)
        assert truth > 20.0  # selection saves under the cache, on this workload
    finally:
        service.store.close()


def test_measured_saving_on_postgresql(postgres_url: str) -> None:
    service, group, truth = drive(postgres_url, 60)
    try:
        savings = service.summary().prompt_cost_savings
        assert savings is not None and savings.percent is not None, savings
        assert abs(savings.percent - group) <= 3.0, (savings.percent, group)
        assert savings.low is not None and savings.high is not None
        assert savings.low <= truth <= savings.high, (savings.low, truth, savings.high)
    finally:
        service.store.close()


def test_without_cache_fields_the_saving_is_withheld_with_a_reason(tmp_path: object) -> None:
    service, _, _ = drive(f"sqlite:///{tmp_path}/learning.sqlite", 20, caching=False)
    try:
        savings = service.summary().prompt_cost_savings
        assert savings is not None
        assert savings.percent is None and savings.low is None
        assert savings.reason is not None and "cacheRead" in savings.reason
    finally:
        service.store.close()


@pytest.mark.parametrize("growth", ["append", "off"])
def test_session_growth_setting(growth: str) -> None:
    config = LearningConfig.from_dict({"sessionGrowth": growth})
    assert config.session_growth == growth
    assert (config.to_dict().get("sessionGrowth") == growth) is (growth != "off")
