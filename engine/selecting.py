"""Selection with sessions: the arms of the next prompt drawn from the cached posteriors
(engine.selection), context-aware when the request carries a context (engine.context_policy),
with the arms the exploration bound owes a try (engine.exploration), and kept per session
(engine.session_selection)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from learning_bot.engine.config import LearningConfig
from learning_bot.engine.errors import Unavailable
from learning_bot.engine.inputs import request_of
from learning_bot.engine.ports import RecallLevels, SessionSets, SessionUsages
from learning_bot.engine.session_selection import (
    SessionRequest,
    SessionSelector,
    session_key_of,
    session_request,
)

if TYPE_CHECKING:  # numpy is imported on first selection, not at start-up
    import numpy as np

    from learning_bot.engine.arms import Arm
    from learning_bot.engine.bm25 import BM25Index
    from learning_bot.engine.cache import PosteriorCache
    from learning_bot.engine.cached_learner import CachedLearner
    from learning_bot.engine.context import RequestContext
    from learning_bot.engine.context_learning import ContextLearning
    from learning_bot.engine.cost import PriceTable
    from learning_bot.engine.exploration_counts import ExplorationCounts, Schedule
    from learning_bot.engine.inventory import ArmSet
    from learning_bot.engine.recall_levels import SharedLevels
    from learning_bot.engine.recall_target import RecallCalibration, SearchPricing
    from learning_bot.engine.selection import Selection


class SessionStorage(SessionSets, SessionUsages, Protocol):
    """The session sets and the session usage a review reads (parts of the Store port)."""


def session_selector(
    store: SessionStorage,
    learner: CachedLearner,
    wall_clock: Callable[[], int],
    prices: PriceTable,
) -> SessionSelector:
    """The learner's session sets, reviewed against its cached posteriors."""
    from learning_bot.engine.learner_view import CachedLearnerView

    def learner_id() -> int:
        return learner.learner_id

    def cache() -> PosteriorCache:
        return learner.cache

    view = CachedLearnerView(cache, store, learner_id, learner.clock)
    return SessionSelector(
        store, learner_id, learner.cache_ttl, learner.clock, wall_clock, view, lambda: prices
    )


def shared_levels(
    store: RecallLevels,
    learner_id: Callable[[], int],
    clock: Callable[[], float],
    wall_clock: Callable[[], int],
    schedule: Schedule | None,
) -> Callable[[], SharedLevels]:
    """How the recall target's calibration kept in storage (engine.recall_levels) is made on
    first use."""

    def make() -> SharedLevels:
        from learning_bot.engine.recall_levels import SharedLevels

        return SharedLevels(store, learner_id, clock, wall_clock, schedule)

    return make


