"""The LearningService's collaborators on their own (engine.service's docstring lists them):
input cleaning, the learner's cache and settings, the exploration counts, context deferrals,
the convergence walk, the read-only store and the direct writer."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from learning_bot.engine import (
    Arm,
    InvalidInput,
    LearningConfig,
    Phase,
    ReportedArm,
    RunReport,
    Unavailable,
)
from learning_bot.engine.cache import CachedArm
from learning_bot.engine.cached_learner import CachedLearner
from learning_bot.engine.context_learning import count_deferrals
from learning_bot.engine.exploration import ExplorationBound
from learning_bot.engine.exploration_counts import ExplorationCounts
from learning_bot.engine.history import convergence
from learning_bot.engine.inputs import (
    check_page,
    clean_text,
    recorded_actor,
    reward_value,
    with_loaded,
)
from learning_bot.engine.ports import ArmRecord, LearnerState, RunStats, Store, StoreReads
from learning_bot.engine.posterior import Posterior
from learning_bot.engine.read_only import ReadOnlyStore
from learning_bot.engine.store_records import PendingArmOutcome, TimeBucket
from learning_bot.engine.store_writer import StoreWriter

READ = Arm("tool:test:Read", 100)
BASH = Arm("tool:test:Bash", 200)


class Reads:
    """An in-memory StoreReads: one learner, its arms and its stored settings."""

    def __init__(self, settings: Mapping[str, Any] | None = None) -> None:
        self.settings = settings
        self.version = 1
        self.arms = {READ.id: ArmRecord(READ.id, "Read", 100, Posterior(3.0, 1.0, 2))}
        self.state_reads = 0
        self.arm_reads = 0
        self.closed = False

    def open_learner(
        self,
        name: str,
        initial_phase: Phase,
        settings: Mapping[str, Any] | None = None,
        half_life: float = 0.0,
    ) -> LearnerState:
        return self.learner_state(7)

    def learner_state(self, learner_id: int) -> LearnerState:
        self.state_reads += 1
        return LearnerState(learner_id, "default", Phase.ACTIVE, self.version, 0.0, self.settings)

    def load_arms(self, learner_id: int) -> dict[str, ArmRecord]:
        self.arm_reads += 1
        return dict(self.arms)

    def run_stats(self, learner_id: int) -> RunStats:
        return RunStats(trace_count=3)

    def last_reset(self, learner_id: int) -> None:
        return None

    def inclusion_counts(self, learner_id: int, last: int) -> dict[str, tuple[int, int, int]]:
        return {READ.id: (1, 2, 1)}

    def session_decisions(self, learner_id: int) -> Any:
        return "decisions"

    def session_usage(self, learner_id: int, window: int = 0) -> list[Any]:
        return [window]

    def saved_projection(self, learner_id: int) -> tuple[str, int] | None:
        return ("{}", 5)

    def close(self) -> None:
        self.closed = True


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


# -- inputs -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "value"),
    [("good", 1.0), (" Rejected ", 0.0), ("0.25", 0.25), (1, 1.0), (0.5, 0.5)],
)
def test_reward_values_are_words_or_numbers_in_the_unit_interval(given: Any, value: float) -> None:
    assert reward_value(given) == value


@pytest.mark.parametrize("given", ["great", "1.5", -0.1, "nan"])
def test_other_reward_values_are_refused(given: Any) -> None:
    with pytest.raises(InvalidInput):
        reward_value(given)


def test_free_texts_lose_control_characters_and_empty_ones_are_none() -> None:
    assert clean_text("reason", " a\x00b\n ", 10) == "a b"
    assert clean_text("reason", " \t ", 10) is None
    assert clean_text("reason", None, 10) is None
    assert recorded_actor("  ") == "unknown"
    with pytest.raises(InvalidInput, match="longer than 3"):
        clean_text("reason", "abcd", 3)
    with pytest.raises(InvalidInput, match="must be a string"):
        clean_text("actor", 5, 3)  # type: ignore[arg-type]


@pytest.mark.parametrize(("limit", "offset"), [(0, 0), (1, -1), (True, 0), (10**9, 0)])
def test_a_page_outside_its_bounds_is_refused(limit: Any, offset: Any) -> None:
    with pytest.raises(InvalidInput):
        check_page(limit, offset)


def test_an_arm_loaded_through_tool_search_counts_as_included_and_the_message_is_dropped() -> None:
    report = RunReport(
        "t1",
        (ReportedArm(READ, True), ReportedArm(BASH, False)),
        timestamp=1,
        context={"message": "run the tests", "loaded": ["Bash"]},
    )
    seen = with_loaded(report)
    assert [item.included for item in seen.arms] == [True, True]
    assert "message" not in (seen.context or {})
    plain = RunReport("t2", (ReportedArm(READ, True),), timestamp=1)
    assert with_loaded(plain) is plain


# -- the cached learner -------------------------------------------------------------------------


def test_a_learner_keeps_its_stored_settings_and_says_how_they_differ() -> None:
    stored = LearningConfig(token_budget=1234).learner_settings()
    learner = CachedLearner(Reads(stored), LearningConfig(), "default", 0.5, Clock())
    assert learner.opened_id is None
    assert learner.learner_id == 7
    assert learner.config.token_budget == 1234
    assert learner.settings_differ is not None and "tokenBudget" in learner.settings_differ
    assert learner.built_under is not None and "1234" in learner.built_under


def test_the_cache_is_read_again_only_when_older_than_its_ttl_and_arms_when_they_changed() -> None:
    reads, clock = Reads(LearningConfig().learner_settings()), Clock()
    learner = CachedLearner(reads, LearningConfig(), "default", 0.5, clock)
    learner.open()
    learner.refresh()
    assert (reads.state_reads, reads.arm_reads) == (2, 1)
    assert learner.is_fresh() and learner.cache_age() == 0.0
    clock.now += 0.4
    learner.refresh()
    assert (reads.state_reads, reads.arm_reads) == (2, 1)
    clock.now += 0.2
    assert not learner.is_fresh()
    learner.refresh()  # same version: the state row only
    assert (reads.state_reads, reads.arm_reads) == (3, 1)
    reads.version = 2
    clock.now += 1.0
    learner.refresh()
    assert (reads.state_reads, reads.arm_reads) == (4, 2)
    assert learner.resolve_arm("read") == READ.id
    view = learner.view(READ.id)
    assert (view.posterior.alpha, view.label) == (3.0, "Read")


def test_a_refresh_while_storage_is_down_keeps_the_cache_and_checks_again_later() -> None:
    reads, clock = Reads(), Clock()
    learner = CachedLearner(reads, LearningConfig(), "default", 0.5, clock)
    learner.refresh()

    def down(learner_id: int) -> LearnerState:
        raise Unavailable("storage is unavailable")

    reads.learner_state = down  # type: ignore[method-assign]
    clock.now += 5.0
    learner.refresh_quietly()
    assert READ.id in learner.cache.arms
    assert learner.cache_age() == 0.0


# -- exploration counts -------------------------------------------------------------------------


class Runs:
    def __init__(self) -> None:
        self.traces = 10
        self.reads = 0

    def run_stats(self, learner_id: int) -> RunStats:
        return RunStats(all_time_traces=self.traces)

    def left_out_runs(self, learner_id: int, window: int) -> dict[str, int]:
        self.reads += 1
        return {READ.id: 3}


def test_the_counts_are_read_again_only_when_storage_holds_runs_this_process_did_not_store() -> (
    None
):
    runs, clock, scheduled = Runs(), Clock(), []
    counts = ExplorationCounts(
        runs, lambda: 7, clock, scheduled.append, ExplorationBound(after_selections=5)
    )
    counts.owed()
    assert runs.reads == 1
    clock.now += 60.0
    counts.owed()
    assert len(scheduled) == 1
    counts.stored(2)
    runs.traces = 12  # only this process's two runs
    scheduled.pop()()
    assert runs.reads == 1
    runs.traces = 13  # another replica's
    counts.sync()
    assert runs.reads == 2


def test_a_bound_of_zero_reads_nothing() -> None:
    runs = Runs()
    ExplorationCounts(runs, lambda: 7, Clock(), None, ExplorationBound(after_selections=0)).owed()
    assert runs.reads == 0


# -- context deferrals and the convergence walk -------------------------------------------------


def test_deferrals_count_only_runs_that_report_what_they_loaded() -> None:
    left_out = (ReportedArm(READ, True), ReportedArm(BASH, False))
    silent = RunReport("a", left_out, timestamp=1, context={"message": "x"})
    loaded = RunReport("b", left_out, timestamp=1, context={"loaded": ["Bash"]})
    unused = RunReport("c", left_out, timestamp=1, context={"loaded": []})
    assert count_deferrals([silent, loaded, unused]) == {BASH.id: (2, 1)}


def test_convergence_walks_back_from_the_current_posterior() -> None:
    arm = CachedArm(ArmRecord(READ.id, "Read", 100, Posterior(4.0, 2.0, 4)))
    rows = [
        TimeBucket(2, 1.0, READ.id, 2),  # two uses in the last window
        TimeBucket(1, 0.5, READ.id, 2),
        TimeBucket(1, 0.5, "tool:test:Gone", 2),
    ]
    points = convergence(rows, {READ.id: arm})
    assert [(p.t, round(p.value, 4)) for p in points] == [(1, 0.5), (2, round(4.0 / 6.0, 4))]


# -- the read-only store and the direct writer --------------------------------------------------


def test_the_read_only_store_passes_reads_on_reads_learnt_state_as_none_and_refuses_writes() -> (
    None
):
    reads = Reads()
    store = ReadOnlyStore(reads)
    assert store.open_learner("default", Phase.PASSIVE).id == 7
    assert store.inclusion_counts(7, 10) == {READ.id: (1, 2, 1)}
    assert store.session_usage(7, 30) == [30]
    assert store.saved_projection(7) == ("{}", 5)
    assert store.context_evidence_state(7) == (0, 0)
    assert store.context_deferrals(7, READ.id) == (0, 0)
    assert store.session_set(7, "s") is None
    assert store.session_usage_since(7, 0) == []
    with pytest.raises(Unavailable, match="status only"):
        store.record_runs(7, [])
    with pytest.raises(Unavailable, match="status only"):
        store.timeseries(7, "tokens", 1, None)
    store.close()
    assert reads.closed


def test_the_read_only_store_answers_every_method_of_the_store_port() -> None:
    reads = Reads()
    store = ReadOnlyStore(reads)
    declared = {
        name
        for cls in Store.__mro__
        for name in vars(cls)
        if not name.startswith("_") and callable(getattr(cls, name))
    }
    own = set(vars(ReadOnlyStore))
    passed_on = {name for cls in StoreReads.__mro__ for name in vars(cls)} & declared
    refused = declared - own - passed_on
    assert {"record_runs", "record_arm_outcome", "reset", "verify", "iter_traces"} <= refused
    for name in sorted(passed_on):
        assert getattr(store, name) == getattr(reads, name), name
    for name in sorted(refused):
        with pytest.raises(Unavailable, match="status only"):
            getattr(store, name)(7)
    with pytest.raises(AttributeError, match="no attribute 'record_everything'"):
        store.record_everything()


class Outcomes:
    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def record_arm_outcome(self, learner_id: int, arm_id: str, reward: float, **kw: Any) -> Any:
        self.calls.append((learner_id, arm_id, reward, kw["phase"], kw["loaded"]))
        return "recorded"


def test_the_direct_writer_records_outcomes_at_once_and_keeps_no_spool() -> None:
    store = Outcomes()
    writer = StoreWriter(store)  # type: ignore[arg-type]
    pending = PendingArmOutcome(READ.id, 1.0, True, "s", True, 5, "k", Phase.PASSIVE, loaded=True)
    assert writer.record_or_spool_arm_outcome(7, "default", pending) == "recorded"
    assert store.calls == [(7, READ.id, 1.0, Phase.PASSIVE, True)]
    assert not writer.spooling()
    with pytest.raises(Unavailable, match="not open yet"):
        writer.record_or_spool_arm_outcome(None, "default", pending)
