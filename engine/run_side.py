"""The select and observe side of a LearningService, wired on first use.

Selection with sessions (engine.selecting), context learning (engine.context_learning), the
exploration bound's counts (engine.exploration_counts), observe (engine.observing) and the
gateway's runs (engine.gateway_runs) are built, and their modules imported, the first time a
select, an observe or a context read needs them: a process that only reads a learner
(`learning-bot status`) does neither.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

    from learning_bot.engine.cached_learner import CachedLearner
    from learning_bot.engine.context_learning import ContextLearning
    from learning_bot.engine.context_policy import ContextSettings
    from learning_bot.engine.cost import PriceTable
    from learning_bot.engine.exploration import ExplorationBound
    from learning_bot.engine.exploration_counts import Schedule
    from learning_bot.engine.gateway_runs import GatewayRuns
    from learning_bot.engine.observing import Observer, SpoolByName
    from learning_bot.engine.ports import ObservationWriter, Store
    from learning_bot.engine.posterior import WallClock
    from learning_bot.engine.selecting import ArmSelector


class RunSide:
    """The wired collaborators."""

    __slots__ = ("context", "gateway", "observer", "selector")

    def __init__(
        self,
        context: ContextLearning,
        selector: ArmSelector,
        observer: Observer,
        gateway: GatewayRuns,
    ) -> None:
        self.context = context
        self.selector = selector
        self.observer = observer
        self.gateway = gateway


def wire(
    store: Store,
    writer: ObservationWriter,
    state: CachedLearner,
    prices: PriceTable,
    clock: Callable[[], float],
    wall_clock: WallClock,
    rng: np.random.Generator | int | None,
    schedule: Schedule | None,
    exploration_bound: ExplorationBound | None,
    spool_by_name: SpoolByName | None,
    context_settings: ContextSettings | None,
) -> RunSide:
    """The collaborators, each handed what it needs as values or callables (the service's
    constructor's values)."""
    from learning_bot.engine.context_learning import ContextLearning
    from learning_bot.engine.exploration_counts import ExplorationCounts
    from learning_bot.engine.gateway_runs import GatewayRuns
    from learning_bot.engine.observing import Observer
    from learning_bot.engine.selecting import ArmSelector, session_selector, shared_levels

    def learner_id() -> int:
        return state.learner_id

    sessions = session_selector(store, state, wall_clock, prices)
    context = ContextLearning(
        store, writer, state.name, learner_id, lambda: state.opened_id, lambda: state.keep,
        lambda: state.config.phase, sessions.opening, clock, state.cache_ttl,
        context_settings,
    )  # fmt: skip
    explore = ExplorationCounts(store, learner_id, clock, schedule, exploration_bound)
    levels = shared_levels(store, learner_id, clock, wall_clock, schedule)
    selector = ArmSelector(state, sessions, context, explore, levels, rng)
    observer = Observer(store, writer, state, selector, context, explore, wall_clock, spool_by_name)
    gateway = GatewayRuns(store, writer, state, selector, observer, wall_clock)
    return RunSide(context, selector, observer, gateway)


class LazyRunSide:
    """The side, wired once on first use (under a lock: concurrent first requests share it)."""

    def __init__(self, wire: Callable[[], RunSide]) -> None:
        self._wire = wire
        self._made: RunSide | None = None
        self._lock = threading.Lock()

    @property
    def made(self) -> RunSide | None:
        """The side if it has been wired, else None."""
        return self._made

    def context_stale(self) -> None:
        """Context evidence is read again at its next use (after a reset or its undo)."""
        if self._made is not None:
            self._made.context.stale()

    def get(self) -> RunSide:
        side = self._made
        if side is None:
            with self._lock:
                side = self._made
                if side is None:
                    side = self._made = self._wire()
        return side
