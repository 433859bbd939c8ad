"""LearningService: the use cases every surface and every agent runtime calls.

select, observe, reward, reset, phase and the reads of status, over a `Store`. Posteriors are
served from a `PosteriorCache`: this process's own writes are applied to it as they commit,
other replicas' writes are picked up within `cache_ttl` seconds by a one-row version check.
The service starts no thread and does no I/O of its own: the store does the I/O, and a
`schedule` callable given by the composition root decides where a background refresh runs.
"""

from __future__ import annotations

import contextlib
import heapq
import json
import logging
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # numpy is imported on first selection, not at start-up
    import numpy as np

    from learning_bot.engine.context import RequestContext
    from learning_bot.engine.context_policy import ContextEvidence, ContextSettings
    from learning_bot.engine.exploration import ExplorationBound, OwedTries
    from learning_bot.engine.inventory import ArmSet
    from learning_bot.engine.recall_levels import SharedLevels
    from learning_bot.engine.selection import Selection

from learning_bot.engine.arms import Arm, parse_arm_id
from learning_bot.engine.bounds import (
    MAX_ACTOR_CHARS,
    MAX_PAGE,
    MAX_REASON_CHARS,
    MAX_RESET_ARMS,
    check_json,
    check_text,
)
from learning_bot.engine.cache import CachedArm, PosteriorCache
from learning_bot.engine.config import LearningConfig, Phase
from learning_bot.engine.cost import PriceTable
from learning_bot.engine.errors import (
    Conflict,
    InvalidConfig,
    InvalidInput,
    NotFound,
    Unavailable,
)
from learning_bot.engine.feature_words import DisplayWords
from learning_bot.engine.forgetting import Fold, keep_factor
from learning_bot.engine.metrics import estimated_recall, usefulness_estimates
from learning_bot.engine.observation import (
    MAX_ID_CHARS,
    RunOutcome,
    RunReport,
    SkipReason,
    Usage,
    observation_guard,
    rewards_for_run,
)
from learning_bot.engine.ports import (
    ArmOutcome,
    ArmOutcomeWriter,
    ArmRecord,
    ContextStore,
    EvidenceSpooler,
    LearnerChanged,
    LearnerState,
    LeftOutRuns,
    PendingArmOutcome,
    RecordResult,
    ResetRecord,
    RewardChange,
    RunSessions,
    RunWriter,
    SessionDecisionCounts,
    SessionUsages,
    SessionUsageSince,
    SpoolHealth,
    Store,
    TimeBucket,
    VerifyReport,
)
from learning_bot.engine.posterior import WallClock, check_reward, initial_prior, now_ms
from learning_bot.engine.records import ArmOutcomeRecord, RunRecord, record_from_report, under_phase
from learning_bot.engine.resolve import MAX_QUERY_CHARS, resolve_arm_query
from learning_bot.engine.savings import CostSavings, cost_savings, cost_series, price_sessions
from learning_bot.engine.session_selection import (
    SessionSelector,
    keyed,
    session_key_of,
    session_request,
)
from learning_bot.engine.starvation import STARVATION_WINDOW, StarvedArm, starved_arms
from learning_bot.engine.starvation import ArmRecord as StarvationArm
from learning_bot.engine.text import strip_controls
from learning_bot.engine.views import (
    ArmView,
    ObserveResult,
    PhaseChange,
    ResetResult,
    RewardResult,
    Status,
    Summary,
    summarise,
)

log = logging.getLogger("learning_bot.engine")

MIN_TRACES_FOR_ACTIVE = 50
"""Switching to the active phase with fewer traces than this warns."""
WINDOWS = {"1h": 3_600_000, "1d": 86_400_000}
TIMESERIES_METRICS = ("tokens", "totalTokens", "convergence", "sessionCost")

_REWARD_WORDS = {"good": 1.0, "bad": 0.0, "accepted": 1.0, "rejected": 0.0}

RECORD_ATTEMPTS = 4
"""Writes of one observe before it gives up while the learner's phase or settings keep
changing under it (each refused write rebuilds the runs under the state read again)."""

Schedule = Callable[[Callable[[], None]], None]
"""Runs a callable soon, somewhere that does not make the caller wait."""
SpoolByName = Callable[[str, Sequence[RunRecord]], RecordResult]
"""Keeps runs for a learner not opened yet (storage down since start), by its name."""


def _request_of(context: Mapping[str, Any] | None) -> RequestContext | None:
    """The request context a select carries (checked), or None without one."""
    if not context:
        return None
    from learning_bot.engine.context import RequestContext

    return RequestContext.of(context)


def _stored(context: Mapping[str, Any]) -> dict[str, Any]:
    """A context as a run keeps it: never the message text (engine.context)."""
    if "message" not in context:
        return dict(context)
    from learning_bot.engine.context import stored_context

    return stored_context(context)


def _with_loaded(report: RunReport) -> RunReport:
    """The report as observed: the deferred arms the model loaded through tool search
    (`context.loaded`) count as included, so a loaded arm the model used is referenced, and the
    message text is not stored."""
    context = report.context
    if not context:
        return report
    from learning_bot.engine.context import loaded_arms

    loaded = set(loaded_arms(context))
    arms = report.arms
    if loaded:
        arms = tuple(
            replace(item, included=True)
            if not item.included and (item.arm.id in loaded or item.arm.name in loaded)
            else item
            for item in arms
        )
    if "message" not in context and arms is report.arms:
        return report
    return replace(report, arms=arms, context=_stored(context))


def reward_value(value: str | float | int) -> float:
    """1 / 0 / good / bad / accepted / rejected, or a number in [0, 1]."""
    if isinstance(value, str):
        word = value.strip().lower()
        if word in _REWARD_WORDS:
            return _REWARD_WORDS[word]
        try:
            number = float(word)
        except ValueError:
            raise InvalidInput(
                f"reward value {value[:40]!r} is not 1, 0, good, bad or a number in [0, 1]"
            ) from None
        return check_reward(number)
    return check_reward(value)


