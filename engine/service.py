"""LearningService: the use cases every surface and every agent runtime calls."""

from __future__ import annotations

import contextlib
import csv
import difflib
import heapq
import io
import json
import math
import threading
import time
import unicodedata
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # numpy is imported on first selection, not at start-up
    import numpy as np

    from engine.selection import ArmSet, PosteriorArrays, Selection

from engine.arms import Arm, parse_arm_id
from engine.config import LearningConfig, Phase
from engine.errors import (
    Ambiguous,
    InvalidArmId,
    InvalidConfig,
    InvalidInput,
    NotFound,
    Unavailable,
)
from engine.group_commit import GroupCommit
from engine.metrics import token_savings_percent
from engine.observation import (
    RunOutcome,
    RunReport,
    SkipReason,
    observation_guard,
    rewards_for_run,
)
from engine.ports import (
    ArmOutcomeRecord,
    ArmRecord,
    AuditEntry,
    LearnerState,
    ResetRecord,
    RewardChange,
    RunRecord,
    RunStats,
    Store,
    StoredTrace,
    TimeBucket,
    VerifyReport,
)
from engine.posterior import Confidence, Posterior, check_reward, now_ms
from engine.wire import trace_to_dict

MIN_TRACES_FOR_ACTIVE = 50
"""Switching to the active phase with fewer traces than this warns."""
MAX_REASON_CHARS = 500
MAX_ACTOR_CHARS = 256
MAX_PAGE = 1000
WINDOWS = {"1h": 3_600_000, "1d": 86_400_000}
TRACE_CSV_HEADER = (
    "traceId,runId,sessionId,timestamp,provider,model,channel,isBaseline,totalTokens,"
    "durationMs,aborted"
)
POSTERIOR_CSV_HEADER = "armId,alpha,beta,mean,pulls,lastUpdated"

_REWARD_WORDS = {"good": 1.0, "bad": 0.0, "accepted": 1.0, "rejected": 0.0}


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


def _clean_text(name: str, value: str | None, limit: int) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidInput(f"{name} must be a string")
    cleaned = "".join(" " if unicodedata.category(ch) == "Cc" else ch for ch in value).strip()
    if len(cleaned) > limit:
        raise InvalidInput(f"{name} is longer than {limit} characters")
    return cleaned or None


@dataclass(frozen=True, slots=True)
class ArmView:
    """An arm's posterior with everything status and the API show about it."""

    arm_id: str
    label: str
    token_cost: int
    posterior: Posterior
    is_seed: bool
    is_underexplored: bool

    @property
    def mean(self) -> float:
        return self.posterior.mean

    @property
    def interval(self) -> tuple[float, float]:
        return self.posterior.credible_interval()

    @property
    def confidence(self) -> Confidence:
        return self.posterior.confidence

    def to_dict(self) -> dict[str, Any]:
        low, high = self.interval
        p = self.posterior
        return {
            "armId": self.arm_id,
            "alpha": p.alpha,
            "beta": p.beta,
            "mean": p.mean,
            "pulls": p.pulls,
            "lastUpdated": p.last_updated,
            "isSeed": self.is_seed,
            "isUnderexplored": self.is_underexplored,
            "credibleInterval": {"lower": low, "upper": high},
            "confidence": p.confidence.value,
        }


@dataclass(frozen=True, slots=True)
class Summary:
    """The SPEC section 9 summary: traces since the last full reset, tokens, baseline split."""

    trace_count: int
    arm_count: int
    min_timestamp: int | None
    max_timestamp: int | None
    total_tokens: int
    baseline_runs: int
    selected_runs: int
    baseline_avg_tokens: float | None
    selected_avg_tokens: float | None
    token_savings_percent: float | None
    baseline_avg_duration: float | None
    selected_avg_duration: float | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "traceCount": self.trace_count,
            "armCount": self.arm_count,
            "minTimestamp": self.min_timestamp,
            "maxTimestamp": self.max_timestamp,
            "totalTokens": self.total_tokens,
            "baseline": {
                "baselineRuns": self.baseline_runs,
                "selectedRuns": self.selected_runs,
                "baselineAvgTokens": self.baseline_avg_tokens,
                "selectedAvgTokens": self.selected_avg_tokens,
                "tokenSavingsPercent": self.token_savings_percent,
                "baselineAvgDuration": self.baseline_avg_duration,
                "selectedAvgDuration": self.selected_avg_duration,
            },
        }


