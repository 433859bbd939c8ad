"""The changes people make to a learner: manual rewards, resets and their undo, the phase,
and its stored settings. Each is one write to the store; the cached posteriors take it at
once (a reward) or are read again (the rest)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from learning_bot.engine.bounds import MAX_REASON_CHARS, MAX_RESET_ARMS
from learning_bot.engine.config import LearningConfig, Phase
from learning_bot.engine.errors import InvalidConfig, InvalidInput, NotFound
from learning_bot.engine.inputs import clean_text, recorded_actor, reward_value
from learning_bot.engine.ports import Store
from learning_bot.engine.results import PhaseChange, ResetResult, RewardResult

if TYPE_CHECKING:
    from learning_bot.engine.cached_learner import CachedLearner

MIN_TRACES_FOR_ACTIVE = 50
"""Switching to the active phase with fewer traces than this warns."""


@dataclass(eq=False)
class LearnerChanges:
    """reward, reset, undo_reset, set_phase and set_settings of one learner."""

    store: Store
    learner: CachedLearner
    _wall_clock: Callable[[], int]
    _evidence_changed: Callable[[], None]
    """Called after a reset or an undo, which change the learner's stored context evidence
    too."""

    def reward(
        self,
        arm: str | None,
        value: float | str,
        actor: str,
        reason: str | None,
        conversation: str | None,
    ) -> RewardResult:
        """See LearningService.reward."""
        learner = self.learner
        r = reward_value(value)
        actor_text = recorded_actor(actor)
        reason_text = clean_text("reason", reason, MAX_REASON_CHARS)
        trace_id: str | None = None
        if arm is not None:
            arm_ids: tuple[str, ...] = (learner.resolve_arm(arm),)
        else:
            if not conversation:
                raise InvalidInput("name an arm, or reward from a conversation with a recent run")
            trace = self.store.latest_run(learner.learner_id, conversation)
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
        from learning_bot.engine.store_records import RewardChange

        at = self._wall_clock()
        cache = learner.cache
        with cache.writing():  # a reload read meanwhile would count it twice
            self.store.record_rewards(
                learner.learner_id,
                [RewardChange(a, r) for a in arm_ids],
                actor=actor_text,
                reason=reason_text,
                trace_id=trace_id,
                at=at,
            )
            cache.apply(dict.fromkeys(arm_ids, (r, 1.0 - r, 1.0, learner.keep, r)), at)
        if cache.stale:  # arms this process had not loaded yet
            learner.refresh()
        views = tuple(learner.view(a) for a in arm_ids if a in cache.arms)
        return RewardResult(arm_ids, r, actor_text, reason_text, trace_id, arms=views)

    def reset(self, arm_ids: Iterable[str] | None, actor: str) -> ResetResult:
        """See LearningService.reset."""
        learner = self.learner
        actor_text = recorded_actor(actor)
        ids: list[str] | None = None
        if arm_ids is not None:
            requested = list(arm_ids)
            if not requested:
                raise InvalidInput("no arms named; say `all` to reset every arm")
            if len(requested) > MAX_RESET_ARMS:
                raise InvalidInput(f"at most {MAX_RESET_ARMS} arms per reset")
            ids = sorted({learner.resolve_arm(a) for a in requested})
        record = self.store.reset(learner.learner_id, ids, actor=actor_text, at=self._wall_clock())
        self._evidence_changed()  # the reset cleared the arms' evidence
        learner.cache.invalidate(reload=True)
        return ResetResult(learner.name, record.reset_id, record.arm_ids, record.all_arms)

    def undo_reset(self, actor: str) -> ResetResult:
        """See LearningService.undo_reset."""
        learner = self.learner
        actor_text = recorded_actor(actor)
        record = self.store.undo_reset(learner.learner_id, actor=actor_text, at=self._wall_clock())
        self._evidence_changed()  # and put back the evidence it cleared
        learner.cache.invalidate(reload=True)
        return ResetResult(
            learner.name, record.reset_id, record.arm_ids, record.all_arms, undone=True
        )

    def phase(self) -> Phase:
        """The learner's phase, read fresh."""
        self.learner.refresh(force=True)
        return self.learner.cache.phase

    def set_phase(self, phase: Phase | str, actor: str, bootstrap: bool) -> PhaseChange:
        """See LearningService.set_phase."""
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
        learner_id = self.learner.learner_id
        warning = None
        if target is Phase.ACTIVE:
            traces = self.store.run_stats(learner_id).trace_count
            if traces < MIN_TRACES_FOR_ACTIVE:
                warning = (
                    f"only {traces} trace(s) recorded; posteriors are mostly priors until about "
                    f"{MIN_TRACES_FOR_ACTIVE} traces"
                )
        change = self.store.set_phase(
            learner_id, target, actor=actor_text, bootstrap=bootstrap, at=self._wall_clock()
        )
        self.learner.cache.invalidate(reload=True)
        return PhaseChange(
            change.previous,
            target,
            True,
            warning,
            change.bootstrapped_traces,
            change.bootstrapped_observations,
        )

    def set_settings(self, changes: Mapping[str, Any], actor: str | None) -> LearningConfig:
        """See LearningService.set_settings."""
        if not isinstance(changes, Mapping) or not changes:
            raise InvalidInput("settings: give at least one setting to change")
        if "phase" in changes:
            raise InvalidInput("phase: change it with the phase command")
        recorded_actor(actor)
        learner = self.learner
        learner.refresh(force=True)
        try:
            updated = learner.settings.merged(changes)
        except InvalidConfig as exc:
            raise InvalidInput(f"{exc.field}: {exc.detail}") from None
        self.store.set_settings(
            learner.learner_id, updated.learner_settings(), updated.half_life, at=self._wall_clock()
        )
        learner.refresh(force=True)
        return learner.config
