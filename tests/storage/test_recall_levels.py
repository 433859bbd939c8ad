"""The recall target's calibration is kept in storage: a restarted service, and another
replica, calibrate on the uses the learner's baseline sessions recorded, so they select what
the service selected before."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
from sqlalchemy import delete

from learning_bot.engine import LearningConfig, Phase
from learning_bot.engine.config import DEFAULT_POLICY
from learning_bot.engine.inventory import ArmSet
from learning_bot.engine.recall_levels import SharedLevels
from learning_bot.engine.recall_target import RecordedUse
from learning_bot.engine.service import LearningService
from learning_bot.research.context_simulation import run_study
from learning_bot.research.task_types import task_type_workload
from learning_bot.storage import SqlStore
from learning_bot.storage.database import write_transaction
from learning_bot.storage.schema import recall_levels


def test_uses_are_stored_in_order_and_bounded_per_learner(store: SqlStore) -> None:
    one = store.open_learner("one", Phase.ACTIVE).id
    two = store.open_learner("two", Phase.ACTIVE).id
    store.add_recall_levels(one, [(0.5, 0.5, "a"), (math.inf, 2.0, "a")], at=1, keep=3)
    store.add_recall_levels(two, [(9.0, 9.0, "z")], at=1, keep=3)
    assert store.recall_levels(one, 10) == [(0.5, 0.5, "a"), (math.inf, 2.0, "a")]
    store.add_recall_levels(one, [(1.5, 1.5, "b"), (2.5, math.inf, "c")], at=2, keep=3)
    # the oldest went: the latest three stay, oldest first
    assert store.recall_levels(one, 10) == [
        (math.inf, 2.0, "a"),
        (1.5, 1.5, "b"),
        (2.5, math.inf, "c"),
    ]
    assert store.recall_levels(one, 2) == [(1.5, 1.5, "b"), (2.5, math.inf, "c")]
    assert store.recall_levels(two, 10) == [(9.0, 9.0, "z")]
    store.delete_learner_data(one)
    assert store.recall_levels(one, 10) == []


def _config(arms_cost: int) -> LearningConfig:
    return LearningConfig.for_policy(
        DEFAULT_POLICY,
        phase=Phase.ACTIVE,
        seed_arm_ids=(),
        min_pulls=0,
        baseline_rate=0.25,
        token_budget=arms_cost,
        recall_target=0.8,
    )


def test_a_restarted_service_selects_as_before(store: SqlStore) -> None:
    arms, sessions = task_type_workload(tools=24, types=4, sessions=40, seed=3)
    config = _config(sum(a.token_cost for a in arms))
    before = LearningService(store, config, rng=5, cache_ttl=60, learner="target")
    run_study(arms, sessions, "context", config, seed=5, service=before)
    arm_set = ArmSet.of(list(arms))
    request = {"message": sessions[-1].turns[0].message, "channel": sessions[-1].channel}

    def chosen(service: LearningService, key: str) -> tuple[str, ...]:
        service.seed_draws(10)
        picked = service.select(arm_set, {**request, "session_key": key})
        assert not picked.is_baseline
        return tuple(picked.selected)

    first = chosen(before, "after-1")
    assert 0 < len(first) < len(arms)
    kept = before._selector.target_levels.calibration.recorded()
    assert len(kept) >= 10  # enough for the target's threshold: the set stops where it says

    restarted = SqlStore(store.url)
    try:
        after = LearningService(restarted, config, rng=5, cache_ttl=60, learner="target")
        assert chosen(after, "after-2") == first
        assert after._selector.target_levels.calibration.recorded() == kept

        # without the stored calibration the same request gets another set
        with write_transaction(restarted.engine) as conn:
            conn.execute(delete(recall_levels))
        forgot = LearningService(restarted, config, rng=5, cache_ttl=60, learner="target")
        assert chosen(forgot, "after-3") != first
    finally:
        restarted.close()


def test_the_searched_levels_are_read_back_by_a_restart_and_a_replica(store: SqlStore) -> None:
    arms, sessions = task_type_workload(tools=24, types=4, sessions=12, seed=3)
    config = replace(
        _config(sum(a.token_cost for a in arms)), baseline_rate=1.0, provider="anthropic"
    )
    service = LearningService(store, config, rng=5, cache_ttl=60, learner="searched")
    replica = LearningService(store, config, rng=5, cache_ttl=60, learner="searched")
    assert len(replica._selector.target_levels.calibration) == 0  # read once: nothing yet
    run_study(arms, sessions, "context+deferral", config, seed=5, service=service)
    kept = service._selector.target_levels.calibration.recorded()
    # with tool search the uses are recorded where the session's searches offer them
    assert any(use.level < use.own for use in kept)
    assert any(use.own == 0.0 < use.level for use in kept)  # no search charged to it

    replica._selector.target_levels.sync()  # as it does every SYNC_SECONDS
    assert replica._selector.target_levels.calibration.recorded() == kept
    restarted = SqlStore(store.url)
    try:
        after = LearningService(restarted, config, rng=5, cache_ttl=60, learner="searched")
        assert after._selector.target_levels.calibration.recorded() == kept
    finally:
        restarted.close()


def test_another_replica_reads_the_uses_when_it_reads_again(store: SqlStore) -> None:
    learner = store.open_learner("replicas", Phase.ACTIVE).id
    now = [0.0]
    made = [
        SharedLevels(store, lambda: learner, lambda: now[0], lambda: 1_000, every=10.0)
        for _ in range(2)
    ]
    one, two = made
    assert len(two.calibration) == 0  # read once: nothing stored yet
    means = np.array([0.6, 0.3, 0.1])
    rank = means / np.array([10, 10, 10])
    one.sessions.opened("s", ["a", "b", "c"], means, rank, np.zeros(3, dtype=bool))
    one.observed("s", ["b"])
    # b's level: the means' total over its mean per token
    level = float(means.sum() / rank[1])
    assert one.calibration.recorded() == [RecordedUse(level, level, "s")]
    assert len(two.calibration) == 0  # not yet read again
    now[0] = 10.0
    assert two.calibration.recorded() == one.calibration.recorded()
