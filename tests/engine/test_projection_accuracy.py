"""The projection against what happens: a workload recorded in the passive phase is projected
as `/learning phase` projects it, then the same workload (same seed: the same sessions and the
same usage) runs through the real service in the active phase; the projected recall and prompt
cost saved at the current settings are within 3 points of what the active phase achieves
(bench/projection.py gives the figures of three workloads)."""

from __future__ import annotations

from pathlib import Path

from learning_bot.engine import LearningConfig, Phase
from learning_bot.engine.phase_projection import learner_projection
from learning_bot.engine.service import LearningService
from learning_bot.engine.session_simulation import SimulatedClock
from learning_bot.simulate import simulate
from learning_bot.storage import SqlStore


def test_projection_is_within_3_points_of_the_active_phase(tmp_path: Path) -> None:
    store = SqlStore(f"sqlite:///{tmp_path}/accuracy.sqlite")
    try:
        passive = LearningService(store, LearningConfig(), rng=0, learner="passive")
        simulate(passive, traces=1_000, arms=40, seed=0, sessions=True, phase=Phase.PASSIVE)
        assert passive.phase() is Phase.PASSIVE
        projection = learner_projection(passive)
        current = projection.current
        assert current is not None, projection.reason
        assert current.token_budget == 8_000 and projection.runs == 1_000
        assert current.cost_savings_percent is not None

        # the active service counts session idle windows in the sessions' own time, as it
        # would live (the replay reads the runs' timestamps)
        clock = SimulatedClock()
        active = LearningService(store, LearningConfig(), rng=0, learner="active", wall_clock=clock)
        achieved = simulate(active, traces=1_000, arms=40, seed=0, sessions=True, clock=clock)
        assert achieved.true_recall is not None
        assert achieved.counterfactual_cost_savings_percent is not None
        assert abs(100 * current.recall - 100 * achieved.true_recall) <= 3.0
        assert (
            abs(current.cost_savings_percent - achieved.counterfactual_cost_savings_percent) <= 3.0
        )
        # and the projection says something: selection leaves components out and saves
        assert current.recall < 0.97 and current.cost_savings_percent > 10
    finally:
        store.close()
