"""Runs completed arm by arm, as agent gateways that report one outcome per arm do (OpenClaw's
learning backend calls): a selection recorded as a run at once, then each arm's outcome
attached to the session's latest run, spooled while storage is down."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from learning_bot.engine.arms import Arm, parse_arm_id
from learning_bot.engine.bounds import check_json, check_text
from learning_bot.engine.cached_learner import RECORD_ATTEMPTS
from learning_bot.engine.config import LearningConfig
from learning_bot.engine.errors import Conflict, InvalidConfig, InvalidInput, Unavailable
from learning_bot.engine.inputs import request_of, stored
from learning_bot.engine.observation import MAX_ID_CHARS, SkipReason
from learning_bot.engine.ports import ArmOutcomeWriter, LearnerChanged, RunSessions
from learning_bot.engine.posterior import check_reward, initial_prior
from learning_bot.engine.records import ArmOutcomeRecord, RunRecord
from learning_bot.engine.session_selection import keyed, session_request
from learning_bot.engine.store_records import ArmOutcome, PendingArmOutcome
from learning_bot.engine.usage import Usage

if TYPE_CHECKING:
    from uuid import UUID

    from learning_bot.engine.cached_learner import CachedLearner
    from learning_bot.engine.inventory import ArmSet
    from learning_bot.engine.observing import Observer
    from learning_bot.engine.selecting import ArmSelector
    from learning_bot.engine.selection import Selection


@dataclass(eq=False)
class GatewayRuns:
    """`select_run`, `observe_arm` and `session_runs` for one learner."""

    store: RunSessions
    writer: ArmOutcomeWriter
    learner: CachedLearner
    selector: ArmSelector
    observer: Observer
    _wall_clock: Callable[[], int]

    def select_run(
        self,
        arms: Sequence[Arm],
        context: Mapping[str, Any] | None,
        k: int,
        options: Mapping[str, Any],
        session_key: str,
        channel: str,
        provider: str,
        model: str,
    ) -> tuple[Selection, str]:
        """See LearningService.select_run; `options` holds the per-call settings given."""
        from learning_bot.engine.inventory import ArmSet

        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise InvalidInput(f"k must be a whole number >= 0, got {k!r}")
        context_map = dict(context or {})
        check_json("context", context_map)
        request = request_of(context_map)
        keys = {"session_key": session_key, "channel": channel}
        keys.update(provider=provider, model=model)
        for name, value in keys.items():
            check_text(name, value, MAX_ID_CHARS)
        changes = {name: value for name, value in options.items() if value is not None}
        if "seed_arm_ids" in changes:
            changes["seed_arm_ids"] = tuple(changes["seed_arm_ids"])
        learner = self.learner
        unavailable: str | None = None
        try:
            learner.refresh()
        except Unavailable as exc:  # the cached phase; the writer spools
            if not learner.cache.arms:  # nothing to select from: every arm, as `select` does
                unavailable = f"storage unavailable: {exc}"
        try:
            config = learner.config.merged(changes)
        except InvalidConfig as exc:
            raise InvalidInput(f"{exc.field}: {exc.detail}") from None
        arm_set = ArmSet(arms)
        selector = self.selector

        def draw(offered: ArmSet, settings: LearningConfig) -> Selection:
            # a baseline session's uses calibrate a recall target when it offers every arm
            key = "" if k else session_key or ""
            chosen = selector.draw(offered, settings, request, key, provider, model)
            if settings.is_active and 0 < k < len(chosen.selected):
                chosen = selector.cap(offered, chosen, k, settings)
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

            selection = selector.sessions.select(
                key,
                arm_set,
                config,
                draw,
                full_baseline=not k,
                opening=opening_features(request.message) if request is not None else (),
                request=session_request(context_map, provider, model),
                calibration=selector.calibration,
            )
        else:
            selection = draw(arm_set, config)
        trace_id = f"sel-{uuid4().hex}"
        run = _selection_run(trace_id, arm_set, selection, config, context_map, self._wall_clock())
        self.observer.record_selection(
            replace(
                run,
                session_id=session_key,
                session_key=session_key,
                conversation=session_key,
                channel=channel,
                provider=provider,
                model=model,
            )
        )
        with contextlib.suppress(Unavailable):  # a seed boost waits for storage
            self.observer.first_seen(arm_set.ids, config)
        return selection, trace_id

    def observe_arm(
        self, arm_id: str, reward: float, referenced: bool, session_key: str, loaded: bool
    ) -> ArmOutcome:
        """See LearningService.observe_arm."""
        if not isinstance(loaded, bool):
            raise InvalidInput("loaded must be true or false")
        parse_arm_id(arm_id)
        r = check_reward(reward)
        check_text("session_key", session_key, MAX_ID_CHARS)
        learner = self.learner
        with contextlib.suppress(Unavailable):
            learner.refresh()
        key = f"arm-outcome:{uuid4().hex}"
        for attempt in range(RECORD_ATTEMPTS):
            # the write checks the learner's phase in its own transaction: one changed on
            # another replica since this process read it writes nothing, and is read again
            try:
                update = learner.config.is_active
                at = self._wall_clock()
                with learner.cache.writing():  # a reload read meanwhile would count it twice
                    pending = PendingArmOutcome(
                        arm_id, r, referenced, session_key or None, update, at, key,
                        learner.config.phase, loaded,
                    )  # fmt: skip
                    outcome = self._record(pending)
                    if update and not outcome.spooled:
                        learner.cache.apply({arm_id: (r, 1.0 - r, 1.0, learner.keep, r)}, at)
                break
            except LearnerChanged:
                if attempt == RECORD_ATTEMPTS - 1:
                    raise Conflict(
                        "the outcome could not be recorded: the learner's phase kept changing; "
                        "try again"
                    ) from None
                with contextlib.suppress(Unavailable):
                    learner.refresh(force=True)
        if outcome.spooled:
            return outcome
        if not update and arm_id not in learner.cache.arms:
            learner.cache.invalidate(reload=True)
        return outcome

    def _record(self, pending: PendingArmOutcome) -> ArmOutcome:
        """One attempt of observe_arm's write, under this process's phase (LearnerChanged when
        the stored one differs); spooled (the outcome says so) while storage is down."""
        learner = self.learner
        learner_id = learner.opened_id
        if learner_id is None:
            with contextlib.suppress(Unavailable):
                learner_id = learner.open()
        recorded = self.writer.record_or_spool_arm_outcome(learner_id, learner.name, pending)
        if recorded is None:
            entry = learner.cache.arms.get(pending.arm_id)
            known = entry.posterior() if entry is not None else initial_prior(pending.arm_id)
            return ArmOutcome(pending.arm_id, known, None, False, spooled=True)
        return recorded

    def session_runs(self, session_key: str, since: int) -> list[RunRecord]:
        """The runs `select_run` recorded for `session_key` from `since` (ms) on."""
        check_text("session_key", session_key, MAX_ID_CHARS)
        return self.store.conversation_runs(self.learner.learner_id, session_key, since)


def _selection_run(
    trace_id: str,
    arm_set: ArmSet,
    selection: Selection,
    config: LearningConfig,
    context: Mapping[str, Any],
    at: int,
) -> RunRecord:
    """The run a selection is recorded as, outside any session: no outcome yet, so it reads
    as conversational until its first one arrives; its usage the token cost of the selected
    arms."""
    chosen = set(selection.selected)
    return RunRecord(
        trace_id=trace_id,
        run_id=trace_id,
        session_id="",
        session_key="",
        channel="",
        conversation="",
        timestamp=at,
        provider="",
        model="",
        is_baseline=selection.is_baseline,
        phase=config.phase,
        guard=SkipReason.CONVERSATIONAL,
        usage=Usage(input=selection.used_tokens),
        duration_ms=0,
        system_prompt_chars=0,
        aborted=False,
        error=None,
        context=stored(context),
        arms=tuple(
            ArmOutcomeRecord(a.id, a.label, a.id in chosen, False, a.token_cost, None)
            for a in arm_set.arms
        ),
    )


def uuid4() -> UUID:
    """A random UUID (the uuid module, with `platform`, imported when a gateway first asks)."""
    import uuid

    return uuid.uuid4()
