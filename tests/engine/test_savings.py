"""The measured prompt-cost saving: its figure, its interval, and when it is withheld."""

from __future__ import annotations

import numpy as np
import pytest

from learning_bot.engine.savings import SessionCost, cost_savings


def sessions(rng: np.random.Generator, n: int, share: float, saving: float) -> list[SessionCost]:
    out = []
    for _ in range(n):
        baseline = rng.random() < share
        runs = int(rng.integers(1, 15))
        per_run = rng.gamma(4.0, 2500.0, size=runs).sum()
        out.append(SessionCost(baseline, runs, per_run * (1.0 if baseline else 1.0 - saving)))
    return out


def test_the_figure_is_the_ratio_of_costs_per_run() -> None:
    data = [
        SessionCost(True, 2, 200.0),
        SessionCost(True, 4, 400.0),
        SessionCost(False, 3, 180.0),
        SessionCost(False, 1, 60.0),
    ]
    result = cost_savings(data, cache_reported=True)
    assert result.percent == pytest.approx(40.0)
    assert result.baseline_cost_per_run == pytest.approx(100.0)
    assert result.selected_cost_per_run == pytest.approx(60.0)
    assert result.sessions == 4
    assert result.low is not None and result.high is not None
    assert result.low <= 40.0 <= result.high


def test_the_interval_covers_the_truth_about_95_in_100_times() -> None:
    rng = np.random.default_rng(3)
    covered = 0
    trials = 400
    for _ in range(trials):
        result = cost_savings(sessions(rng, 200, 0.2, 0.3), cache_reported=True)
        assert result.low is not None and result.high is not None
        covered += result.low <= 30.0 <= result.high
    assert 0.91 <= covered / trials <= 0.99


def test_no_cache_fields_no_figure() -> None:
    result = cost_savings(sessions(np.random.default_rng(1), 50, 0.3, 0.3), cache_reported=False)
    assert result.percent is None
    assert result.reason is not None and "cacheRead" in result.reason


def test_too_few_sessions_no_figure() -> None:
    result = cost_savings(
        [SessionCost(True, 3, 10.0), SessionCost(False, 2, 5.0), SessionCost(False, 2, 5.0)],
        cache_reported=True,
    )
    assert result.percent is None
    assert result.reason is not None and "1 baseline" in result.reason


def test_runs_without_sessions_no_figure() -> None:
    """Per-request runs have no full-prompt control group: the figure is withheld and the
    reason names the session key."""
    result = cost_savings([], cache_reported=True)
    assert result.percent is None
    assert result.reason is not None and "session_key" in result.reason
