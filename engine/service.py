"""LearningService: the use cases every surface and every agent runtime calls.

select, observe, reward, reset, phase and the reads of status, over a `Store`. A thin front:
each concern is a collaborator of its own, handed what it needs as values or callables.

- engine.cached_learner: the learner's id, stored settings and cached posteriors, kept fresh;
- engine.selecting: selection with sessions, the recall target and the random draws;
- engine.exploration_counts: the exploration bound's counts, synced with the stored runs;
- engine.context_learning: context evidence, deferral counts and written word forms;
- engine.observing: observe, its retries, and what a run teaches beyond its rewards;
- engine.gateway_runs: runs recorded at selection and completed arm by arm;
  (these five are wired on first use by engine.run_side: a process that only reads never
  imports them);
- engine.changes: rewards, resets and their undo, the phase, the stored settings;
- engine.reports and engine.history: status, summaries, traces and time series.
It starts no thread and does no I/O of its own: the store does the I/O, and a `schedule`
callable given by the composition root decides where a background read runs."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from functools import cached_property, partial
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # numpy is imported on first selection, not at start-up
    import numpy as np

    from learning_bot.engine.arms import Arm
    from learning_bot.engine.cache import PosteriorCache
    from learning_bot.engine.changes import LearnerChanges
    from learning_bot.engine.config import Phase
    from learning_bot.engine.context_policy import ContextEvidence, ContextSettings
    from learning_bot.engine.exploration import ExplorationBound
    from learning_bot.engine.exploration_counts import Schedule
    from learning_bot.engine.inventory import ArmSet
    from learning_bot.engine.observation import RunReport
    from learning_bot.engine.observing import SpoolByName
    from learning_bot.engine.ports import ArmRecord, ObservationWriter, SpoolHealth, Store
    from learning_bot.engine.posterior import WallClock
    from learning_bot.engine.records import RunRecord
    from learning_bot.engine.results import ObserveResult, PhaseChange, ResetResult, RewardResult
    from learning_bot.engine.selecting import ArmSelector
    from learning_bot.engine.selection import Selection
    from learning_bot.engine.session_selection import SessionSelector
    from learning_bot.engine.starvation import StarvedArm
    from learning_bot.engine.store_records import ArmOutcome, ResetRecord, TimeBucket, VerifyReport
    from learning_bot.engine.views import ArmView, Status, Summary

from learning_bot.engine.cached_learner import RECORD_ATTEMPTS, CachedLearner
from learning_bot.engine.config import LearningConfig
from learning_bot.engine.cost import PriceTable
from learning_bot.engine.errors import Unavailable
from learning_bot.engine.history import TIMESERIES_METRICS, WINDOWS, History
from learning_bot.engine.posterior import now_ms
from learning_bot.engine.reports import RECALL_WINDOW, Reports
from learning_bot.engine.run_side import LazyRunSide, wire
from learning_bot.engine.store_writer import StoreWriter

__all__ = ["RECALL_WINDOW", "RECORD_ATTEMPTS", "TIMESERIES_METRICS"]
__all__ += ["WINDOWS", "LearningService"]


class LearningService:
    """One learner's use cases over a Store: select, observe, reward, reset, phase, status."""

    def __init__(
        self,
        store: Store,
        config: LearningConfig | None = None,
        rng: np.random.Generator | int | None = None,
        *,
        learner: str = "default",
        cache_ttl: float = 0.5,
        clock: Callable[[], float] = time.monotonic,
        writer: ObservationWriter | None = None,
        schedule: Schedule | None = None,
        spool_by_name: SpoolByName | None = None,
        spool: SpoolHealth | None = None,
        prices: PriceTable | None = None,
        wall_clock: WallClock = now_ms,
        context_settings: ContextSettings | None = None,
        exploration_bound: ExplorationBound | None = None,
    ) -> None:
        """`clock`: seconds, for the cache's age; `wall_clock`: ms since the epoch (a simulation
        passes its own); `writer`: where runs, outcomes and evidence go (default: the store);
        `spool_by_name`: keeps runs while storage has been down since start."""
        self.store = store
        self.spool = spool
        self.writer: ObservationWriter = writer if writer is not None else StoreWriter(store)
        self.base_config = config if config is not None else LearningConfig()
        self.learner = learner
        self.cache_ttl = cache_ttl
        self.prices = prices if prices is not None else PriceTable()
        """Token prices the measured cost saving is priced with (engine.cost)."""
        self.context_settings = context_settings
        """How the context-aware draw weighs its evidence (engine.context_policy)."""
        state = self._learner = CachedLearner(store, self.base_config, learner, cache_ttl, clock)

        self._run_side = LazyRunSide(
            partial(
                wire, store, self.writer, state, self.prices, clock, wall_clock, rng, schedule,
                exploration_bound, spool_by_name, context_settings,
            )
        )  # fmt: skip
        self._wall_clock = wall_clock
        self._reports = Reports(store, state, self.prices)
        self._history = History(store, state, wall_clock, self.prices)
        try:
            state.open()
        except Unavailable:
            if spool_by_name is None:
                raise
            state.cache.phase = self.base_config.phase  # the configured one, until opened
            # Storage is down: select falls back to every arm and observe spools under the
            # learner's name until the learner can be opened (or created).

    @cached_property
    def _changes(self) -> LearnerChanges:
        from learning_bot.engine.changes import LearnerChanges

        stale = self._run_side.context_stale
        return LearnerChanges(self.store, self._learner, self._wall_clock, stale)

    @property
    def _selector(self) -> ArmSelector:
        return self._run_side.get().selector

    @property
    def learner_id(self) -> int:
        """The learner's id in storage (opened on first use after an outage at start)."""
        return self._learner.learner_id

    @property
    def config(self) -> LearningConfig:
        """The learner's settings with its current phase."""
        return self._learner.config

    @property
    def settings_differ(self) -> str | None:
        """Set when the learner's stored settings differ from this process's configuration:
        which, and how to change them."""
        return self._learner.settings_differ

    @property
    def _cache(self) -> PosteriorCache:
        return self._learner.cache

    @property
    def _session_sets(self) -> SessionSelector:
        return self._selector.sessions

    def refresh(self, force: bool = False) -> None:
        """Bring the cache up to date if it is older than cache_ttl (or always, with force)."""
        self._learner.refresh(force)

    @property
    def selects_in_memory(self) -> bool:
        """Whether `select` can answer from the cached posteriors without reading storage
        first (the cache is younger than cache_ttl)."""
        return self._learner.is_fresh()

    def seed_draws(self, seed: int) -> None:
        """Make this service's random draws (Thompson samples, baseline coins) repeatable from
        `seed` from now on: a simulation with a seed selects the same way each time."""
        self._selector.seed(seed)

    def select(
        self,
        arms: Sequence[Arm] | ArmSet,
        context: Mapping[str, Any] | None = None,
        *,
        session_key: str | None = None,
    ) -> Selection:
        """Choose the arms of the next prompt. Passive phase: every arm.

        A session key (`session_key`, or `context["session_key"]`) makes the selection
        session-stable: the session's first select decides, its later ones answer the same
        arms in the same order while it stays within `session_idle_seconds`. Without one every
        select draws anew, which under a provider's prompt cache makes each request a cache
        miss (README, "Sessions and cost").

        When storage cannot be reached the run still goes ahead with every arm included, and
        the Selection's `fallback` says why.
        """
        return self._selector.select(arms, context, session_key)

    def context_evidence(self) -> ContextEvidence:
        """This learner's per-feature evidence (engine.context_policy), kept in step with the
        stored one (engine.context_learning)."""
        return self._run_side.get().context.evidence()

    def context_explanation(self, arm_id: str) -> tuple[list[Any], int, int]:
        """The features an arm's usefulness depends on, and its deferred and loaded counts."""
        view = self._learner.view(arm_id)
        rewards = view.rewards if view.rewards is not None else 0.0
        pulls = float(view.posterior.pulls)
        return self._run_side.get().context.explanation(arm_id, rewards, pulls)

    def observe(self, report: RunReport) -> ObserveResult:
        """Store the run's trace (both phases), apply the guard, update posteriors; a trace id
        seen before changes nothing and says so."""
        return self.observe_many([report])[0]

    def observe_many(self, reports: Sequence[RunReport]) -> list[ObserveResult]:
        """Observe several runs in one write (replays, imports, simulations). A trace id
        already stored, or given twice, is recorded once: the store decides which. A write
        made under a phase or settings another replica changed meanwhile writes nothing, and
        is built and written again under the learner's state read again."""
        return self._run_side.get().observer.observe_many(reports)

    def select_run(
        self,
        arms: Sequence[Arm],
        context: Mapping[str, Any] | None = None,
        *,
        k: int = 0,
        token_budget: int | None = None,
        min_pulls: int | None = None,
        seed_arm_ids: Sequence[str] | None = None,
        seed_boost: float | None = None,
        session_key: str = "",
        channel: str = "",
        provider: str = "",
        model: str = "",
    ) -> tuple[Selection, str]:
        """Select, and record the selection as a run at once; the per-arm outcomes that
        follow (`observe_arm` with the same `session_key`) complete that run.

        `token_budget`, `min_pulls`, `seed_arm_ids` and `seed_boost` replace the configured
        ones for this call; `k` > 0 keeps at most k arms on top of the budget (seed and
        under-explored arms first, then the highest posterior means; seeds are never
        dropped). The learner's phase governs: passive includes every arm. Returns the
        selection and the run's trace id (engine.gateway_runs)."""
        options = {
            "token_budget": token_budget,
            "min_pulls": min_pulls,
            "seed_arm_ids": seed_arm_ids,
            "seed_boost": seed_boost,
        }
        return self._run_side.get().gateway.select_run(
            arms, context, k, options, session_key, channel, provider, model
        )

    def observe_arm(
        self,
        arm_id: str,
        reward: float,
        *,
        referenced: bool,
        session_key: str = "",
        loaded: bool = False,
    ) -> ArmOutcome:
        """One arm's outcome for the latest run selected with `session_key` (see
        `select_run`). Active phase: the posterior changes at once and the result holds it;
        passive: the run records the outcome and the posterior stays (a switch to active
        can bootstrap from it). `loaded`: the run left the arm out and the model loaded it
        through tool search (the run then counts it as included)."""
        gateway = self._run_side.get().gateway
        return gateway.observe_arm(arm_id, reward, referenced, session_key, loaded)

    def session_runs(self, session_key: str, since: int) -> list[RunRecord]:
        """The runs `select_run` recorded for `session_key` from `since` (ms) on."""
        return self._run_side.get().gateway.session_runs(session_key, since)

    def arms(self) -> dict[str, ArmRecord]:
        """Every arm this learner knows, read fresh from storage."""
        self._learner.refresh(force=True)
        return {aid: entry.record(aid) for aid, entry in self._cache.arms.items()}

    def resolve_arm(self, query: str) -> str:
        """An arm id from a full id or a label (engine.cached_learner.resolve_arm)."""
        return self._learner.resolve_arm(query)

    def view(self, arm_id: str) -> ArmView:
        """One arm's posterior as status shows it."""
        return self._learner.view(arm_id)

    def reward(
        self,
        arm: str | None = None,
        value: float | str = 1.0,
        actor: str = "unknown",
        reason: str | None = None,
        conversation: str | None = None,
    ) -> RewardResult:
        """A manual (lagged) reward for one arm, or, without an arm, for the arms the latest
        run in `conversation` referenced. The cached posteriors are updated in place."""
        return self._changes.reward(arm, value, actor, reason, conversation)

    def reset(self, arm_ids: Iterable[str] | None = None, actor: str = "unknown") -> ResetResult:
        """Every arm (or the listed ones, by id or label) back to Beta(1, 1) with zero pulls."""
        return self._changes.reset(arm_ids, actor)

    def undo_reset(self, actor: str = "unknown") -> ResetResult:
        """Restore the posteriors the last reset replaced, keeping what was learnt since."""
        return self._changes.undo_reset(actor)

    def last_reset(self) -> ResetRecord | None:
        return self.store.last_reset(self.learner_id)

    def phase(self) -> Phase:
        return self._changes.phase()

    def set_phase(
        self, phase: Phase | str, actor: str = "unknown", bootstrap: bool = True
    ) -> PhaseChange:
        """Switch phase. Switching to active warns under 50 traces and, with `bootstrap`,
        folds the traces recorded while passive into the posteriors."""
        return self._changes.set_phase(phase, actor, bootstrap)

    def set_settings(
        self, changes: Mapping[str, Any], *, actor: str | None = None
    ) -> LearningConfig:
        """Change the learner's stored settings (camelCase or snake_case keys, as the config
        file takes them; the phase has its own command). Every replica takes them at its next
        refresh. Returns the learner's settings after the change."""
        return self._changes.set_settings(changes, actor)

    def posteriors(self) -> list[ArmView]:
        """Every known arm's posterior, highest mean first."""
        return self._reports.posteriors()

    def summary(self) -> Summary:
        return self._reports.summary()[0]

    def recall_of(self, runs: Iterable[RunRecord]) -> float | None:
        """The estimated recall of these runs alone (engine.reports)."""
        return self._reports.recall_of(runs)

    def starved_arms(
        self, counts: Mapping[str, tuple[int, int, int]] | None = None
    ) -> list[StarvedArm]:
        """Useful arms that selection now leaves out of nearly every run (engine.starvation)."""
        return self._reports.starved_arms(counts)

    def status(self, top: int = 5) -> Status:
        """Phase, settings, traces since the last full reset, savings, best and worst arms
        (seed arms are never candidates for exclusion, so the bottom list leaves them out)."""
        return self._reports.status(top)

    def traces(self, limit: int = 100, offset: int = 0) -> tuple[list[RunRecord], int]:
        """A page of traces, newest first, and the total number stored."""
        return self._history.traces(limit, offset)

    def trace_pieces(
        self, limit: int = 100, offset: int = 0
    ) -> tuple[Iterator[list[RunRecord]], int]:
        """The page `traces` answers, read lazily in pieces (a streamed answer), and the total."""
        return self._history.trace_pieces(limit, offset)

    def iter_traces(self, *, with_arms: bool = True) -> Iterator[RunRecord]:
        """Every trace, oldest first, read in pieces bounded by their size in memory
        (exports); `with_arms` off leaves the arm outcomes unread."""
        return self._history.iter_traces(with_arms)

    def timeseries(
        self,
        metric: str = "tokens",
        window: str = "1h",
        buckets: int = 48,
        *,
        at: int | None = None,
    ) -> list[TimeBucket]:
        """Average tokens per run in each window (`tokens`), their sum (`totalTokens`), each
        arm's posterior mean at the end of each window (`convergence`), or the mean prompt cost
        per session of baseline and of selected sessions started in each window
        (`sessionCost`, input-token units priced with the learner's price table); the last
        `buckets` windows up to `at` (Unix ms, else the service's wall clock) and any later."""
        return self._history.timeseries(metric, window, buckets, at)

    def check_ready(self) -> None:
        """Read the learner's state row (one small query): Unavailable when storage does not
        answer or its schema is not at the revision this code needs."""
        self.store.learner_state(self.learner_id)

    def cache_age(self) -> float | None:
        """Seconds since the cached posteriors were last read or checked (None: never)."""
        return self._learner.cache_age()

    def spool_health(self) -> dict[str, Any] | None:
        """The spool's state (pending runs, bytes, full, dead letters), or None without one."""
        return None if self.spool is None else self.spool.health()

    def verify(self) -> VerifyReport:
        """Posteriors equal to their priors plus observations since reset, traces whole."""
        return self.store.verify(self.learner_id)
