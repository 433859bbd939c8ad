"""The service under a recall target: it calibrates the target from its baseline sessions as
the study's learner does, so both make the same selections for the same seed."""

from __future__ import annotations

from learning_bot.engine import LearningConfig, Phase
from learning_bot.engine.config import DEFAULT_POLICY
from learning_bot.engine.service import LearningService
from learning_bot.research.context_simulation import Learner, run_study
from learning_bot.research.task_types import task_type_workload
from learning_bot.storage import SqlStore


def test_the_service_calibrates_the_target_as_the_study_does(store: SqlStore) -> None:
    arms, sessions = task_type_workload(tools=24, types=4, sessions=40, seed=3)
    total = sum(a.token_cost for a in arms)
    config = LearningConfig.for_policy(
        DEFAULT_POLICY,
        phase=Phase.ACTIVE,
        seed_arm_ids=(),
        min_pulls=0,
        baseline_rate=0.25,
        token_budget=total,
        recall_target=0.8,
    )
    alone = run_study(arms, sessions, "context", config, seed=5)
    learner = alone.learner
    assert isinstance(learner, Learner)
    assert any(alone.baseline) and len(learner.calibration) > 0
    service = LearningService(store, config, rng=5, cache_ttl=60, learner="target")
    served = run_study(arms, sessions, "context", config, seed=5, service=service)
    assert served.baseline == alone.baseline
    # the later sets stop at the share the baseline sessions calibrated, in both
    assert learner.calibration.threshold(0.8) is not None
    assert served.selections == alone.selections
    assert not all(len(s) == len(arms) for s in served.selections)
