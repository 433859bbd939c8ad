"""The service under a recall target: it calibrates the target from its baseline sessions as
the study's learner does, so both make the same selections for the same seed, and a live
session's review weighs the set a first draw picks under that calibration."""

from __future__ import annotations

import numpy as np

from learning_bot.engine import Arm, LearningConfig, Phase
from learning_bot.engine.config import DEFAULT_POLICY
from learning_bot.engine.recall_target import pack_to_target, ranked
from learning_bot.engine.service import LearningService
from learning_bot.engine.session_review import PROVISIONAL
from learning_bot.research.context_simulation import Learner, run_study
from learning_bot.research.task_types import task_type_workload
from learning_bot.storage import SqlStore
from tests.storage.test_session_decisions import run, tools


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


def _deferring(baseline_rate: float) -> LearningConfig:
    """The target with deferral: a provider with tool search (engine.providers)."""
    return LearningConfig.for_policy(
        DEFAULT_POLICY,
        phase=Phase.ACTIVE,
        seed_arm_ids=(),
        min_pulls=0,
        baseline_rate=baseline_rate,
        token_budget=10**9,
        recall_target=0.8,
        provider="anthropic",
    )


def test_with_tool_search_the_service_records_the_uses_the_study_records(store: SqlStore) -> None:
    arms, sessions = task_type_workload(tools=24, types=4, sessions=12, seed=3)
    config = _deferring(baseline_rate=1.0)  # every session a baseline one
    alone = run_study(arms, sessions, "context+deferral", config, seed=5)
    learner = alone.learner
    assert isinstance(learner, Learner) and learner.search is not None
    service = LearningService(store, config, rng=5, cache_ttl=60, learner="target")
    served = run_study(arms, sessions, "context+deferral", config, seed=5, service=service)
    assert all(served.baseline) and all(alone.baseline)
    recorded = service._selector.target_levels.calibration.recorded()
    # one use per tool a turn used, each at the threshold above which the session's searches
    # (replayed on its turns' messages) offer it and the same search charges
    assert recorded == learner.calibration.recorded()
    assert len(recorded) == int(alone.used.sum())
    assert any(use.level < use.own for use in recorded)  # found below its own level


def test_with_tool_search_the_service_selects_as_the_study_does(store: SqlStore) -> None:
    arms, sessions = task_type_workload(tools=24, types=4, sessions=40, seed=3)
    config = _deferring(baseline_rate=0.25)
    alone = run_study(arms, sessions, "context+deferral", config, seed=5)
    learner = alone.learner
    assert isinstance(learner, Learner)
    service = LearningService(store, config, rng=5, cache_ttl=60, learner="target")
    served = run_study(arms, sessions, "context+deferral", config, seed=5, service=service)
    assert served.baseline == alone.baseline and not all(alone.baseline)
    calibration = service._selector.target_levels.calibration
    assert calibration.recorded() == learner.calibration.recorded()
    # the search priced from the runs reported as the study prices it, so the later sets
    # stop at the same threshold and defer the same tools
    assert calibration.pricing is not None and calibration.pricing == learner.calibration.pricing
    assert served.selections == alone.selections
    assert served.searches.sum() > 0


def test_a_long_lived_session_is_redrawn_by_the_calibrated_rule(store: SqlStore) -> None:
    """One long-lived key (an OpenClaw channel) under a target: its cold set forces every arm
    in; once those arms have their pulls and baseline sessions have calibrated the target,
    the set replacing it is the one a new session's first draw picks, not the share of the
    means."""
    arms = tools(20, 100)
    useful = [a.id for a in arms[:3]]
    service = _targeted(store, arms, min_pulls=2, baseline_rate=0.0, rng=9)
    channel = {"session_key": "agent:main:slack:channel:c0"}
    cold = service.select(arms, channel)
    assert cold.session == "new" and len(cold.selected) == len(arms)  # every arm forced in
    run(service, "agent:main:slack:channel:c0", 0, arms, cold.selected, useful)
    warm = service.select(arms, {"session_key": "warm"})
    run(service, "warm", 0, arms, warm.selected, useful)  # every arm has its two pulls
    service.set_settings({"baselineRate": 1.0})
    for n in range(4):  # baseline sessions offer every arm: their uses calibrate the target
        key = f"baseline-{n}"
        baseline = service.select(arms, {"session_key": key})
        assert baseline.is_baseline
        run(service, key, 0, arms, baseline.selected, useful)
    service.set_settings({"baselineRate": 0.0})
    assert service._selector.target_levels.calibration.threshold(0.8) is not None

    redrawn = service.select(arms, channel)
    assert (redrawn.session, redrawn.session_reason) == ("redrawn", PROVISIONAL)
    fresh = service.select(arms, {"session_key": "new"})
    assert fresh.session == "new" and not fresh.is_baseline
    assert redrawn.selected == fresh.selected
    means = np.array([v.mean for v in sorted(service.posteriors(), key=lambda v: v.arm_id)])
    costs = np.array([a.token_cost for a in sorted(arms, key=lambda a: a.id)])
    none = np.zeros(len(arms), dtype=bool)
    share, _, _ = pack_to_target(means, ranked(means, costs), costs, none, 0.8, 10**9)
    assert len(redrawn.selected) < int(share.sum())  # the uncalibrated set keeps more


def test_baseline_sessions_of_a_cold_learner_calibrate_the_ranking_not_the_cold_start(
    store: SqlStore,
) -> None:
    """Baseline sessions opened while every arm is under minPulls (each forced in for its
    first pulls) record their uses at the arms' levels: recorded as offered at any threshold,
    they would calibrate a threshold below every level, and once the arms have their pulls
    the sets would keep nothing."""
    arms = tools(20, 100)
    useful = [a.id for a in arms[:3]]
    service = _targeted(store, arms, min_pulls=6, baseline_rate=1.0, rng=3)
    for n in range(6):  # each opens with every arm under its 6 pulls
        key = f"baseline-{n}"
        baseline = service.select(arms, {"session_key": key})
        assert baseline.is_baseline
        run(service, key, 0, arms, baseline.selected, useful)
    calibration = service._selector.target_levels.calibration
    assert len(calibration) == 18 and min(calibration.levels()) > 0.0
    service.set_settings({"baselineRate": 0.0})

    chosen = service.select(arms, {"session_key": "first-selected"})
    assert not chosen.is_baseline
    assert set(useful) <= set(chosen.selected)
    assert len(chosen.selected) < len(arms)


def _targeted(
    store: SqlStore, arms: list[Arm], *, min_pulls: int, baseline_rate: float, rng: int
) -> LearningService:
    """A service selecting `arms` under recall target 0.8, no seeds, no budget cap."""
    config = LearningConfig.for_policy(
        DEFAULT_POLICY,
        phase=Phase.ACTIVE,
        seed_arm_ids=(),
        min_pulls=min_pulls,
        baseline_rate=baseline_rate,
        pooled_prior=False,
        token_budget=sum(a.token_cost for a in arms),
        recall_target=0.8,
    )
    return LearningService(
        store, config, rng=rng, cache_ttl=0, clock=lambda: 0.0, wall_clock=lambda: 1_000_000
    )