@dataclass(eq=False)
class ArmSelector:
    """One learner's draws over its cached posteriors: its random generator (made from
    `_rng_seed` on first use), its recall target's calibration, its session sets."""

    learner: CachedLearner
    sessions: SessionSelector
    context: ContextLearning
    exploration: ExplorationCounts
    make_levels: Callable[[], SharedLevels]
    """The recall target's calibration kept in storage (engine.recall_levels), made on first
    use."""
    _rng_seed: np.random.Generator | int | None = None
    _rng_made: np.random.Generator | None = field(default=None, init=False)
    _target_made: SharedLevels | None = field(default=None, init=False)

    def seed(self, seed: int) -> None:
        """Make the random draws repeatable from `seed` from now on."""
        self._rng_seed = seed
        self._rng_made = None

    @property
    def target_levels(self) -> SharedLevels:
        """The recall target's calibration: baseline sessions' uses (engine.recall_target),
        kept in storage (engine.recall_levels), made on first use."""
        if self._target_made is None:
            self._target_made = self.make_levels()
        return self._target_made

    @property
    def rng(self) -> np.random.Generator:
        if self._rng_made is None:
            from learning_bot.engine.draws import as_generator

            self._rng_made = as_generator(self._rng_seed)
        return self._rng_made

    def select(
        self,
        arms: Sequence[Arm] | ArmSet,
        context: Mapping[str, Any] | None = None,
        session_key: str | None = None,
    ) -> Selection:
        """See LearningService.select."""
        from learning_bot.engine.inventory import ArmSet
        from learning_bot.engine.selection import include_everything

        learner = self.learner
        cache = learner.cache
        arm_set = ArmSet.of(arms)
        if cache.stale:
            try:
                learner.refresh()
            except Unavailable as exc:
                if not cache.arms:
                    reason = f"storage unavailable: {exc}"
                    return include_everything(arm_set, learner.settings, reason)
        elif learner.clock() - cache.checked_at >= learner.cache_ttl:
            # Never answer from a cache older than cache_ttl: a phase change, reset, undo or
            # settings change made on another replica is honoured by this select (the check
            # reads the learner's version, and its arms only when they changed).
            learner.refresh_quietly()
        config = learner.config
        key = session_key_of(context, session_key)
        request = request_of(context)
        asked = session_request(context) if key and config.is_active else _runtime_of(context)

        def draw(offered: ArmSet, settings: LearningConfig) -> Selection:
            return self.draw(offered, settings, request, key, asked.provider, asked.model)

        if key and config.is_active:
            from learning_bot.engine.context import opening_features

            opening = opening_features(request.message) if request is not None else ()
            return self.sessions.select(
                key,
                arm_set,
                config,
                draw,
                opening=opening,
                request=asked,
                calibration=self.calibration,
            )
        return draw(arm_set, config)

    def calibration(
        self, arm_set: ArmSet, config: LearningConfig, provider: str = "", model: str = ""
    ) -> RecallCalibration | None:
        """The recall target's calibration a draw over `arm_set` under `config` reads (None:
        no target): where the provider has tool search, the left-out tools are deferred, and
        the calibration, which replays the search on baseline sessions, prices it. The
        provider and model are those the request names (a gateway's, a select's context),
        else the learner's."""
        if config.recall_target is None:
            return None
        from learning_bot.engine.providers import mechanics_for

        provider = provider or config.provider
        model = model or config.model
        target = self.target_levels
        calibration = target.calibration
        pricing: SearchPricing | None = None
        if mechanics_for(provider, model).tool_search:
            prices = self.sessions.prices_for(provider, model)
            pricing = target.sessions.traffic.pricing(prices, arm_set.costs)
        calibration.pricing = pricing
        return calibration

    def draw(
        self,
        arm_set: ArmSet,
        config: LearningConfig,
        request: RequestContext | None = None,
        session_key: str = "",
        provider: str = "",
        model: str = "",
    ) -> Selection:
        """`select_arms` under `config`: from the cached posteriors, under the cache's lock,
        when active; passive or disabled, every arm without reading a posterior. With a
        request context the draw is the context-aware one (engine.context_policy); arms owed
        a try by the exploration bound (engine.exploration) are included."""
        from learning_bot.engine.selection import select_arms

        if not config.is_active:
            return select_arms(arm_set, None, config)
        cache = self.learner.cache
        owed = self.exploration.owed()
        force = owed.mask(arm_set)
        calibration = self.calibration(arm_set, config, provider, model)
        target = self.target_levels if calibration is not None else None
        search: BM25Index | None = None
        if calibration is not None and calibration.pricing is not None:
            from learning_bot.engine.context_policy import lexical_index

            search = lexical_index(arm_set)  # the search the calibration replays
        scores: Any = None
        if request is None:
            with cache.lock:
                post = cache.arrays(arm_set)
                chosen = select_arms(
                    arm_set, post, config, self.rng, force=force, calibration=calibration
                )
        else:
            from learning_bot.engine.context_policy import context_scores, lexical_index

            settings = self.context.effective_settings()
            evidence = self.context.evidence()
            # the inventory's words become nameable in explanations (engine.context_policy's
            # VOCABULARY) by any select that carries a request, a baseline draw's included
            lexical_index(arm_set)

            def scores(p: Any, c: LearningConfig, gen: np.random.Generator) -> Any:
                return context_scores(arm_set, p, request, evidence, settings, c, gen)

            with cache.lock:
                post = cache.arrays(arm_set)
                chosen = select_arms(
                    arm_set, post, config, self.rng, draw=scores, force=force,
                    calibration=calibration,
                )  # fmt: skip
        if target is not None and chosen.is_baseline and session_key:
            from learning_bot.engine.selection import opening_ranks

            with cache.lock:
                ranks = opening_ranks(arm_set, post, config, scores, force, self.rng)
            tokens = float(arm_set.costs.sum())
            target.sessions.opened(session_key, arm_set.ids, *ranks, search=search, tokens=tokens)
        elif target is not None and not chosen.is_baseline:
            target.sessions.traffic.selected(float(chosen.used_tokens))
        owed.included(arm_set, chosen.mask)
        return chosen

    def cap(
        self, arm_set: ArmSet, selection: Selection, k: int, config: LearningConfig
    ) -> Selection:
        """At most k of the selected arms: forced ones (seeds, under-explored) first, then by
        posterior mean; seeds stay even past k."""
        from learning_bot.engine.selection import Selection

        seeds = set(config.seed_arm_ids)
        known = self.learner.cache.arms
        costs = {a.id: a.token_cost for a in arm_set.arms}

        def rank(arm_id: str) -> tuple[int, float]:
            entry = known.get(arm_id)
            pulls = entry.pulls if entry is not None else 0
            forced = arm_id in seeds or pulls < config.min_pulls
            mean = entry.mean if entry is not None else 0.0
            return (0 if forced else 1, -mean)

        ordered = sorted(selection.selected, key=rank)
        keep = set(ordered[:k]) | (seeds & set(ordered))
        selected = [a for a in selection.selected if a in keep]
        excluded = [a for a in arm_set.ids if a not in keep]
        used = sum(costs[a] for a in selected)
        return Selection(
            selected,
            excluded,
            selection.is_baseline,
            selection.token_budget,
            used,
            used > selection.token_budget,
        )


def _runtime_of(context: Mapping[str, Any] | None) -> SessionRequest:
    """The provider and model a select without a session names in its context, read as
    given: text, else none (the learner's then)."""
    if not context:
        return _NO_RUNTIME
    provider, model = context.get("provider"), context.get("model")
    return SessionRequest(
        provider.strip() if isinstance(provider, str) else "",
        model.strip() if isinstance(model, str) else "",
    )


_NO_RUNTIME = SessionRequest()