@dataclass(frozen=True, slots=True)
class Status:
    """Everything `/learning status` shows (SPEC section 8), as data."""

    learner: str
    phase: Phase
    config: LearningConfig
    summary: Summary
    top: tuple[ArmView, ...]
    bottom: tuple[ArmView, ...]
    """The lowest means, lowest first; empty unless there are more than 5 arms."""
    last_reset: ResetRecord | None

    @property
    def empty(self) -> bool:
        return self.summary.trace_count == 0


@dataclass(frozen=True, slots=True)
class ObserveResult:
    """What observing one run did."""

    trace_id: str
    recorded: bool
    duplicate: bool
    skipped: SkipReason | None
    rewards: dict[str, float]
    referenced: dict[str, bool]
    spooled: bool = False
    """Storage was unavailable: the run waits in the local spool and is recorded later."""

    @property
    def message(self) -> str:
        if self.spooled:
            return (
                f"storage is unavailable; trace {self.trace_id} was spooled and will be "
                "recorded when storage is back"
            )
        if self.duplicate:
            return f"trace {self.trace_id} was already recorded; nothing changed"
        if self.skipped is not None:
            return f"trace {self.trace_id} recorded; posteriors unchanged ({self.skipped.value})"
        return f"trace {self.trace_id} recorded; {len(self.rewards)} posterior(s) updated"

    def to_dict(self) -> dict[str, Any]:
        return {
            "traceId": self.trace_id,
            "recorded": self.recorded,
            "duplicate": self.duplicate,
            "skipped": self.skipped.value if self.skipped else None,
            "rewards": self.rewards,
            "referenced": self.referenced,
            "spooled": self.spooled,
            "message": self.message,
        }


@dataclass(frozen=True, slots=True)
class RewardResult:
    arm_ids: tuple[str, ...]
    value: float
    actor: str
    reason: str | None
    trace_id: str | None
    """The run credited when no arm was named."""
    lagged: bool = True


@dataclass(frozen=True, slots=True)
class ResetResult:
    learner: str
    reset_id: int
    arm_ids: tuple[str, ...]
    all_arms: bool
    undone: bool = False

    @property
    def reset_count(self) -> int:
        return len(self.arm_ids)


@dataclass(frozen=True, slots=True)
class PhaseChange:
    previous: Phase
    phase: Phase
    changed: bool
    warning: str | None
    bootstrapped_traces: int = 0
    bootstrapped_observations: int = 0


@dataclass
class _Aligned:
    version: int
    arrays: PosteriorArrays


class _Entry:
    """A cached arm: mutable, so this process's own updates cost a few float additions."""

    __slots__ = ("alpha", "beta", "cost", "label", "last", "pulls")

    def __init__(self, record: ArmRecord) -> None:
        p = record.posterior
        self.label = record.label
        self.cost = record.token_cost
        self.alpha = p.alpha
        self.beta = p.beta
        self.pulls = p.pulls
        self.last = p.last_updated

    def posterior(self) -> Posterior:
        return Posterior.trusted(self.alpha, self.beta, self.pulls, self.last)

    def record(self, arm_id: str) -> ArmRecord:
        return ArmRecord(arm_id, self.label, self.cost, self.posterior())


