"""Per-arm outcomes (the gateway's observe path) racing each other, resets and undos: whatever
order the transactions commit in, every posterior equals its base plus the changes recorded in
its epoch, numbered in the order they were applied, so `verify` passes."""

from __future__ import annotations

import threading
from collections.abc import Callable

from learning_bot.engine import Arm, LearningConfig, Phase
from learning_bot.engine.errors import Conflict
from learning_bot.engine.posterior import now_ms
from learning_bot.engine.service import LearningService
from learning_bot.storage import SqlStore
from learning_bot.storage.pooling import PoolSettings

ARMS = [Arm(f"tool:race:T{i}", token_cost=100) for i in range(3)]
SESSION = "gw-session"
OBSERVES = 200
RESETS = 20  # reset and undo, alternately
WORKERS = 8


def _race(store: SqlStore, learner_id: int) -> list[BaseException]:
    """OBSERVES per-arm outcomes for SESSION over ARMS and RESETS resets and undos, from
    WORKERS threads released together. Returns the errors the calls raised."""
    jobs: list[Callable[[], object]] = []
    for i in range(OBSERVES):
        arm = ARMS[i % len(ARMS)].id

        def observe(arm: str = arm, i: int = i) -> object:
            return store.record_arm_outcome(
                learner_id,
                arm,
                float(i % 2),
                referenced=bool(i % 2),
                conversation=SESSION,
                apply_reward=i % 10 != 9,  # a few marks without a posterior change
                at=now_ms(),
            )

        jobs.append(observe)

    def reset_or_undo(i: int) -> object:
        if i % 2 == 0:
            return store.reset(learner_id, [a.id for a in ARMS[:2]], actor="race", at=now_ms())
        try:
            return store.undo_reset(learner_id, actor="race", at=now_ms())
        except Conflict:  # the reset it would undo has not committed yet
            return None

    # spread the resets and undos among the outcomes
    step = OBSERVES // RESETS
    for n in range(RESETS):
        jobs.insert(n * (step + 1) + step // 2, lambda n=n: reset_or_undo(n))
    lock = threading.Lock()
    errors: list[BaseException] = []
    start = threading.Barrier(WORKERS)

    def worker() -> None:
        start.wait()
        while True:
            with lock:
                if not jobs:
                    return
                job = jobs.pop(0)
            try:
                job()
            except BaseException as exc:  # reported by the test
                with lock:
                    errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(WORKERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    return errors


def test_per_arm_outcomes_racing_resets_and_undos_keep_verify_passing(
    database_url: str,
) -> None:
    store = SqlStore(database_url, pool=PoolSettings(size=WORKERS + 2))
    try:
        # forgetting on: verify then also replays each arm's changes in their recorded order
        config = LearningConfig.for_policy(
            "seed", phase=Phase.ACTIVE, half_life=50.0, seed_arm_ids=(), baseline_rate=0.0
        )
        service = LearningService(store, config, rng=11, cache_ttl=0)
        for _ in range(OBSERVES // len(ARMS) + 10):  # open runs for every outcome to attach to
            service.select_run(ARMS, session_key=SESSION, token_budget=10_000)
        learner_id = service.learner_id
        errors = _race(store, learner_id)
        assert errors == []
        report = store.verify(learner_id)
        assert report.problems == ()
        # every change applied is recorded once: attached to a run or kept on its own
        assert report.observations_checked >= 1
    finally:
        store.close()
