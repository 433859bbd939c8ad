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
from typing import TYPE_CHECKING, NamedTuple

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


class RunSide(NamedTuple):
    context: ContextLearning
    selector: ArmSelector
    observer: Observer
    gateway: GatewayRuns


class RunParts(NamedTuple):
    """What the select and observe side is built from (the service's constructor's values)."""

    store: Store
    writer: ObservationWriter
    state: CachedLearner
    prices: PriceTable
    clock: Callable[[], float]
    wall_clock: WallClock
    rng: np.random.Generator | int | None
    schedule: Schedule | None
    exploration_bound: ExplorationBound | None
    spool_by_name: SpoolByName | None
    context_settings: ContextSettings | None


def wire(parts: RunParts) -> RunSide:
    """The collaborators, each handed what it needs as values or callables."""
    from learning_bot.engine.context_learning import ContextLearning
    from learning_bot.engine.exploration_counts import ExplorationCounts
    from learning_bot.engine.gateway_runs import GatewayRuns
    from learning_bot.engine.observing import Observer
    from learning_bot.engine.selecting import ArmSelector, session_selector, shared_levels

    store, writer, state, clock, wall_clock = (
        parts.store, parts.writer, parts.state, parts.clock, parts.wall_clock,
    )  # fmt: skip

    def learner_id() -> int:
        return state.learner_id

    sessions = session_selector(store, state, wall_clock, parts.prices)
    context = ContextLearning(
        store, writer, state.name, learner_id, lambda: state.opened_id, lambda: state.keep,
        lambda: state.config.phase, sessions.opening, clock, state.cache_ttl,
        parts.context_settings,
    )  # fmt: skip
    explore = ExplorationCounts(store, learner_id, clock, parts.schedule, parts.exploration_bound)
    levels = shared_levels(store, learner_id, clock, wall_clock, parts.schedule)
    selector = ArmSelector(state, sessions, context, explore, levels, parts.rng)
    observer = Observer(
        store, writer, state, selector, context, explore, wall_clock, parts.spool_by_name
    )
    gateway = GatewayRuns(store, writer, state, selector, observer, wall_clock)
    return RunSide(context, selector, observer, gateway)


class LazyRunSide:
    """The side, wired once on first use (under a lock: concurrent first requests share it)."""

    def __init__(self, parts: RunParts) -> None:
        self._parts = parts
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
                    side = self._made = wire(self._parts)
        return side
