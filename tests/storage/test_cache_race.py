"""A background refresh that read posteriors before a local update committed must not
install that older read over the update (engine.cache generation guard)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from learning_bot.engine import LearningConfig, Phase
from learning_bot.engine.ports import ArmRecord
from learning_bot.engine.service import LearningService
from learning_bot.storage import SqlStore

from .helpers import workload_arms, workload_report


class PausingStore:
    """The real store, except that one load_arms runs `during` after its read and before it
    returns: the window in which a refresh races a local update."""

    def __init__(self, store: SqlStore) -> None:
        self._store = store
        self.during: Callable[[], None] | None = None

    def load_arms(self, learner_id: int) -> dict[str, ArmRecord]:
        records = self._store.load_arms(learner_id)
        hook, self.during = self.during, None
        if hook is not None:
            hook()
        return records

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def test_a_refresh_never_installs_a_read_older_than_a_local_update(database_url: str) -> None:
    real = SqlStore(database_url)
    store = PausingStore(real)
    service = LearningService(
        store,  # type: ignore[arg-type]
        LearningConfig(phase=Phase.ACTIVE, half_life=30.0),
        rng=1,
        cache_ttl=0,
    )
    arms = workload_arms(4)
    service.observe(workload_report("first", arms, [0, 1]))
    arm = arms[0].id
    service.refresh(force=True)
    before = service._cache.arms[arm].posterior()

    def local_update() -> None:
        service.reward(arm, 1.0, actor="tester")

    store.during = local_update
    service._cache.invalidate(reload=True)  # the next refresh reads every posterior
    service.refresh()
    cached = service._cache.arms[arm].posterior()
    stored = real.load_arms(service.learner_id)[arm].posterior
    assert cached.pulls == before.pulls + 1 == stored.pulls
    assert cached.alpha == stored.alpha
    assert cached.beta == stored.beta
    # the refused read is retried: the next refresh installs the current state
    service.refresh()
    assert not service._cache.stale
    assert service._cache.arms[arm].posterior() == stored
    real.close()
