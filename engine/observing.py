"""Observe: a run's rewards (engine.observation) written with the run in one statement that
checks the learner's phase and settings, applied to the cached posteriors as it commits, and
written again under the learner's state read again when another replica changed it meanwhile.
What the run tells beyond its rewards follows: context evidence, the recall target's
calibration, its session's cache and growth, and the seed boost of arms seen for the first
time."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from learning_bot.engine.cached_learner import RECORD_ATTEMPTS
from learning_bot.engine.config import LearningConfig
from learning_bot.engine.errors import Conflict, InvalidInput, Unavailable
from learning_bot.engine.forgetting import Fold
from learning_bot.engine.inputs import request_of, with_loaded
from learning_bot.engine.observation import (
    RunOutcome,
    RunReport,
    observation_guard,
    rewards_for_run,
)
from learning_bot.engine.ports import LearnerChanged, RunSessions, RunWriter
from learning_bot.engine.records import RunRecord, record_from_report, under_phase
from learning_bot.engine.results import ObserveResult
from learning_bot.engine.store_records import RecordResult

if TYPE_CHECKING:
    from learning_bot.engine.cached_learner import CachedLearner
    from learning_bot.engine.context_learning import ContextLearning
    from learning_bot.engine.exploration_counts import ExplorationCounts
    from learning_bot.engine.selecting import ArmSelector

SpoolByName = Callable[[str, Sequence[RunRecord]], RecordResult]
"""Keeps runs for a learner not opened yet (storage down since start), by its name."""


@dataclass(eq=False)
class Observer:
    """Writes observed runs, and runs recorded at selection time, for one learner."""

    store: RunSessions
    writer: RunWriter
    learner: CachedLearner
    selector: ArmSelector
    context: ContextLearning
    exploration: ExplorationCounts
    _wall_clock: Callable[[], int]
    _spool_by_name: SpoolByName | None = None

    def observe_many(self, reports: Sequence[RunReport]) -> list[ObserveResult]:
        """See LearningService.observe_many."""
        if not reports:
            return []
        for report in reports:
            if not isinstance(report, RunReport):
                raise InvalidInput(f"expected a RunReport, got {type(report).__name__}")
        learner = self.learner
        with contextlib.suppress(Unavailable):  # keep the cached phase; the writer spools
            learner.refresh()
        asked = reports
        for report in asked:  # checked before anything is written
            request_of(report.context)
        reports = [with_loaded(r) for r in reports]
        for attempt in range(RECORD_ATTEMPTS):
            built_under = learner.built_under  # before `config`: see CachedLearner.built_under
            config = learner.config
            outcomes = [rewards_for_run(r, config) for r in reports]
            records = [
                record_from_report(
                    r, o, config.phase, observation_guard(r, config, ignore_phase=True)
                )
                for r, o in zip(reports, outcomes, strict=True)
            ]
            recorded: RecordResult | None = None
            with learner.cache.writing():  # a reload read meanwhile would count these twice
                with contextlib.suppress(LearnerChanged):
                    recorded = self.record_runs(records, built_under)
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
                learner.refresh(force=True)
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
        self.exploration.stored(sum(status == "inserted" for status in result.statuses))
        # a spooled run teaches too: its evidence waits in the spool behind it
        learned = [
            (r, o.rewards)
            for r, o, status in zip(asked, outcomes, result.statuses, strict=True)
            if status in ("inserted", "spooled") and r.context
        ]
        if learned:
            self.context.learn([r for r, _ in learned], [w for _, w in learned])
        if config.recall_target is not None:  # a baseline session's uses calibrate the target
            for run, ran, stored in zip(asked, outcomes, result.statuses, strict=True):
                if run.session_key and stored in ("inserted", "spooled"):
                    used = [a for a, reward in ran.rewards.items() if reward == 1.0]
                    request = request_of(run.context)
                    usage = run.usage
                    self.selector.target_levels.observed(
                        run.session_key,
                        used,
                        request.message if request is not None and request.message else None,
                        usage.input + usage.cache_read + usage.cache_write,
                        run.is_baseline,
                    )
        if config.is_active:
            self.selector.sessions.note_runs(asked)
            self.selector.sessions.grow(asked, config)
        self.first_seen((item.arm.id for r in reports for item in r.arms), config)
        return out

    def _apply_rewards(self, outcomes: Sequence[RunOutcome], statuses: Sequence[str]) -> None:
        """The rewards of the runs just inserted, applied to the cached posteriors."""
        folds: dict[str, Fold] = {}
        keep = self.learner.keep
        for outcome, status in zip(outcomes, statuses, strict=True):
            if status != "inserted":
                continue
            for arm_id, r in outcome.rewards.items():
                f = folds.get(arm_id)
                if f is None:
                    f = folds[arm_id] = Fold()
                f.add(r, keep)
        if folds:
            self.learner.cache.apply(
                {a: f.as_tuple() for a, f in folds.items()}, self._wall_clock()
            )

    def record_runs(
        self, records: Sequence[RunRecord], built_under: str | None = None
    ) -> RecordResult:
        """Write runs through the writer (which spools them while storage is down), or, for a
        learner storage has not opened yet (down since start), spool them by its name.
        `built_under`: the stored settings (JSON) the runs were built under, which the write
        checks with their phase (None: only the phase). LearnerChanged: nothing was written."""
        learner = self.learner
        spool = self._spool_by_name
        if learner.opened_id is None and spool is not None:
            try:
                learner.open()
            except Unavailable:  # storage down since start: keep the runs by learner name
                return spool(learner.name, records)
        return self.writer.record_runs(learner.learner_id, records, built_under)

    def record_selection(self, record: RunRecord) -> None:
        """Record a run at selection time under the learner's phase: when another replica
        changed it since this process last read it, the learner's state is read again and the
        run, which holds no reward yet, is recorded under its phase."""
        for _ in range(RECORD_ATTEMPTS):
            try:
                self.record_runs([record])
                return
            except LearnerChanged as changed:
                with contextlib.suppress(Unavailable):
                    self.learner.refresh(force=True)
                record = under_phase(record, changed.phase)
        raise Conflict("the run could not be recorded: the learner's phase kept changing")

    def first_seen(self, arm_ids: Iterable[str], config: LearningConfig) -> None:
        """Arms the cache does not hold yet: the seeds among them get `seed_boost` (with it,
        seed arms this learner sees for the first time start at Beta(seed_boost, 1)), and the
        cache reloads so that they show."""
        cache = self.learner.cache
        known = cache.arms
        new_ids = {arm_id for arm_id in arm_ids if arm_id not in known}
        if not new_ids:
            return
        boost = config.seed_boost
        seeds = sorted(new_ids & set(config.seed_arm_ids)) if boost is not None else []
        if boost is not None and seeds:
            self.store.boost_priors(self.learner.learner_id, seeds, boost)
        cache.invalidate(reload=True)