@dataclass
class _Cache:
    arms: dict[str, _Entry] = field(default_factory=dict)
    version: int = -1
    phase: Phase = Phase.PASSIVE
    checked_at: float = float("-inf")
    stale: bool = True


class LearningService:
    """One learner's use cases over a Store: select, observe, reward, reset, phase, status.

    Posteriors are cached in memory: this process's own writes are applied to the cache as
    they commit, and other replicas' writes are picked up within `cache_ttl` seconds by a
    one-row version check (the full reload happens only when the version moved).
    """

    def __init__(
        self,
        store: Store,
        config: LearningConfig | None = None,
        rng: np.random.Generator | int | None = None,
        *,
        learner: str = "default",
        cache_ttl: float = 0.5,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.base_config = config if config is not None else LearningConfig()
        if self.base_config.half_life is not None:
            # Stored posteriors are sums of observations (verify checks exactly that), so
            # forgetting cannot be applied to them; refuse rather than silently ignore it.
            raise InvalidConfig(
                "halfLife",
                "forgetting is an option of the simulation (engine.simulation, "
                "bench/learning.py) only: stored posteriors keep every observation at full "
                "weight; leave halfLife unset",
            )
        self.learner = learner
        self.cache_ttl = cache_ttl
        self._clock = clock
        self._rng_seed = rng
        self._rng_made: np.random.Generator | None = None
        self._lock = threading.RLock()
        self._cache = _Cache()
        self._aligned: weakref.WeakKeyDictionary[ArmSet, _Aligned] = weakref.WeakKeyDictionary()
        self._arm_sets: OrderedDict[tuple[tuple[str, int], ...], ArmSet] = OrderedDict()
        self._refreshing = False
        self._refresh_error: str | None = None
        self._writer: GroupCommit[RunRecord] = GroupCommit(
            self._write_records, key=lambda record: record.trace_id
        )
        state = store.open_learner(learner, self.base_config.phase)
        self.learner_id = state.id
        self._cache.phase = state.phase

    # -- cache ----------------------------------------------------------------------------------

    @property
    def config(self) -> LearningConfig:
        """The configured settings with the learner's current phase."""
        phase = self._cache.phase
        if self.base_config.phase is phase:
            return self.base_config
        return replace(self.base_config, phase=phase)

    def refresh(self, force: bool = False) -> None:
        """Bring the cache up to date if it is older than cache_ttl (or always, with force)."""
        now = self._clock()
        if not force and now - self._cache.checked_at < self.cache_ttl:
            return
        state: LearnerState = self.store.learner_state(self.learner_id)
        reload = state.version != self._cache.version or force or self._cache.stale
        # Read outside the lock, so selections keep using the old cache meanwhile. A write
        # applied locally in between is caught by the next version check.
        arms = (
            {aid: _Entry(rec) for aid, rec in self.store.load_arms(self.learner_id).items()}
            if reload
            else None
        )
        with self._lock:
            self._cache.phase = state.phase
            if arms is not None:
                self._cache.arms = arms
                self._cache.version = state.version
                self._cache.stale = False
                self._aligned = weakref.WeakKeyDictionary()
            self._cache.checked_at = now

    def _refresh_in_background(self) -> None:
        """Refresh without making the caller wait (selection must stay fast even when storage
        is slow); one refresh at a time."""
        with self._lock:
            if self._refreshing:
                return
            self._refreshing = True

        def run() -> None:
            try:
                self.refresh()
            except Exception as exc:  # storage down: keep selecting from the cache
                self._cache.checked_at = self._clock()
                self._refresh_error = str(exc)
            else:
                self._refresh_error = None
            finally:
                self._refreshing = False

        threading.Thread(target=run, name="posterior-refresh", daemon=True).start()

    def _invalidate(self, reload: bool = False) -> None:
        """Check the version on next use; with `reload`, read every posterior again."""
        self._cache.checked_at = float("-inf")
        if reload:
            self._cache.stale = True

    def _apply_local(self, gains: dict[str, list[float]], at: int) -> None:
        """Apply this process's committed rewards (arm -> [alpha gain, beta gain, pulls]) to
        the cached posteriors and to every aligned array."""
        with self._lock:
            cache = self._cache
            changes = 0
            for arm_id, (da, db, n) in gains.items():
                entry = cache.arms.get(arm_id)
                changes += int(n)
                if entry is None:
                    self._invalidate(reload=True)
                    continue
                entry.alpha += da
                entry.beta += db
                entry.pulls += int(n)
                entry.last = at
            aligned_sets = list(self._aligned.items())
            for arm_set, aligned in aligned_sets:
                index = arm_set.index
                arrays = aligned.arrays
                for arm_id, (da, db, n) in gains.items():
                    i = index.get(arm_id)
                    if i is not None:
                        arrays.alpha[i] += da
                        arrays.beta[i] += db
                        arrays.pulls[i] += int(n)
            cache.version += changes
            for _, aligned in aligned_sets:
                aligned.version = cache.version

    @property
    def _rng(self) -> np.random.Generator:
        if self._rng_made is None:
            from engine.selection import as_generator

            self._rng_made = as_generator(self._rng_seed)
        return self._rng_made

    def _arm_set(self, arms: Sequence[Arm] | ArmSet) -> ArmSet:
        from engine.selection import ArmSet

        if isinstance(arms, ArmSet):
            return arms
        key = tuple((a.id, a.token_cost) for a in arms)
        with self._lock:
            found = self._arm_sets.get(key)
            if found is not None:
                self._arm_sets.move_to_end(key)
                return found
            arm_set = ArmSet(arms)
            self._arm_sets[key] = arm_set
            while len(self._arm_sets) > 16:
                self._arm_sets.popitem(last=False)
            return arm_set

    def _arrays(self, arm_set: ArmSet) -> PosteriorArrays:
        version = self._cache.version
        aligned = self._aligned.get(arm_set)
        if aligned is None or aligned.version != version:
            arrays = arm_set.align(None)
            entries = self._cache.arms
            for i, arm_id in enumerate(arm_set.ids):
                entry = entries.get(arm_id)
                if entry is not None:
                    arrays.alpha[i] = entry.alpha
                    arrays.beta[i] = entry.beta
                    arrays.pulls[i] = entry.pulls
            aligned = _Aligned(version, arrays)
            self._aligned[arm_set] = aligned
        return aligned.arrays

    # -- select / observe -------------------------------------------------------------------

    def select(
        self, arms: Sequence[Arm] | ArmSet, context: dict[str, Any] | None = None
    ) -> Selection:
        """Choose the arms of the next prompt. Passive phase: every arm.

        When storage cannot be reached the run still goes ahead with every arm included, and
        the Selection's `fallback` says why.
        """
        from engine.selection import include_everything, select_arms

        arm_set = self._arm_set(arms)
        if self._cache.stale:
            try:
                self.refresh()
            except Unavailable as exc:
                if not self._cache.arms:
                    reason = f"storage unavailable: {exc}"
                    return include_everything(arm_set, self.base_config, reason)
        elif self._clock() - self._cache.checked_at >= self.cache_ttl:
            self._refresh_in_background()
        config = self.config
        if not config.is_active:
            return select_arms(arm_set, None, config)
        with self._lock:
            arrays = self._arrays(arm_set)
            return select_arms(arm_set, arrays, config, self._rng)

    def _record(self, report: RunReport, config: LearningConfig) -> tuple[RunRecord, RunOutcome]:
        outcome = rewards_for_run(report, config)
        guard = observation_guard(report, config, ignore_phase=True)
        referenced = outcome.referenced
        rewards = outcome.rewards
        new = tuple.__new__  # the NamedTuple's own constructor is a Python function: slower
        arms = tuple(
            [
                new(
                    ArmOutcomeRecord,
                    (
                        (aid := (arm := item.arm).id),
                        arm.label,
                        item.included,
                        referenced.get(aid, False),
                        arm.token_cost,
                        rewards.get(aid),
                    ),
                )
                for item in report.arms
            ]
        )
        record = RunRecord(
            trace_id=report.trace_id,
            run_id=report.run_id,
            session_id=report.session_id,
            session_key=report.session_key,
            channel=report.channel,
            conversation=report.conversation,
            timestamp=report.timestamp,
            provider=report.provider,
            model=report.model,
            is_baseline=report.is_baseline,
            phase=config.phase,
            guard=guard,
            usage=report.usage,
            duration_ms=report.duration_ms,
            system_prompt_chars=report.system_prompt_chars,
            aborted=report.aborted,
            error=report.error,
            context=report.context,
            arms=arms,
        )
        return record, outcome

    def _write_records(self, records: list[RunRecord]) -> dict[str, str]:
        return self.store.record_runs(self.learner_id, records).statuses()

    def observe(self, report: RunReport) -> ObserveResult:
        """Store the run's trace (both phases), apply the guard, update posteriors; a trace id
        seen before changes nothing and says so."""
        return self.observe_many([report])[0]

    def observe_many(self, reports: Sequence[RunReport]) -> list[ObserveResult]:
        """Observe several runs in one transaction (replays, imports, simulations).

        Calls from several threads at once share transactions (group commit)."""
        if not reports:
            return []
        seen: set[str] = set()
        for report in reports:
            if not isinstance(report, RunReport):
                raise InvalidInput(f"expected a RunReport, got {type(report).__name__}")
            if report.trace_id in seen:
                raise InvalidInput(f"trace id {report.trace_id!r} appears twice in one call")
            seen.add(report.trace_id)
        with contextlib.suppress(Unavailable):  # keep the cached phase; the store spools
            self.refresh()
        config = self.config
        pairs = [self._record(r, config) for r in reports]
        statuses = self._writer.submit([rec for rec, _ in pairs])
        out: list[ObserveResult] = []
        gains: dict[str, list[float]] = {}
        for report, (_, outcome) in zip(reports, pairs, strict=True):
            status = statuses.get(report.trace_id, "duplicate")
            new = status == "inserted"
            if new:
                for arm_id, r in outcome.rewards.items():
                    g = gains.get(arm_id)
                    if g is None:
                        gains[arm_id] = [r, 1.0 - r, 1.0]
                    else:
                        g[0] += r
                        g[1] += 1.0 - r
                        g[2] += 1.0
            out.append(
                ObserveResult(
                    trace_id=report.trace_id,
                    recorded=new,
                    duplicate=status == "duplicate",
                    skipped=outcome.skipped,
                    rewards=dict(outcome.rewards) if new else {},
                    referenced=dict(outcome.referenced),
                    spooled=status == "spooled",
                )
            )
        if gains:
            self._apply_local(gains, now_ms())
        known = self._cache.arms
        if any(item.arm.id not in known for r in reports for item in r.arms):
            self._invalidate(reload=True)
        return out

    # -- reward ---------------------------------------------------------------------------------

    def arms(self) -> dict[str, ArmRecord]:
        """Every arm this learner knows, read fresh from storage."""
        self.refresh(force=True)
        return {aid: entry.record(aid) for aid, entry in self._cache.arms.items()}

    def resolve_arm(self, query: str, known: dict[str, ArmRecord] | None = None) -> str:
        """An arm id from a full id or a label: exact id, then exact last segment or label,
        then a unique case-insensitive substring. Ambiguous -> Ambiguous listing candidates.

        Resolves against the cached arms first and reads storage again only when nothing
        matches (an arm another replica just saw)."""
        if not isinstance(query, str) or not query.strip():
            raise InvalidInput("arm id or label is empty")
        query = query.strip()
        if len(query) > 512:
            raise InvalidInput("arm id or label is longer than 512 characters")
        if known is not None:
            return _resolve(query, {aid: rec.label for aid, rec in known.items()})
        self.refresh()
        try:
            return _resolve(query, self._labels())
        except NotFound:
            self.refresh(force=True)
            return _resolve(query, self._labels())

    def _labels(self) -> dict[str, str]:
        with self._lock:
            return {aid: entry.label for aid, entry in self._cache.arms.items()}

    def view(self, arm_id: str) -> ArmView:
        """One arm's posterior as status shows it."""
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
        run in `conversation` referenced."""
        r = reward_value(value)
        actor_text = _clean_text("actor", actor, MAX_ACTOR_CHARS) or "unknown"
        reason_text = _clean_text("reason", reason, MAX_REASON_CHARS)
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
        self.store.record_rewards(
            self.learner_id,
            [RewardChange(a, r) for a in arm_ids],
            actor=actor_text,
            reason=reason_text,
            trace_id=trace_id,
            at=now_ms(),
        )
        self._invalidate()
        return RewardResult(arm_ids, r, actor_text, reason_text, trace_id)

    # -- reset and phase --------------------------------------------------------------------

    def reset(self, arm_ids: Iterable[str] | None = None, actor: str = "unknown") -> ResetResult:
        """Every arm (or the listed ones, by id or label) back to Beta(1, 1) with zero pulls."""
        actor_text = _clean_text("actor", actor, MAX_ACTOR_CHARS) or "unknown"
        ids: list[str] | None = None
        if arm_ids is not None:
            requested = list(arm_ids)
            if not requested:
                raise InvalidInput("no arms named; say `all` to reset every arm")
            known = self.arms()
            ids = sorted({self.resolve_arm(a, known) for a in requested})
        record = self.store.reset(self.learner_id, ids, actor=actor_text, at=now_ms())
        self._invalidate()
        self.store.record_audit(
            self.learner_id,
            AuditEntry(
                "reset",
                actor_text,
                "service",
                {"arms": "all" if record.all_arms else list(record.arm_ids)},
                f"reset {len(record.arm_ids)} arm(s)",
                record.at,
            ),
        )
        return ResetResult(self.learner, record.reset_id, record.arm_ids, record.all_arms)

    def undo_reset(self, actor: str = "unknown") -> ResetResult:
        """Restore the posteriors the last reset replaced, keeping what was learnt since."""
        actor_text = _clean_text("actor", actor, MAX_ACTOR_CHARS) or "unknown"
        record = self.store.undo_reset(self.learner_id, actor=actor_text, at=now_ms())
        self._invalidate()
        self.store.record_audit(
            self.learner_id,
            AuditEntry(
                "undo_reset",
                actor_text,
                "service",
                {"reset_id": record.reset_id},
                f"restored {len(record.arm_ids)} arm(s)",
                record.at,
            ),
        )
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
        actor_text = _clean_text("actor", actor, MAX_ACTOR_CHARS) or "unknown"
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
            self.learner_id, target, actor=actor_text, bootstrap=bootstrap, at=now_ms()
        )
        self._invalidate()
        self.store.record_audit(
            self.learner_id,
            AuditEntry(
                "phase",
                actor_text,
                "service",
                {"from": change.previous.value, "to": target.value, "bootstrap": bootstrap},
                f"phase {target.value}; bootstrapped {change.bootstrapped_traces} trace(s)",
                now_ms(),
            ),
        )
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
    def _view(arm_id: str, entry: _Entry, config: LearningConfig, seeds: set[str]) -> ArmView:
        return ArmView(
            arm_id,
            entry.label,
            entry.cost,
            entry.posterior(),
            arm_id in seeds,
            entry.pulls < config.min_pulls,
        )

    def summary(self) -> Summary:
        stats: RunStats = self.store.run_stats(self.learner_id)
        self.refresh()
        return _summary(stats, len(self._cache.arms))

    def status(self, top: int = 5) -> Status:
        """Phase, settings, traces since the last full reset, savings, best and worst arms."""
        if isinstance(top, bool) or not isinstance(top, int) or not 1 <= top <= 100:
            raise InvalidInput("top must be a whole number from 1 to 100")
        self.refresh()
        summary = self.summary()
        config = self.config
        seeds = set(config.seed_arm_ids)
        items = list(self._cache.arms.items())

        def order(item: tuple[str, _Entry]) -> tuple[float, str]:
            entry = item[1]
            return (-entry.alpha / (entry.alpha + entry.beta), item[0])

        # Only the arms shown are turned into views: status stays cheap with many arms.
        best = tuple(self._view(a, e, config, seeds) for a, e in heapq.nsmallest(top, items, order))
        worst: tuple[ArmView, ...] = ()
        if len(items) > top:
            worst = tuple(
                self._view(a, e, config, seeds) for a, e in heapq.nlargest(top, items, order)
            )
        return Status(
            self.learner,
            self.config.phase,
            self.config,
            summary,
            best,
            worst,
            self.store.last_reset(self.learner_id),
        )

    def traces(self, limit: int = 100, offset: int = 0) -> tuple[list[StoredTrace], int]:
        """A page of traces, newest first, and the total number stored."""
        for name, value, low, high in (
            ("limit", limit, 1, MAX_PAGE),
            ("offset", offset, 0, 10**12),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise InvalidInput(f"{name} must be a whole number from {low} to {high}")
        return self.store.trace_page(self.learner_id, limit, offset)

    def timeseries(
        self, metric: str = "tokens", window: str = "1h", buckets: int = 48
    ) -> list[TimeBucket]:
        """Tokens per window, or each arm's posterior mean at the end of each window."""
        if window not in WINDOWS:
            raise InvalidInput(f"window must be one of {', '.join(WINDOWS)}, got {window!r}")
        if metric not in ("tokens", "convergence"):
            raise InvalidInput(f"metric must be tokens or convergence, got {metric!r}")
        width = WINDOWS[window]
        since = (now_ms() // width - buckets + 1) * width
        rows = self.store.timeseries(self.learner_id, metric, width, since)
        if metric == "tokens":
            return rows
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

    def verify(self) -> VerifyReport:
        """Check that every posterior equals its prior plus its observations since its last
        reset, that traces are whole, and that the counters match the traces."""
        return self.store.verify(self.learner_id)

    # -- export ---------------------------------------------------------------------------------

    def export_chunks(
        self, format: str = "json", traces: bool = True, posteriors: bool = True
    ) -> Iterator[str]:
        """Stream the export (SPEC section 10) in pieces, so a large history never sits in
        memory at once."""
        if format not in ("json", "csv"):
            raise InvalidInput(f"format must be json or csv, got {format!r}")
        if not traces and not posteriors:
            raise InvalidInput("nothing to export: traces and posteriors are both left out")
        views = self.posteriors() if posteriors else []
        if format == "json":
            yield "{"
            if traces:
                yield '"traces": ['
                first = True
                for trace in self.store.iter_traces(self.learner_id):
                    yield ("" if first else ",") + json.dumps(trace_to_dict(trace))
                    first = False
                yield "]"
            if posteriors:
                if traces:
                    yield ", "
                items = [
                    {
                        "armId": v.arm_id,
                        "alpha": v.posterior.alpha,
                        "beta": v.posterior.beta,
                        "pulls": v.posterior.pulls,
                        "lastUpdated": v.posterior.last_updated,
                    }
                    for v in views
                ]
                yield '"posteriors": ' + json.dumps(items)
            yield "}\n"
            return
        if traces:
            yield TRACE_CSV_HEADER + "\r\n"
            for trace in self.store.iter_traces(self.learner_id):
                yield _csv_row(
                    [
                        trace.trace_id,
                        trace.run_id,
                        trace.session_id,
                        trace.timestamp,
                        trace.provider,
                        trace.model,
                        trace.channel,
                        str(trace.is_baseline).lower(),
                        trace.usage.total,
                        trace.duration_ms,
                        str(trace.aborted).lower(),
                    ]
                )
            if posteriors:
                yield "\r\n"
        if posteriors:
            yield POSTERIOR_CSV_HEADER + "\r\n"
            for v in views:
                p = v.posterior
                yield _csv_row(
                    [
                        v.arm_id,
                        f"{p.alpha:.4f}",
                        f"{p.beta:.4f}",
                        f"{p.mean:.4f}",
                        p.pulls,
                        "" if p.last_updated is None else p.last_updated,
                    ]
                )

    def export(self, format: str = "json", traces: bool = True, posteriors: bool = True) -> str:
        return "".join(self.export_chunks(format, traces, posteriors))


def _resolve(query: str, labels: dict[str, str]) -> str:
    if query in labels:
        return query
    try:
        parse_arm_id(query)
        looks_like_id = True
    except InvalidArmId:
        looks_like_id = False
    exact = sorted(
        aid for aid, label in labels.items() if label == query or aid.rsplit(":", 1)[-1] == query
    )
    if not exact:
        q = query.casefold()
        exact = sorted(
            aid
            for aid, label in labels.items()
            if label.casefold() == q or aid.rsplit(":", 1)[-1].casefold() == q
        )
    if len(exact) == 1:
        return exact[0]
    if len(exact) > 1:
        raise _ambiguous(query, exact)
    q = query.casefold()
    partial = sorted(
        aid for aid, label in labels.items() if q in aid.casefold() or q in label.casefold()
    )
    if len(partial) == 1 and not looks_like_id:
        return partial[0]
    if len(partial) > 1:
        raise _ambiguous(query, partial)
    names = {aid.rsplit(":", 1)[-1]: aid for aid in labels}
    close = difflib.get_close_matches(query, list(names) + list(labels), n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(names.get(c, c) for c in close)}?" if close else ""
    shown = query if len(query) <= 80 else query[:77] + "..."
    raise NotFound(f"unknown arm {shown!r}{hint}")


def _csv_row(values: list[Any]) -> str:
    buffer = io.StringIO()
    csv.writer(buffer).writerow(values)
    return buffer.getvalue()


def _ambiguous(query: str, candidates: list[str]) -> Ambiguous:
    shown = ", ".join(candidates[:10]) + (
        f" and {len(candidates) - 10} more" if len(candidates) > 10 else ""
    )
    q = query if len(query) <= 80 else query[:77] + "..."
    return Ambiguous(
        f"{q!r} matches {len(candidates)} arms: {shown}; use the full arm id",
        tuple(candidates),
    )


def _avg(total: int, n: int) -> float | None:
    return total / n if n else None


def _summary(stats: RunStats, arm_count: int) -> Summary:
    b_avg = _avg(stats.baseline_tokens, stats.baseline_runs)
    s_avg = _avg(stats.selected_tokens, stats.selected_runs)
    savings = token_savings_percent(b_avg, s_avg)
    if savings is not None and not math.isfinite(savings):
        savings = None
    return Summary(
        trace_count=stats.trace_count,
        arm_count=arm_count,
        min_timestamp=stats.min_timestamp,
        max_timestamp=stats.max_timestamp,
        total_tokens=stats.total_tokens,
        baseline_runs=stats.baseline_runs,
        selected_runs=stats.selected_runs,
        baseline_avg_tokens=b_avg,
        selected_avg_tokens=s_avg,
        token_savings_percent=savings,
        baseline_avg_duration=_avg(stats.baseline_duration, stats.baseline_runs),
        selected_avg_duration=_avg(stats.selected_duration, stats.selected_runs),
    )
