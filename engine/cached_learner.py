"""One learner as this process holds it: its id in storage, its stored settings and the cached
posteriors (engine.cache), kept fresh.

A learner's settings are its own state: this process's configuration gives those of a learner
it creates; an existing learner keeps what it stored, and a difference is reported once
(`settings_differ`), never written. Posteriors are served from a `PosteriorCache`: this
process's own writes are applied to it as they commit, other replicas' writes are picked up
within `cache_ttl` seconds by a one-row version check."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from learning_bot.engine.cache import CachedArm, PosteriorCache
from learning_bot.engine.config import LearningConfig
from learning_bot.engine.errors import InvalidInput, NotFound, Unavailable
from learning_bot.engine.forgetting import keep_factor
from learning_bot.engine.ports import LearnerState, StoreReads
from learning_bot.engine.resolve import MAX_QUERY_CHARS, resolve_arm_query
from learning_bot.engine.views import ArmView

log = logging.getLogger("learning_bot.engine")

RECORD_ATTEMPTS = 4
"""Writes of one observe before it gives up while the learner's phase or settings keep
changing under it (each refused write rebuilds the runs under the state read again); reads of
a forced refresh while local writes keep the cache refusing them."""


@dataclass(eq=False)
class CachedLearner:
    """The learner named `name` over a store's reads: opened (or created) on first use, its
    settings and posteriors read again when older than `cache_ttl` seconds."""

    store: StoreReads
    base_config: LearningConfig
    name: str
    cache_ttl: float
    clock: Callable[[], float]
    cache: PosteriorCache = field(default_factory=PosteriorCache, init=False)
    opened_id: int | None = field(default=None, init=False)
    """The learner's id once opened (None while storage has been down since start)."""
    keep: float = field(init=False)
    """What a posterior keeps of its evidence per unit of time (engine.forgetting)."""
    settings: LearningConfig = field(init=False)
    """The learner's settings (its stored ones once opened; the phase is the cache's)."""
    built_under: str | None = field(default=None, init=False)
    """The stored settings `settings` were taken from, as JSON ("null": the learner has
    none; None before it is opened): what observed runs are built under, which storage
    checks as it writes them. Set after `settings`, read before it."""
    settings_differ: str | None = field(default=None, init=False)
    """Set when the learner's stored settings differ from this process's configuration:
    which, and how to change them."""

    def __post_init__(self) -> None:
        self.keep = keep_factor(self.base_config.half_life)
        self.settings = self.base_config

    def open(self) -> int:
        """Open (or create) the learner; opening writes nothing but a new learner's row."""
        base = self.base_config
        state = self.store.open_learner(
            self.name, base.phase, base.learner_settings(), base.half_life
        )
        self.opened_id = state.id
        self.cache.phase = state.phase
        self.adopt(state)
        ours, theirs = base.learner_settings(), self.settings.learner_settings()
        if ours != theirs:
            stored = self.settings.to_dict(complete=True)
            configured = base.to_dict(complete=True)
            changed = sorted(k for k in ours.keys() | theirs.keys() if ours.get(k) != theirs.get(k))
            said = json.dumps
            shown = ", ".join(
                f"{k} {said(stored.get(k))} (configured here: {said(configured.get(k))})"
                for k in changed
            )
            self.settings_differ = (
                f"learner {self.name!r} keeps its stored settings: {shown}; "
                "`learning-bot learner set` changes them"
            )
            log.warning("%s", self.settings_differ)
        return state.id

    def adopt(self, state: LearnerState) -> None:
        """Take the learner's stored settings and half-life as the ones selection and the
        cache use (the half-life is what storage forgets with, so cached posteriors equal
        stored ones)."""
        if state.settings is not None:
            self.settings = self.base_config.with_learner_settings(state.settings, state.phase)
        else:  # a learner made before settings were stored: the process's, its half-life
            self.settings = replace(self.base_config, half_life=state.half_life)
        self.keep = keep_factor(state.half_life)
        stored = dict(state.settings) if state.settings is not None else None
        self.built_under = json.dumps(stored, sort_keys=True, separators=(",", ":"))

    @property
    def learner_id(self) -> int:
        """The learner's id in storage (opened on first use after an outage at start)."""
        if self.opened_id is None:
            return self.open()
        return self.opened_id

    @property
    def config(self) -> LearningConfig:
        """The learner's settings with its current phase."""
        phase = self.cache.phase
        settings = self.settings
        if settings.phase is phase:
            return settings
        return replace(settings, phase=phase)

    def refresh(self, force: bool = False) -> None:
        """Bring the cache up to date if it is older than cache_ttl (or always, with force:
        then read again while local writes keep `install` refusing the read, a few times;
        the phase is taken whatever happens, and a refused read is read again at next use)."""
        cache = self.cache
        for _ in range(RECORD_ATTEMPTS):
            now = self.clock()
            if not force and not cache.stale and now - cache.checked_at < self.cache_ttl:
                return
            generation = cache.generation
            state = self.store.learner_state(self.learner_id)
            self.adopt(state)
            reload = force or cache.stale or state.version != cache.version
            # Read outside the lock, so selections keep using the old cache meanwhile; a local
            # write under way or applied in between makes `install` refuse this read.
            records = self.store.load_arms(self.learner_id) if reload else None
            if cache.install(state.phase, state.version, records, generation, now) or not force:
                return

    def refresh_quietly(self) -> None:
        """Refresh; storage down: keep selecting from the cache, checked again after
        cache_ttl."""
        try:
            self.refresh()
        except Unavailable:
            self.cache.checked_at = self.clock()

    def is_fresh(self) -> bool:
        """Whether the cache is younger than cache_ttl (a select answers from it as it is)."""
        cache = self.cache
        if cache.stale:
            return False
        return self.clock() - cache.checked_at < self.cache_ttl

    def cache_age(self) -> float | None:
        """Seconds since the cached posteriors were last read or checked against storage
        (None before the first read)."""
        checked = self.cache.checked_at
        return None if checked == float("-inf") else max(0.0, self.clock() - checked)

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
        if self.cache.stale:
            self.refresh()
        try:
            return resolve_arm_query(query, self.cache.labels())
        except NotFound:
            self.refresh(force=True)
            return resolve_arm_query(query, self.cache.labels())

    def view(self, arm_id: str) -> ArmView:
        """One arm's posterior as status shows it."""
        if self.cache.stale:
            self.refresh()
        entry = self.cache.arms.get(arm_id)
        if entry is None:
            raise NotFound(f"unknown arm {arm_id!r}")
        config = self.config
        return arm_view(arm_id, entry, config, set(config.seed_arm_ids))


def arm_view(arm_id: str, entry: CachedArm, config: LearningConfig, seeds: set[str]) -> ArmView:
    """A cached arm as status shows it (`seeds`: the seed arm ids of `config`)."""
    return ArmView(
        arm_id,
        entry.label,
        entry.cost,
        entry.posterior(),
        arm_id in seeds,
        entry.pulls < config.min_pulls,
        entry.rewards,
    )
