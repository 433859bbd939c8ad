"""A reload of the posterior cache that reads storage after one of this process's writes
committed, but before that write was applied to the cache, must not count the write twice.

Observes of one run arrive in parallel (OpenClaw's gateway sends one per arm at once), so
while one request's write is between its commit and its in-memory update, another request
may refresh the cache. Here the refresh runs, on another thread, exactly in that gap."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from learning_bot.engine import LearningConfig, Phase
from learning_bot.engine.arms import Arm
from learning_bot.engine.observation import ReportedArm, RunReport, ToolCall
from learning_bot.engine.service import LearningService
from learning_bot.storage import SqlStore

ARM = "tool:fs:Read"


class RefreshAfterCommit(SqlStore):
    """The real store; after its next write commits, `between` runs before the write
    returns (what another thread does while this one has not applied its write yet)."""

    between: Callable[[], None] | None = None

    def _then(self, result: Any) -> Any:
        hook, self.between = self.between, None
        if hook is not None:
            hook()
        return result

    def record_arm_outcome(self, *args: Any, **kwargs: Any) -> Any:
        return self._then(super().record_arm_outcome(*args, **kwargs))

    def record_runs(self, *args: Any, **kwargs: Any) -> Any:
        return self._then(super().record_runs(*args, **kwargs))


def refresh_elsewhere(service: LearningService) -> Callable[[], None]:
    def run() -> None:
        thread = threading.Thread(target=service.refresh, kwargs={"force": True})
        thread.start()
        thread.join(120)
        assert not thread.is_alive()

    return run


def cached_and_stored(service: LearningService, store: SqlStore) -> tuple[Any, Any]:
    cached = {v.arm_id: (v.posterior.pulls, v.posterior.alpha) for v in service.posteriors()}
    stored = {
        a: (r.posterior.pulls, r.posterior.alpha)
        for a, r in store.load_arms(service.learner_id).items()
    }
    return cached, stored


def test_an_arm_outcome_is_counted_once_when_a_reload_lands_in_between(
    database_url: str,
) -> None:
    store = RefreshAfterCommit(database_url)
    try:
        config = LearningConfig.for_policy("seed", phase=Phase.ACTIVE)
        service = LearningService(store, config, rng=7, cache_ttl=3600)
        service.observe_arm(ARM, 1.0, referenced=True)
        store.between = refresh_elsewhere(service)
        service.observe_arm(ARM, 1.0, referenced=True)
        cached, stored = cached_and_stored(service, store)
        assert stored[ARM][0] == 2
        assert cached == stored
    finally:
        store.close()


def test_a_run_is_counted_once_when_a_reload_lands_in_between(database_url: str) -> None:
    store = RefreshAfterCommit(database_url)
    try:
        config = LearningConfig.for_policy("seed", phase=Phase.ACTIVE)
        service = LearningService(store, config, rng=7, cache_ttl=3600)
        arms = (ReportedArm(Arm(ARM, 100)), ReportedArm(Arm("tool:exec:Bash", 100)))

        def report(trace_id: str) -> RunReport:
            return RunReport(trace_id, arms, tool_calls=(ToolCall("Read"),))

        service.observe(report("t-1"))
        store.between = refresh_elsewhere(service)
        service.observe(report("t-2"))
        cached, stored = cached_and_stored(service, store)
        assert stored[ARM][0] == 2
        assert cached == stored
    finally:
        store.close()