def clean_text(name: str, value: str | None, limit: int) -> str | None:
    """A free text (actor, reason) with control characters made spaces; None when empty."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidInput(f"{name} must be a string")
    cleaned = strip_controls(value).strip()
    if len(cleaned) > limit:
        raise InvalidInput(f"{name} is longer than {limit} characters")
    return cleaned or None


def recorded_actor(actor: str | None) -> str:
    """Who made a change, as it is recorded: cleaned as `clean_text` cleans, "unknown" when
    empty."""
    return clean_text("actor", actor, MAX_ACTOR_CHARS) or "unknown"


RECALL_WINDOW = 300
"""The estimated recall reads the inclusion rates of this many latest selected runs: recent
enough that the posteriors describe the same usage (after a change in usage, a longer window
mixes runs from before it with posteriors that have moved on)."""


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
        writer: RunWriter | None = None,
        schedule: Schedule | None = None,
        spool_by_name: SpoolByName | None = None,
        spool: SpoolHealth | None = None,
        prices: PriceTable | None = None,
        wall_clock: WallClock = now_ms,
        context_settings: ContextSettings | None = None,
        exploration_bound: ExplorationBound | None = None,
    ) -> None:
        self.store = store
        self.spool = spool
        """The local spool the writer keeps runs in while storage is down, whose state healthz
        reports (None: runs are not spooled)."""
        self.writer: RunWriter = writer if writer is not None else store
        self.base_config = config if config is not None else LearningConfig()
        self.learner = learner
        self.cache_ttl = cache_ttl
        self._clock = clock
        self._wall_clock = wall_clock
        from learning_bot.engine.learner_view import CachedLearnerView

        self._session_sets = SessionSelector(
            store,
            lambda: self.learner_id,
            cache_ttl,
            clock,
            wall_clock,
            CachedLearnerView(lambda: self._cache, store, lambda: self.learner_id, clock),
            lambda: self.prices,
        )
        """Milliseconds since the epoch that session idle windows are counted in (a simulation
        passes its own time)."""
        self._schedule = schedule
        self._rng_seed = rng
        self._rng_made: np.random.Generator | None = None
        self._cache = PosteriorCache()
        self._refreshing = False
        self._spool_by_name = spool_by_name
        self._learner_id: int | None = None
        self.prices = prices if prices is not None else PriceTable()
        """Token prices the measured cost saving is priced with (engine.cost)."""
        self._keep = keep_factor(self.base_config.half_life)
        self._settings = self.base_config
        """The learner's settings (its stored ones once opened; the phase is the cache's)."""
        self._built_under: str | None = None
        """The stored settings `_settings` were taken from, as JSON ("null": the learner has
        none; None before it is opened): what observed runs are built under, which storage
        checks as it writes them. Set after `_settings`, read before it."""
        self.context_settings = context_settings
        """How the context-aware draw weighs lexical relevance and per-feature evidence
        (engine.context_policy); None: the defaults."""
        self._evidence: ContextEvidence | None = None
        self._evidence_checked_at = float("-inf")
        """When the stored evidence count was last compared with the one `_evidence` holds."""
        self._evidence_synced = 0
        """The stored evidence count up to which `_evidence` holds every replica's writes."""
        self._evidence_generation = 0
        """The stored evidence generation `_evidence` was read at (resets and undos move it)."""
        self._owed: OwedTries | None = None
        self._owed_synced_at = float("-inf")
        self._owed_runs: int | None = None
        """The learner's stored runs as of the exploration bound's last read, plus the runs
        this process stored since: when storage holds no others, its count is the learner's."""
        self._target_levels_made: SharedLevels | None = None
        """The recall target's calibration: baseline sessions' uses (engine.recall_target), kept
        in storage (engine.recall_levels), made on first use (numpy is imported on first
        selection, not at start-up)."""
        self._exploration_bound = exploration_bound
        self._deferrals: dict[str, tuple[int, int]] = {}
        """Per tool: runs that deferred it, runs that loaded it (this process's count, for a
        store that does not keep them)."""
        self._written = DisplayWords()
        """The forms message words were written in, for explanations (engine.feature_words)."""
        self.settings_differ: str | None = None
        """Set when the learner's stored settings differ from this process's configuration:
        which, and how to change them."""
        try:
            self._open()
        except Unavailable:
            if spool_by_name is None:
                raise
            self._cache.phase = self.base_config.phase  # the configured one, until opened
            # Storage is down: select falls back to every arm and observe spools under the
            # learner's name until the learner can be opened (or created).

    def _open(self) -> int:
        """Open (or create) the learner. A learner's settings are its own state (SPEC section
        4a): this process's configuration gives those of a learner it creates; an existing
        learner keeps what it stored, and a difference is reported once (`settings_differ`),
        never written: opening a learner writes nothing but a new learner's row."""
        base = self.base_config
        state = self.store.open_learner(
            self.learner, base.phase, base.learner_settings(), base.half_life
        )
        self._learner_id = state.id
        self._cache.phase = state.phase
        self._adopt(state)
        ours, theirs = base.learner_settings(), self._settings.learner_settings()
        if ours != theirs:
            stored = self._settings.to_dict(complete=True)
            configured = base.to_dict(complete=True)
            changed = sorted(k for k in ours.keys() | theirs.keys() if ours.get(k) != theirs.get(k))
            shown = ", ".join(
                f"{k} {stored.get(k)!r} (configured here: {configured.get(k)!r})" for k in changed
            )
            self.settings_differ = (
                f"learner {self.learner!r} keeps its stored settings: {shown}; "
                "`learning-bot learner set` changes them"
            )
            log.warning("%s", self.settings_differ)
        return state.id

    def _adopt(self, state: LearnerState) -> None:
        """Take the learner's stored settings and half-life as the ones selection and the
        cache use (the half-life is what storage forgets with, so cached posteriors equal
        stored ones)."""
        if state.settings is not None:
            self._settings = self.base_config.with_learner_settings(state.settings, state.phase)
        else:  # a learner made before settings were stored: the process's, its half-life
            self._settings = replace(self.base_config, half_life=state.half_life)
        self._keep = keep_factor(state.half_life)
        stored = dict(state.settings) if state.settings is not None else None
        self._built_under = json.dumps(stored, sort_keys=True, separators=(",", ":"))

    def set_settings(
        self, changes: Mapping[str, Any], *, actor: str | None = None
    ) -> LearningConfig:
        """Change the learner's stored settings (camelCase or snake_case keys, as the config
        file takes them; the phase has its own command). Every replica takes them at its next
        refresh. Returns the learner's settings after the change."""
        if not isinstance(changes, Mapping) or not changes:
            raise InvalidInput("settings: give at least one setting to change")
        if "phase" in changes:
            raise InvalidInput("phase: change it with the phase command")
        recorded_actor(actor)
        self.refresh(force=True)
        try:
            updated = self._settings.merged(changes)
        except InvalidConfig as exc:
            raise InvalidInput(f"{exc.field}: {exc.detail}") from None
        self.store.set_settings(
            self.learner_id, updated.learner_settings(), updated.half_life, at=self._wall_clock()
        )
        self.refresh(force=True)
        return self.config

    @property
    def learner_id(self) -> int:
        """The learner's id in storage (opened on first use after an outage at start)."""
        if self._learner_id is None:
            return self._open()
        return self._learner_id

    # -- cache ----------------------------------------------------------------------------------

    @property
    def config(self) -> LearningConfig:
        """The learner's settings with its current phase."""
        phase = self._cache.phase
        settings = self._settings
        if settings.phase is phase:
            return settings
        return replace(settings, phase=phase)

    def refresh(self, force: bool = False) -> None:
        """Bring the cache up to date if it is older than cache_ttl (or always, with force:
        then read again while local writes keep `install` refusing the read, a few times;
        the phase is taken whatever happens, and a refused read is read again at next use)."""
        cache = self._cache
        for _ in range(RECORD_ATTEMPTS):
            now = self._clock()
            if not force and not cache.stale and now - cache.checked_at < self.cache_ttl:
                return
            generation = cache.generation
            state: LearnerState = self.store.learner_state(self.learner_id)
            self._adopt(state)
            reload = force or cache.stale or state.version != cache.version
            # Read outside the lock, so selections keep using the old cache meanwhile; a local
            # write under way or applied in between makes `install` refuse this read.
            records = self.store.load_arms(self.learner_id) if reload else None
            if cache.install(state.phase, state.version, records, generation, now) or not force:
                return

    def _refresh_quietly(self) -> None:
        try:
            self.refresh()
        except Unavailable:  # storage down: keep selecting from the cache
            self._cache.checked_at = self._clock()
        finally:
            self._refreshing = False

    def _refresh_later(self) -> None:
        """Refresh without making the caller wait when a scheduler was given (selection
        must stay fast even when storage is slow); one refresh at a time."""
        with self._cache.lock:
            if self._refreshing:
                return
            self._refreshing = True
        if self._schedule is not None:
            self._schedule(self._refresh_quietly)
        else:
            self._refresh_quietly()

    def seed_draws(self, seed: int) -> None:
        """Make this service's random draws (Thompson samples, baseline coins) repeatable from
        `seed` from now on: a simulation with a seed selects the same way each time."""
        self._rng_seed = seed
        self._rng_made = None

    @property
    def _target_levels(self) -> SharedLevels:
        if self._target_levels_made is None:
            from learning_bot.engine.recall_levels import SharedLevels

            self._target_levels_made = SharedLevels(
                self.store,
                lambda: self.learner_id,
                self._clock,
                self._wall_clock,
                self._schedule,
            )
        return self._target_levels_made

    @property
    def _rng(self) -> np.random.Generator:
        if self._rng_made is None:
            from learning_bot.engine.draws import as_generator

            self._rng_made = as_generator(self._rng_seed)
        return self._rng_made

    # -- select / observe -------------------------------------------------------------------

    @property
    def selects_in_memory(self) -> bool:
        """Whether `select` can answer from the cached posteriors without reading storage
        first (the cache is younger than cache_ttl)."""
        cache = self._cache
        if cache.stale:
            return False
        return self._clock() - cache.checked_at < self.cache_ttl

    def select(
        self,
        arms: Sequence[Arm] | ArmSet,
        context: Mapping[str, Any] | None = None,
        *,
        session_key: str | None = None,
    ) -> Selection:
        """Choose the arms of the next prompt. Passive phase: every arm.

        A session key (`session_key`, or `context["session_key"]`) makes the selection
        session-stable (SPEC section 4a): the session's first select decides, its later ones
        answer the same arms in the same order while it stays within `session_idle_seconds`.
        Without one every select draws anew, which under a provider's prompt cache makes
        each request a cache miss (README, "Sessions and cost").

        When storage cannot be reached the run still goes ahead with every arm included, and
        the Selection's `fallback` says why.
        """
        from learning_bot.engine.inventory import ArmSet
        from learning_bot.engine.selection import include_everything

        cache = self._cache
        arm_set = ArmSet.of(arms)
        if cache.stale:
            try:
                self.refresh()
            except Unavailable as exc:
                if not cache.arms:
                    reason = f"storage unavailable: {exc}"
                    return include_everything(arm_set, self._settings, reason)
        elif self._clock() - cache.checked_at >= self.cache_ttl:
            # Never answer from a cache older than cache_ttl: a phase change, reset, undo or
            # settings change made on another replica is honoured by this select (the check
            # reads the learner's version, and its arms only when they changed).
            self._refresh_quietly()
        config = self.config
        key = session_key_of(context, session_key)
        request = _request_of(context)

        def draw(offered: ArmSet, settings: LearningConfig) -> Selection:
            return self._select_cached(offered, settings, request, key)

        if key and config.is_active:
            from learning_bot.engine.context import opening_features

            opening = opening_features(request.message) if request is not None else ()
            return self._session_sets.select(
                key,
                arm_set,
                config,
                draw,
                opening=opening,
                request=session_request(context),
            )
        return draw(arm_set, config)

    def _select_cached(
        self,
        arm_set: ArmSet,
        config: LearningConfig,
        request: RequestContext | None = None,
        session_key: str = "",
    ) -> Selection:
        """`select_arms` under `config`: from the cached posteriors, under the cache's lock,
        when active; passive or disabled, every arm without reading a posterior. With a
        request context the draw is the context-aware one (engine.context_policy); arms owed
        a try by the exploration bound (engine.exploration) are included."""
        from learning_bot.engine.selection import select_arms

        if not config.is_active:
            return select_arms(arm_set, None, config)
        cache = self._cache
        owed = self._owed_tries()
        force = owed.mask(arm_set)
        target = self._target_levels if config.recall_target is not None else None
        calibration = target.calibration if target is not None else None
        scores: Any = None
        if request is None:
            with cache.lock:
                post = cache.arrays(arm_set)
                chosen = select_arms(
                    arm_set, post, config, self._rng, force=force, calibration=calibration
                )
        else:
            from learning_bot.engine.context_policy import (
                ContextSettings,
                context_scores,
                lexical_index,
            )

            settings = self.context_settings or ContextSettings()
            evidence = self.context_evidence()
            # the inventory's words become nameable in explanations (engine.context_policy's
            # VOCABULARY) by any select that carries a request, a baseline draw's included
            lexical_index(arm_set)

            def scores(p: Any, c: LearningConfig, gen: np.random.Generator) -> Any:
                return context_scores(arm_set, p, request, evidence, settings, c, gen)

            with cache.lock:
                post = cache.arrays(arm_set)
                chosen = select_arms(
                    arm_set, post, config, self._rng, draw=scores, force=force,
                    calibration=calibration,
                )  # fmt: skip
        if target is not None and chosen.is_baseline and session_key:
            from learning_bot.engine.selection import opening_ranks

            with cache.lock:
                ranks = opening_ranks(arm_set, post, config, scores, force, self._rng)
            target.sessions.opened(session_key, arm_set.ids, *ranks)
        owed.included(arm_set, chosen.mask)
        return chosen

    def _owed_tries(self) -> OwedTries:
        """The exploration bound's counts: read from the stored runs on first use, and again
        at most every SYNC_SECONDS when other replicas stored runs (in the background when a
        scheduler was given), so that the bound counts every replica's runs and survives a
        restart (engine.exploration)."""
        from learning_bot.engine.exploration import SYNC_SECONDS

        owed = self._owed
        if owed is None:
            from learning_bot.engine.exploration import ExplorationBound, OwedTries

            owed = self._owed = OwedTries(self._exploration_bound or ExplorationBound())
            self._owed_synced_at = self._clock()
            self._sync_owed(first=True)
        elif self._clock() - self._owed_synced_at >= SYNC_SECONDS:
            self._owed_synced_at = self._clock()
            if self._schedule is not None:
                self._schedule(self._sync_owed)
            else:
                self._sync_owed()
        return owed

    def _sync_owed(self, first: bool = False) -> None:
        """Read the exploration bound's counts from the stored runs: on first use, and later
        when storage holds runs this process did not store (another replica's), so that a
        process alone keeps counting its own selections."""
        owed = self._owed
        store = self.store
        if owed is None or not isinstance(store, LeftOutRuns):
            return
        window = owed.bound.after_selections
        if window <= 0:
            return
        with contextlib.suppress(Unavailable):  # keep this process's counts meanwhile
            runs = store.run_stats(self.learner_id).all_time_traces
            if not first and runs == self._owed_runs:
                return
            owed.sync(store.left_out_runs(self.learner_id, window))
            self._owed_runs = runs

    def _new_evidence(self) -> ContextEvidence:
        from learning_bot.engine.context_policy import ContextEvidence, ContextSettings

        settings = self.context_settings or ContextSettings()
        return ContextEvidence(self._keep, settings.max_cells)

    def context_evidence(self) -> ContextEvidence:
        """This learner's per-feature evidence (engine.context_policy). With a store that
        keeps it (every replica adding to it), it is read from storage on first use; then a
        one-row check at most every cache_ttl seconds (the bound posteriors have) compares the
        stored evidence count and generation with the ones it reflects: another count (another
        replica observed) reads the features changed since, another generation (a reset or an
        undo) all of it."""
        evidence = self._evidence
        store = self.store
        if not isinstance(store, ContextStore):
            if evidence is None:
                evidence = self._evidence = self._new_evidence()
            return evidence
        now = self._clock()
        if evidence is not None and now - self._evidence_checked_at < self.cache_ttl:
            return evidence
        try:
            if evidence is None:
                evidence = self._load_evidence(store)
            else:
                tick, generation = store.context_evidence_state(self.learner_id)
                if generation != self._evidence_generation:
                    evidence = self._load_evidence(store)
                elif tick != evidence.tick or tick != self._evidence_synced:
                    # only the features changed since: not the whole evidence on every change
                    since = self._evidence_synced
                    cells, tick = store.context_evidence_since(self.learner_id, since)
                    with evidence.lock:
                        evidence.refresh(cells, tick)
                    self._evidence_synced = tick
        except Unavailable:  # storage down: keep what is held (or nothing yet)
            if evidence is None:
                evidence = self._evidence = self._new_evidence()
        self._evidence_checked_at = now
        return evidence

    def _load_evidence(self, store: ContextStore) -> ContextEvidence:
        """The learner's whole evidence, read from storage (first use, reset or undo)."""
        _, generation = store.context_evidence_state(self.learner_id)
        evidence = self._new_evidence()
        cells, tick = store.context_evidence(self.learner_id)
        evidence.load(cells, tick)
        self._evidence_generation = generation
        self._evidence_synced = tick
        self._evidence = evidence
        return evidence

    def context_explanation(self, arm_id: str) -> tuple[list[Any], int, int]:
        """What an arm's usefulness depends on (engine.context_policy.explain: the features
        its rate of use differs most under), and how often it was deferred in a run that
        reported tool search, and loaded then (the learner's counts, since the arm's last
        reset, when the store keeps them)."""
        from learning_bot.engine.context_policy import explain
        from learning_bot.engine.feature_words import namer

        view = self.view(arm_id)
        rewards = view.rewards if view.rewards is not None else 0.0
        store = self.store
        written = namer(self._written, store, self.learner_id)
        lifts = explain(
            self.context_evidence(), arm_id, rewards, float(view.posterior.pulls), 3, written
        )
        if isinstance(store, ContextStore):
            deferred, loaded = store.context_deferrals(self.learner_id, arm_id)
        else:
            deferred, loaded = self._deferrals.get(arm_id, (0, 0))
        return lifts, deferred, loaded

    @staticmethod
    def _count_deferrals(reports: Sequence[RunReport]) -> dict[str, tuple[int, int]]:
        """Per tool, runs that deferred it (left out, in a run whose runtime reports what it
        loaded: in its context, or by marking the arms `loaded`) and runs that loaded it."""
        from learning_bot.engine.arms import ArmType
        from learning_bot.engine.context import LOADED_KEYS, loaded_arms

        counts: dict[str, tuple[int, int]] = {}
        for report in reports:
            context = report.context
            marked = any(item.loaded for item in report.arms)
            if not marked and (not context or not any(k in context for k in LOADED_KEYS)):
                continue
            loaded = set(loaded_arms(context)) if context else set()
            for item in report.arms:
                arm = item.arm
                if item.included or arm.type is not ArmType.TOOL:
                    continue
                d, n = counts.get(arm.id, (0, 0))
                hit = item.loaded or arm.id in loaded or arm.name in loaded
                counts[arm.id] = (d + 1, n + hit)
        return counts

    def _learn_context(self, reports: Sequence[RunReport], rewards: Sequence[Any]) -> None:
        """Per-feature evidence and deferral counts from the observed runs that carried a
        request context: added in memory, and to the stored ones in one write that adds to
        what every replica wrote (storage.context_evidence). When that write finds the stored
        count ahead of this process's, another replica wrote meanwhile: the features changed
        since are read again at the evidence's next use."""
        from learning_bot.engine.context import RequestContext, written_features
        from learning_bot.engine.feature_words import share

        evidence = self.context_evidence()
        openings = {
            key: self._session_sets.opening(key)
            for key in {r.session_key for r in reports if r.session_key and r.context}
        }
        runs: list[tuple[list[int], Any]] = []
        with evidence.lock:
            before = evidence.tick
            for report, reward in zip(reports, rewards, strict=True):
                request = RequestContext.of(report.context)
                if request is not None and report.session_key:
                    # the session's set was decided on its opening: learn under it too
                    request = replace(request, opening=openings[report.session_key])
                features = request.features().tolist() if request is not None else []
                evidence.record(features, reward)
                runs.append((features, reward))
                if request is not None and request.message:
                    self._written.note(written_features(request.message))
            expected = evidence.tick
        deferrals = self._count_deferrals(reports)
        store = self.store
        if not isinstance(store, ContextStore):
            for arm_id, (d, n) in deferrals.items():
                was = self._deferrals.get(arm_id, (0, 0))
                self._deferrals[arm_id] = (was[0] + d, was[1] + n)
            return
        try:
            writer = self.writer
            if isinstance(writer, EvidenceSpooler) and writer.spooling():
                # runs wait in the spool: their evidence goes in behind them, in order
                raise Unavailable("runs wait in the spool")
            tick = store.add_context_evidence(
                self.learner_id, runs, evidence.keep, evidence.max_cells, deferrals
            )
        except Unavailable:
            self._spool_evidence(runs, evidence.keep, evidence.max_cells, deferrals)
            return
        if tick == expected and self._evidence_synced == before:
            self._evidence_synced = tick  # no other writer came in between
        else:
            self._evidence_checked_at = float("-inf")
        share(self._written, store, self.learner_id)  # storage answered: the written forms too

    def _spool_evidence(
        self,
        runs: Sequence[tuple[list[int], Any]],
        keep: float,
        max_cells: int,
        deferrals: Mapping[str, tuple[int, int]],
    ) -> None:
        """Evidence storage could not take (an outage) waits in the writer's spool behind the
        runs it came from, and is added when they are written; without a spool it is lost,
        and the next check reads storage's again."""
        from learning_bot.engine.ports import PendingEvidence

        self._evidence_checked_at = float("-inf")
        writer = self.writer
        if not isinstance(writer, EvidenceSpooler):
            return
        pending = PendingEvidence(
            tuple(
                (tuple(int(f) for f in features), tuple(sorted(dict(rewards).items())))
                for features, rewards in runs
                if features and rewards
            ),
            keep,
            max_cells,
            tuple((arm, d, n) for arm, (d, n) in sorted(deferrals.items())),
            self.config.phase,
        )
        if not pending.runs and not pending.deferrals:
            return
        with contextlib.suppress(Unavailable):  # a full spool: the runs were refused too
            writer.spool_context_evidence(self._learner_id, self.learner, pending)

    def observe(self, report: RunReport) -> ObserveResult:
        """Store the run's trace (both phases), apply the guard, update posteriors; a trace id
        seen before changes nothing and says so."""
        return self.observe_many([report])[0]

    def observe_many(self, reports: Sequence[RunReport]) -> list[ObserveResult]:
        """Observe several runs in one write (replays, imports, simulations). A trace id
        already stored, or given twice, is recorded once: the store decides which.

        The rewards follow the phase and settings this process holds (read again at most
        `cache_ttl` ago); the write checks them against the learner's in its own statement,
        and when another replica changed them meanwhile nothing is written: the learner's
        state is read again and the runs are built and written again under it."""
        if not reports:
            return []
        for report in reports:
            if not isinstance(report, RunReport):
                raise InvalidInput(f"expected a RunReport, got {type(report).__name__}")
        with contextlib.suppress(Unavailable):  # keep the cached phase; the writer spools
            self.refresh()
        asked = reports
        for report in asked:  # checked before anything is written
            _request_of(report.context)
        reports = [_with_loaded(r) for r in reports]
        for attempt in range(RECORD_ATTEMPTS):
            built_under = self._built_under  # before `config`: see _built_under
            config = self.config
            outcomes = [rewards_for_run(r, config) for r in reports]
            records = [
                record_from_report(
                    r, o, config.phase, observation_guard(r, config, ignore_phase=True)
                )
                for r, o in zip(reports, outcomes, strict=True)
            ]
            recorded: RecordResult | None = None
            with self._cache.writing():  # a reload read meanwhile would count these twice
                with contextlib.suppress(LearnerChanged):
                    recorded = self._record_runs(records, built_under)
                if recorded is not None:
                    self._apply_rewards(outcomes, recorded.statuses)
            if recorded is not None:
                result = recorded
                break
            if attempt == RECORD_ATTEMPTS - 1:
                raise Conflict(
                    "the runs could not be recorded: the learner's phase or settings kept "
                    "changing; try again"
                )
            with contextlib.suppress(Unavailable):  # else the writer tells again
                self.refresh(force=True)
        out: list[ObserveResult] = []
        for report, outcome, status in zip(reports, outcomes, result.statuses, strict=True):
            new = status == "inserted"
            out.append(
                ObserveResult(
                    trace_id=report.trace_id,
                    recorded=new,
                    duplicate=status == "duplicate",
                    skipped=outcome.skipped,
                    rewards=dict(outcome.rewards) if new else {},
                    referenced=dict(outcome.referenced),
                    spooled=status == "spooled",
                    ambiguous=dict(outcome.ambiguous),
                )
            )
        if self._owed_runs is not None:  # the exploration bound's count of stored runs
            self._owed_runs += sum(status == "inserted" for status in result.statuses)
        # a spooled run teaches too: its evidence waits in the spool behind it (_spool_evidence)
        learned = [
            (r, o.rewards)
            for r, o, status in zip(asked, outcomes, result.statuses, strict=True)
            if status in ("inserted", "spooled") and r.context
        ]
        if learned:
            self._learn_context([r for r, _ in learned], [w for _, w in learned])
        if config.recall_target is not None:  # a baseline session's uses calibrate the target
            for run, ran, stored in zip(asked, outcomes, result.statuses, strict=True):
                if run.session_key and stored in ("inserted", "spooled"):
                    used = [a for a, reward in ran.rewards.items() if reward == 1.0]
                    self._target_levels.observed(run.session_key, used)
        if config.is_active:
            self._session_sets.note_runs(asked)
            self._session_sets.grow(asked, config)
        self._first_seen((item.arm.id for r in reports for item in r.arms), config)
        return out

    def _apply_rewards(self, outcomes: Sequence[RunOutcome], statuses: Sequence[str]) -> None:
        """The rewards of the runs just inserted, applied to the cached posteriors."""
        folds: dict[str, Fold] = {}
        keep = self._keep
        for outcome, status in zip(outcomes, statuses, strict=True):
            if status != "inserted":
                continue
            for arm_id, r in outcome.rewards.items():
                f = folds.get(arm_id)
                if f is None:
                    f = folds[arm_id] = Fold()
                f.add(r, keep)
        if folds:
            self._cache.apply({a: f.as_tuple() for a, f in folds.items()}, self._wall_clock())

    def _record_runs(
        self, records: Sequence[RunRecord], built_under: str | None = None
    ) -> RecordResult:
        """Write runs through the writer (which spools them while storage is down), or, for a
        learner storage has not opened yet (down since start), spool them by its name.
        `built_under`: the stored settings (JSON) the runs were built under, which the write
        checks with their phase (None: only the phase). LearnerChanged: nothing was written."""
        spool = self._spool_by_name
        if self._learner_id is None and spool is not None:
            try:
                self._open()
            except Unavailable:  # storage down since start: keep the runs by learner name
                return spool(self.learner, records)
        return self.writer.record_runs(self.learner_id, records, built_under)

    def _record_selection(self, record: RunRecord) -> None:
        """Record a run at selection time (`select_run`) under the learner's phase: when
        another replica changed it since this process last read it, the learner's state is
        read again and the run, which holds no reward yet, is recorded under its phase."""
        for _ in range(RECORD_ATTEMPTS):
            try:
                self._record_runs([record])
                return
            except LearnerChanged as changed:
                with contextlib.suppress(Unavailable):
                    self.refresh(force=True)
                record = under_phase(record, changed.phase)
        raise Conflict("the run could not be recorded: the learner's phase kept changing")

    def _first_seen(self, arm_ids: Iterable[str], config: LearningConfig) -> None:
        """Arms the cache does not hold yet: the seeds among them get `seed_boost`, and the
        cache reloads so that they show."""
        known = self._cache.arms
        new_ids = {arm_id for arm_id in arm_ids if arm_id not in known}
        if new_ids:
            self._boost_seeds(new_ids, config)
            self._cache.invalidate(reload=True)

    def _boost_seeds(self, new_ids: Iterable[str], config: LearningConfig) -> None:
        """With `seed_boost`, seed arms this learner sees for the first time start at
        Beta(seed_boost, 1)."""
        boost = config.seed_boost
        if boost is None:
            return
        seeds = sorted(set(new_ids) & set(config.seed_arm_ids))
        store = self.store
        if seeds and isinstance(store, RunSessions):
            store.boost_priors(self.learner_id, seeds, boost)

    # -- runs completed arm by arm (agent gateways that report one outcome per arm) ------------

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
        selection and the run's trace id. The run's usage is the token cost of the selected
        arms (what the caller is known to send); it reads as conversational until its first
        outcome arrives."""
        from learning_bot.engine.inventory import ArmSet

        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise InvalidInput(f"k must be a whole number >= 0, got {k!r}")
        context_map = dict(context or {})
        check_json("context", context_map)
        request = _request_of(context_map)
        keys = {"session_key": session_key, "channel": channel}
        keys.update(provider=provider, model=model)
        for name, value in keys.items():
            check_text(name, value, MAX_ID_CHARS)
        changes: dict[str, Any] = {}
        if token_budget is not None:
            changes["token_budget"] = token_budget
        if min_pulls is not None:
            changes["min_pulls"] = min_pulls
        if seed_arm_ids is not None:
            changes["seed_arm_ids"] = tuple(seed_arm_ids)
        if seed_boost is not None:
            changes["seed_boost"] = seed_boost
        unavailable: str | None = None
        try:
            self.refresh()
        except Unavailable as exc:  # the cached phase; the writer spools
            if not self._cache.arms:  # nothing to select from: every arm, as `select` does
                unavailable = f"storage unavailable: {exc}"
        try:
            config = self.config.merged(changes)
        except InvalidConfig as exc:
            raise InvalidInput(f"{exc.field}: {exc.detail}") from None
        arm_set = ArmSet(arms)

        def draw(offered: ArmSet, settings: LearningConfig) -> Selection:
            # a baseline session's uses calibrate a recall target when it offers every arm
            chosen = self._select_cached(offered, settings, request, "" if k else session_key or "")
            if settings.is_active and 0 < k < len(chosen.selected):
                chosen = self._cap(offered, chosen, k, settings)
            return chosen

        if unavailable is not None:
            from learning_bot.engine.selection import include_everything

            selection = include_everything(arm_set, config, unavailable)
        elif session_key and config.is_active:
            # A caller that asks with other per-call options asks for another selection: the
            # session's set is kept per set of options (a gateway sends the same every turn).
            key = session_key if not changes and not k else keyed(session_key, changes, k)
            # a cap of k arms holds in a baseline session too
            from learning_bot.engine.context import opening_features

            selection = self._session_sets.select(
                key,
                arm_set,
                config,
                draw,
                full_baseline=not k,
                opening=opening_features(request.message) if request is not None else (),
                request=session_request(context_map, provider, model),
            )
        else:
            selection = draw(arm_set, config)
        chosen = set(selection.selected)
        trace_id = f"sel-{uuid.uuid4().hex}"
        outcomes = tuple(
            ArmOutcomeRecord(a.id, a.label, a.id in chosen, False, a.token_cost, None)
            for a in arm_set.arms
        )
        record = RunRecord(
            trace_id=trace_id,
            run_id=trace_id,
            session_id=session_key,
            session_key=session_key,
            channel=channel,
            conversation=session_key,
            timestamp=self._wall_clock(),
            provider=provider,
            model=model,
            is_baseline=selection.is_baseline,
            phase=config.phase,
            guard=SkipReason.CONVERSATIONAL,
            usage=Usage(input=selection.used_tokens),
            duration_ms=0,
            system_prompt_chars=0,
            aborted=False,
            error=None,
            context=_stored(context_map),
            arms=outcomes,
        )
        self._record_selection(record)
        with contextlib.suppress(Unavailable):  # a seed boost waits for storage
            self._first_seen(arm_set.ids, config)
        return selection, trace_id

    def _cap(
        self, arm_set: ArmSet, selection: Selection, k: int, config: LearningConfig
    ) -> Selection:
        """At most k of the selected arms: forced ones (seeds, under-explored) first, then by
        posterior mean; seeds stay even past k."""
        from learning_bot.engine.selection import Selection

        seeds = set(config.seed_arm_ids)
        known = self._cache.arms
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
        if not isinstance(loaded, bool):
            raise InvalidInput("loaded must be true or false")
        parse_arm_id(arm_id)
        r = check_reward(reward)
        check_text("session_key", session_key, MAX_ID_CHARS)
        store = self.store
        if not isinstance(store, RunSessions):
            raise Unavailable("this store cannot record per-arm outcomes")
        with contextlib.suppress(Unavailable):
            self.refresh()
        key = f"arm-outcome:{uuid.uuid4().hex}"
        for attempt in range(RECORD_ATTEMPTS):
            # the write checks the learner's phase in its own transaction: one changed on
            # another replica since this process read it writes nothing, and is read again
            try:
                update = self.config.is_active
                at = self._wall_clock()
                with self._cache.writing():  # a reload read meanwhile would count it twice
                    outcome = self._record_arm_outcome(
                        arm_id, r, referenced, session_key, update, at, key, loaded
                    )
                    if update and not outcome.spooled:
                        self._cache.apply({arm_id: (r, 1.0 - r, 1.0, self._keep, r)}, at)
                break
            except LearnerChanged:
                if attempt == RECORD_ATTEMPTS - 1:
                    raise Conflict(
                        "the outcome could not be recorded: the learner's phase kept changing; "
                        "try again"
                    ) from None
                with contextlib.suppress(Unavailable):
                    self.refresh(force=True)
        if outcome.spooled:
            return outcome
        if not update and arm_id not in self._cache.arms:
            self._cache.invalidate(reload=True)
        return outcome

    def _record_arm_outcome(
        self,
        arm_id: str,
        r: float,
        referenced: bool,
        session_key: str,
        update: bool,
        at: int,
        key: str,
        loaded: bool = False,
    ) -> ArmOutcome:
        """One attempt of observe_arm's write, under this process's phase (LearnerChanged when
        the stored one differs); spooled (the outcome says so) while storage is down."""
        store = self.store
        assert isinstance(store, RunSessions)
        writer = self.writer
        phase = self.config.phase
        if isinstance(writer, ArmOutcomeWriter):  # spools the outcome while storage is down
            learner_id = self._learner_id
            if learner_id is None:
                with contextlib.suppress(Unavailable):
                    learner_id = self._open()
            pending = PendingArmOutcome(
                arm_id, r, referenced, session_key or None, update, at, key, phase, loaded
            )
            recorded = writer.record_or_spool_arm_outcome(learner_id, self.learner, pending)
            if recorded is None:
                entry = self._cache.arms.get(arm_id)
                known = entry.posterior() if entry is not None else initial_prior(arm_id)
                return ArmOutcome(arm_id, known, None, False, spooled=True)
            return recorded
        return store.record_arm_outcome(
            self.learner_id,
            arm_id,
            r,
            referenced=referenced,
            conversation=session_key or None,
            apply_reward=update,
            at=at,
            phase=phase,
            loaded=loaded,
        )

    def session_runs(self, session_key: str, since: int) -> list[RunRecord]:
        """The runs `select_run` recorded for `session_key` from `since` (ms) on."""
        check_text("session_key", session_key, MAX_ID_CHARS)
        store = self.store
        if not isinstance(store, RunSessions):
            raise Unavailable("this store cannot list a session's runs")
        return store.conversation_runs(self.learner_id, session_key, since)

    # -- reward ---------------------------------------------------------------------------------

    def arms(self) -> dict[str, ArmRecord]:
        """Every arm this learner knows, read fresh from storage."""
        self.refresh(force=True)
        return {aid: entry.record(aid) for aid, entry in self._cache.arms.items()}

    def resolve_arm(self, query: str) -> str:
        """An arm id from a full id or a label: exact id, then exact last segment or label,
        then a unique case-insensitive substring. Ambiguous -> Ambiguous listing candidates.

        Resolves against the cached arms and reads storage again only when nothing matches
        (an arm another replica just saw)."""
        if not isinstance(query, str) or not query.strip():
            raise InvalidInput("arm id or label is empty")
        query = query.strip()
        if len(query) > MAX_QUERY_CHARS:
            raise InvalidInput(f"arm id or label is longer than {MAX_QUERY_CHARS} characters")
        if self._cache.stale:
            self.refresh()
        try:
            return resolve_arm_query(query, self._cache.labels())
        except NotFound:
            self.refresh(force=True)
            return resolve_arm_query(query, self._cache.labels())

    def view(self, arm_id: str) -> ArmView:
        """One arm's posterior as status shows it."""
        if self._cache.stale:
            self.refresh()
        entry = self._cache.arms.get(arm_id)
        if entry is None:
            raise NotFound(f"unknown arm {arm_id!r}")
        config = self.config
        return self._view(arm_id, entry, config, set(config.seed_arm_ids))

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
        r = reward_value(value)
        actor_text = recorded_actor(actor)
        reason_text = clean_text("reason", reason, MAX_REASON_CHARS)
        trace_id: str | None = None
        if arm is not None:
            arm_ids: tuple[str, ...] = (self.resolve_arm(arm),)
        else:
            if not conversation:
                raise InvalidInput("name an arm, or reward from a conversation with a recent run")
            trace = self.store.latest_run(self.learner_id, conversation)
            if trace is None:
                raise NotFound(
                    "no run has been recorded in this conversation yet; name an arm instead"
                )
            arm_ids = tuple(a.arm_id for a in trace.arms if a.included and a.referenced)
            if not arm_ids:
                raise NotFound(
                    f"the latest run here ({trace.trace_id}) used no arms; name an arm instead"
                )
            trace_id = trace.trace_id
        at = self._wall_clock()
        with self._cache.writing():  # a reload read meanwhile would count it twice
            self.store.record_rewards(
                self.learner_id,
                [RewardChange(a, r) for a in arm_ids],
                actor=actor_text,
                reason=reason_text,
                trace_id=trace_id,
                at=at,
            )
            self._cache.apply(dict.fromkeys(arm_ids, (r, 1.0 - r, 1.0, self._keep, r)), at)
        if self._cache.stale:  # arms this process had not loaded yet
            self.refresh()
        views = tuple(self.view(a) for a in arm_ids if a in self._cache.arms)
        return RewardResult(arm_ids, r, actor_text, reason_text, trace_id, arms=views)

    # -- reset and phase --------------------------------------------------------------------

    def reset(self, arm_ids: Iterable[str] | None = None, actor: str = "unknown") -> ResetResult:
        """Every arm (or the listed ones, by id or label) back to Beta(1, 1) with zero pulls."""
        actor_text = recorded_actor(actor)
        ids: list[str] | None = None
        if arm_ids is not None:
            requested = list(arm_ids)
            if not requested:
                raise InvalidInput("no arms named; say `all` to reset every arm")
            if len(requested) > MAX_RESET_ARMS:
                raise InvalidInput(f"at most {MAX_RESET_ARMS} arms per reset")
            ids = sorted({self.resolve_arm(a) for a in requested})
        record = self.store.reset(self.learner_id, ids, actor=actor_text, at=self._wall_clock())
        self._evidence_checked_at = float("-inf")  # the reset cleared the arms' evidence
        self._cache.invalidate(reload=True)
        return ResetResult(self.learner, record.reset_id, record.arm_ids, record.all_arms)

    def undo_reset(self, actor: str = "unknown") -> ResetResult:
        """Restore the posteriors the last reset replaced, keeping what was learnt since."""
        actor_text = recorded_actor(actor)
        record = self.store.undo_reset(self.learner_id, actor=actor_text, at=self._wall_clock())
        self._evidence_checked_at = float("-inf")  # and put back the evidence it cleared
        self._cache.invalidate(reload=True)
        return ResetResult(
            self.learner, record.reset_id, record.arm_ids, record.all_arms, undone=True
        )

    def last_reset(self) -> ResetRecord | None:
        return self.store.last_reset(self.learner_id)

    def phase(self) -> Phase:
        self.refresh(force=True)
        return self._cache.phase

    def set_phase(
        self, phase: Phase | str, actor: str = "unknown", bootstrap: bool = True
    ) -> PhaseChange:
        """Switch phase. Switching to active warns under 50 traces and, with `bootstrap`,
        folds the traces recorded while passive into the posteriors."""
        try:
            target = Phase(phase.strip().lower() if isinstance(phase, str) else phase)
        except ValueError:
            raise InvalidInput(
                f"unknown phase {str(phase)[:40]!r}; expected passive or active"
            ) from None
        actor_text = recorded_actor(actor)
        current = self.phase()
        if current is target:
            return PhaseChange(current, target, False, None)
        warning = None
        if target is Phase.ACTIVE:
            traces = self.store.run_stats(self.learner_id).trace_count
            if traces < MIN_TRACES_FOR_ACTIVE:
                warning = (
                    f"only {traces} trace(s) recorded; posteriors are mostly priors until about "
                    f"{MIN_TRACES_FOR_ACTIVE} traces"
                )
        change = self.store.set_phase(
            self.learner_id, target, actor=actor_text, bootstrap=bootstrap, at=self._wall_clock()
        )
        self._cache.invalidate(reload=True)
        return PhaseChange(
            change.previous,
            target,
            True,
            warning,
            change.bootstrapped_traces,
            change.bootstrapped_observations,
        )

    # -- reading ------------------------------------------------------------------------------

    def posteriors(self) -> list[ArmView]:
        """Every known arm's posterior, highest mean first."""
        self.refresh()
        config = self.config
        seeds = set(config.seed_arm_ids)
        views = [self._view(a, e, config, seeds) for a, e in self._cache.arms.items()]
        views.sort(key=lambda v: (-v.mean, v.arm_id))
        return views

    @staticmethod
    def _view(arm_id: str, entry: CachedArm, config: LearningConfig, seeds: set[str]) -> ArmView:
        return ArmView(
            arm_id,
            entry.label,
            entry.cost,
            entry.posterior(),
            arm_id in seeds,
            entry.pulls < config.min_pulls,
            entry.rewards,
        )

    def summary(self) -> Summary:
        return self._summary()[0]

    def recall_of(self, runs: Iterable[RunRecord]) -> float | None:
        """The estimated recall (engine.metrics.estimated_recall) of these runs alone: their
        selected, active, unguarded runs, each left-out arm's use estimated from the arm's
        usage probability as the learner knows it now (a digest's points over its period)."""
        counts: dict[str, list[int]] = {}
        for run in runs:
            if run.is_baseline or run.phase is not Phase.ACTIVE or run.guard is not None:
                continue
            for arm in run.arms:
                c = counts.setdefault(arm.arm_id, [0, 0, 0])
                c[0] += arm.included
                c[1] += 1
                c[2] += arm.included and arm.referenced
        if not counts:
            return None
        self.refresh()
        return estimated_recall(
            self._usefulness(), {k: (v[0], v[1], v[2]) for k, v in sorted(counts.items())}
        )

    def _summary(self) -> tuple[Summary, dict[str, tuple[int, int, int]]]:
        """The summary, and the inclusion counts of the latest selected runs it read."""
        stats = self.store.run_stats(self.learner_id)
        self.refresh()
        recall = None
        counts: dict[str, tuple[int, int, int]] = {}
        if stats.selected_runs:
            counts = self.store.inclusion_counts(self.learner_id, RECALL_WINDOW)
            recall = estimated_recall(self._usefulness(), counts)
        arms = list(self._cache.arms.values())
        pulls = sum(e.pulls for e in arms)
        reward = sum(e.rewards for e in arms)
        summary = summarise(stats, len(arms), recall, pulls, reward, self._cost_savings())
        store = self.store
        if isinstance(store, SessionDecisionCounts):
            summary = replace(summary, session_decisions=store.session_decisions(self.learner_id))
        return summary, counts

    def starved_arms(
        self, counts: Mapping[str, tuple[int, int, int]] | None = None
    ) -> list[StarvedArm]:
        """Useful arms that selection now leaves out of nearly every run (engine.starvation)."""
        if counts is None:
            self.refresh()
            counts = self.store.inclusion_counts(self.learner_id, STARVATION_WINDOW)
        with self._cache.lock:
            entries = list(self._cache.arms.items())
        arms = (StarvationArm(a, e.label, e.pulls, e.rewards) for a, e in entries)
        return starved_arms(arms, counts, frozenset(self.config.seed_arm_ids))

    def _cost_savings(self) -> CostSavings | None:
        """The measured prompt-cost saving over the latest runs (engine.savings), or None
        when the store keeps no per-run usage."""
        store = self.store
        if not isinstance(store, SessionUsages):
            return None
        sessions, cached = price_sessions(store.session_usage(self.learner_id), self.prices)
        return cost_savings(sessions, cache_reported=cached)

    def _usefulness(self) -> dict[str, float]:
        """Each cached arm's estimated usage probability (engine.metrics)."""
        with self._cache.lock:
            entries = list(self._cache.arms.items())
        evidence: dict[str, tuple[float, float]] = {}
        for arm_id, e in entries:
            pa, pb = e.prior
            evidence[arm_id] = (e.alpha - pa, e.beta - pb)
        return usefulness_estimates(evidence)

    def status(self, top: int = 5) -> Status:
        """Phase, settings, traces since the last full reset, savings, best and worst arms
        (seed arms are never candidates for exclusion, so the bottom list leaves them out)."""
        if isinstance(top, bool) or not isinstance(top, int) or not 1 <= top <= 100:
            raise InvalidInput("top must be a whole number from 1 to 100")
        summary, counts = self._summary()
        config = self.config
        seeds = set(config.seed_arm_ids)
        items = list(self._cache.arms.items())

        def order(item: tuple[str, CachedArm]) -> tuple[float, str]:
            return (-item[1].mean, item[0])

        # Only the arms shown are turned into views: status stays cheap with many arms.
        best = tuple(self._view(a, e, config, seeds) for a, e in heapq.nsmallest(top, items, order))
        worst: tuple[ArmView, ...] = ()
        left_out = 0
        if len(items) > top:
            candidates = [item for item in items if item[0] not in seeds]
            left_out = len(items) - len(candidates)
            worst = tuple(
                self._view(a, e, config, seeds) for a, e in heapq.nlargest(top, candidates, order)
            )
        return Status(
            self.learner,
            config.phase,
            config,
            summary,
            best,
            worst,
            self.store.last_reset(self.learner_id),
            left_out,
            tuple(self.starved_arms()) if counts else (),
        )

    def traces(self, limit: int = 100, offset: int = 0) -> tuple[list[RunRecord], int]:
        """A page of traces, newest first, and the total number stored."""
        _check_page(limit, offset)
        return self.store.trace_page(self.learner_id, limit, offset)

    def trace_pieces(
        self, limit: int = 100, offset: int = 0
    ) -> tuple[Iterator[list[RunRecord]], int]:
        """The page `traces` answers, read lazily in pieces bounded by their size in memory
        (a streamed answer), and the total number stored."""
        _check_page(limit, offset)
        learner_id = self.learner_id
        total = self.store.run_stats(learner_id).all_time_traces
        return self.store.trace_pieces(learner_id, limit, offset), total

    def iter_traces(self, *, with_arms: bool = True) -> Iterator[RunRecord]:
        """Every trace, oldest first, read in pieces bounded by their size in memory
        (exports); `with_arms` off leaves the arm outcomes unread."""
        return self.store.iter_traces(self.learner_id, with_arms=with_arms)

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
        if window not in WINDOWS:
            raise InvalidInput(f"window must be one of {', '.join(WINDOWS)}, got {window!r}")
        if metric not in TIMESERIES_METRICS:
            raise InvalidInput(
                f"metric must be one of {', '.join(TIMESERIES_METRICS)}, got {metric!r}"
            )
        width = WINDOWS[window]
        since = ((self._wall_clock() if at is None else at) // width - buckets + 1) * width
        if metric == "sessionCost":
            store = self.store
            if not isinstance(store, SessionUsageSince):
                return []
            usages = store.session_usage_since(self.learner_id, since)
            return [
                TimeBucket(p.t, p.cost_per_session, None, p.sessions, p.group)
                for p in cost_series(usages, self.prices, width)
            ]
        rows = self.store.timeseries(
            self.learner_id, "tokens" if metric == "totalTokens" else metric, width, since
        )
        if metric == "totalTokens":
            return rows
        if metric == "tokens":  # the average per run, as the original's "Avg Tokens/Run" chart
            return [replace(r, value=r.value / r.count if r.count else 0.0) for r in rows]
        # Walk back from each arm's current posterior to its mean at the end of each window.
        self.refresh()
        by_arm: dict[str, list[TimeBucket]] = {}
        for row in rows:
            if row.arm_id is not None:
                by_arm.setdefault(row.arm_id, []).append(row)
        out: list[TimeBucket] = []
        for arm_id, arm_rows in by_arm.items():
            entry = self._cache.arms.get(arm_id)
            if entry is None:
                continue
            alpha, beta = entry.alpha, entry.beta
            points = []
            for row in sorted(arm_rows, key=lambda b: -b.t):
                points.append(TimeBucket(row.t, alpha / (alpha + beta), arm_id))
                n = row.count
                gained = row.value * n
                alpha = max(alpha - gained, 1e-9)
                beta = max(beta - (n - gained), 1e-9)
            out.extend(reversed(points))
        out.sort(key=lambda b: (b.t, b.arm_id or ""))
        return out

    def check_ready(self) -> None:
        """Read the learner's state row (one small query, no posteriors): raises Unavailable
        when storage does not answer or its schema is not at the revision this code needs
        (storage runs a schema check it had to defer before its first read)."""
        self.store.learner_state(self.learner_id)

    def cache_age(self) -> float | None:
        """Seconds since the cached posteriors were last read or checked against storage
        (None before the first read)."""
        checked = self._cache.checked_at
        return None if checked == float("-inf") else max(0.0, self._clock() - checked)

    def spool_health(self) -> dict[str, Any] | None:
        """The spool's state (pending runs, bytes, full, dead letters), or None without one."""
        return None if self.spool is None else self.spool.health()

    def verify(self) -> VerifyReport:
        """Check that every posterior equals its prior plus its observations since its last
        reset, that traces are whole, and that the counters match the traces."""
        return self.store.verify(self.learner_id)


def _check_page(limit: int, offset: int) -> None:
    """A page of traces: limit 1 to MAX_PAGE, offset from 0."""
    for name, value, low, high in (
        ("limit", limit, 1, MAX_PAGE),
        ("offset", offset, 0, 10**12),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise InvalidInput(f"{name} must be a whole number from {low} to {high}")
