"""Request context through LearningService on a real SqlStore (SQLite and PostgreSQL): a select
without context as before, per-feature evidence learned, stored bounded and read back, the
message never stored, deferred arms loaded and used, and the exploration bound."""

from __future__ import annotations

from learning_bot.engine import Arm, LearningConfig, Phase, ReportedArm, RunReport, ToolCall
from learning_bot.engine.context_policy import ContextSettings
from learning_bot.engine.exploration import ExplorationBound
from learning_bot.engine.selection import select_arms
from learning_bot.engine.service import LearningService
from learning_bot.storage import SqlStore

TOOLS = [Arm(f"tool:t:Tool{i:02d}", 100) for i in range(20)]


def config(**options: object) -> LearningConfig:
    settings: dict[str, object] = {
        "phase": Phase.ACTIVE,
        "token_budget": 100,
        "seed_arm_ids": (),
        "min_pulls": 0,
        "baseline_rate": 0.0,
    }
    return LearningConfig.for_policy("seed", **{**settings, **options})


def run(
    trace: str, message: str, included: set[str], called: list[str], **context: object
) -> RunReport:
    return RunReport(
        trace_id=trace,
        arms=tuple(ReportedArm(a, a.id in included) for a in TOOLS),
        tool_calls=tuple(ToolCall(c) for c in called),
        context={"message": message, **context},
    )


def test_without_context_the_service_selects_as_before(store: SqlStore) -> None:
    service = LearningService(store, config(), rng=5, cache_ttl=0)
    expected = select_arms(TOOLS, None, config(), 5)
    assert service.select(TOOLS).selected == expected.selected
    again = LearningService(store, config(), rng=5, cache_ttl=0, learner="other")
    assert again.select(TOOLS, {"session_key": ""}).selected == expected.selected


def test_evidence_is_learned_stored_bounded_and_read_back(store: SqlStore) -> None:
    service = LearningService(store, config(), rng=1, cache_ttl=0)
    every = {a.id for a in TOOLS}
    for i in range(15):
        service.observe(run(f"w{i}", "will it rain in Oslo", every, ["Tool07"]))
        service.observe(run(f"f{i}", "sort the spreadsheet rows", every, ["Tool13"]))
    picks = [service.select(TOOLS, {"message": "rain in Bergen?"}).selected for _ in range(10)]
    assert sum("tool:t:Tool07" in p for p in picks) >= 9
    assert sum("tool:t:Tool13" in p for p in picks) <= 2
    # a new process reads the evidence back from storage
    fresh = LearningService(store, config(), rng=2, cache_ttl=0)
    picks = [fresh.select(TOOLS, {"message": "sort these rows"}).selected for _ in range(10)]
    assert sum("tool:t:Tool13" in p for p in picks) >= 9
    # the message text is never stored: only its length
    traces, _ = service.traces(limit=5)
    assert all("message" not in t.context and t.context["message_chars"] > 0 for t in traces)
    assert service.verify().ok
    # the bound: a small cap holds in memory and in the table
    small = LearningService(
        store, config(), rng=3, cache_ttl=0, learner="capped",
        context_settings=ContextSettings(max_cells=40),
    )  # fmt: skip
    for i in range(40):
        small.observe(run(f"c{i}", f"word{i} other{i}", every, ["Tool01"]))
    assert small.context_evidence().cells <= 40
    assert store.context_evidence_rows(small.learner_id) <= 40 + 32 * 2 * len(TOOLS)
    assert small.verify().ok


def test_a_deferred_arm_loaded_and_used_is_referenced_and_joins_the_session(
    store: SqlStore,
) -> None:
    service = LearningService(store, config(), rng=4, cache_ttl=0)
    first = service.select(TOOLS, {"session_key": "s1", "message": "hello"})
    assert first.deferred and set(first.deferred) == set(first.excluded)
    wanted = first.deferred[0]
    name = wanted.split(":")[-1]
    report = RunReport(
        trace_id="t1",
        session_key="s1",
        arms=tuple(ReportedArm(a, a.id in first.selected) for a in TOOLS),
        tool_calls=(ToolCall(name),),
        context={"message": "hello", "loaded": [name, first.deferred[1]]},
    )
    result = service.observe(report)
    assert result.rewards[wanted] == 1.0
    assert result.rewards[first.deferred[1]] == 0.0  # loaded, not used
    assert first.deferred[2] not in result.rewards  # deferred, never loaded: no update
    later = service.select(TOOLS, {"session_key": "s1", "message": "hello"})
    # it joins apart from the cached prefix, which stays as it was
    assert later.selected == first.selected
    assert later.added == (wanted,) and later.session == "grown"
    assert wanted not in later.deferred


def test_a_poisoned_arm_is_tried_again_within_the_bound(store: SqlStore) -> None:
    bound = 25
    service = LearningService(
        store, config(token_budget=500), rng=6, cache_ttl=0,
        exploration_bound=ExplorationBound(after_selections=bound),
    )  # fmt: skip
    every = {a.id for a in TOOLS}
    poisoned = "tool:t:Tool05"
    names = [a.name for a in TOOLS if a.id != poisoned]
    for i in range(30):  # a bug: every run reports Tool05 unused
        service.observe(run(f"p{i}", "", every, names))
    assert service.view(poisoned).mean < 0.1
    # the tool is useful again from now on: each run calls it when it has it
    seen_at = None
    for k in range(bound + 5):
        chosen = service.select(TOOLS)
        if poisoned in chosen.selected:
            seen_at = k
            break
        service.observe(run(f"q{k}", "", set(chosen.selected), [*names[:1]]))
    assert seen_at is not None and seen_at <= bound  # back within the bound
    assert seen_at >= bound - 1  # and Thompson sampling alone had left it out until then
    service.observe(run("back", "", set(chosen.selected), [poisoned.split(":")[-1]]))
    assert service.view(poisoned).posterior.pulls == 31


def test_status_explains_what_an_arm_depends_on(store: SqlStore) -> None:
    from learning_bot.bot.replies import context_fields

    arms = [Arm("tool:t:forecast", 100, description="weather rain forecast"), *TOOLS[:5]]
    service = LearningService(store, config(), rng=9, cache_ttl=0)
    service.select(arms, {"message": "rain"})  # the inventory's words become nameable
    for i in range(12):
        rain = i % 2 == 0
        service.observe(
            RunReport(
                trace_id=f"e{i}",
                arms=tuple(ReportedArm(a, a.id != "tool:t:Tool04") for a in arms),
                tool_calls=(ToolCall("forecast" if rain else "Tool00"),),
                context={"message": "rain again?" if rain else "list the rows", "loaded": []},
            )
        )
    lines = [v for k, v in context_fields(service, "tool:t:forecast") if k == "Depends on"]
    rain = "used in 100% of 6 runs where the message mentions 'rain'; 0% otherwise"
    assert rain in lines
    assert (
        dict(context_fields(service, "tool:t:Tool04"))["Deferred, then loaded"]
        == "0 of 12 runs (0%)"
    )


def test_the_service_makes_the_study_selections_for_the_same_seed(store: SqlStore) -> None:
    from learning_bot.engine.config import DEFAULT_POLICY
    from learning_bot.research.context_simulation import run_study
    from learning_bot.research.task_types import task_type_workload

    arms, sessions = task_type_workload(tools=24, types=4, sessions=10, seed=3)
    total = sum(a.token_cost for a in arms)
    study_config = LearningConfig.for_policy(
        DEFAULT_POLICY,
        phase=Phase.ACTIVE,
        seed_arm_ids=(),
        min_pulls=0,
        baseline_rate=0.0,
        token_budget=total // 4,
    )
    for policy in ("context+deferral", "default"):
        alone = run_study(arms, sessions, policy, study_config, seed=5)
        service = LearningService(store, study_config, rng=5, cache_ttl=60, learner=policy)
        served = run_study(arms, sessions, policy, study_config, seed=5, service=service)
        assert served.selections == alone.selections
        assert served.recall == alone.recall
        assert service.verify().ok


def test_an_observe_with_a_bad_context_is_refused_before_it_is_stored(store: SqlStore) -> None:
    import pytest

    from learning_bot.engine.errors import InvalidInput

    service = LearningService(store, config(), rng=1, cache_ttl=0)
    bad = run("bad", "x" * 16_001, {TOOLS[0].id}, ["Tool00"])
    with pytest.raises(InvalidInput, match="message"):
        service.observe(bad)
    assert service.traces()[1] == 0


def test_a_later_turn_learns_under_the_sessions_opening_on_every_replica(store: SqlStore) -> None:
    """A session's set is decided on its opening message and must serve the whole session, so
    a later turn's tool counts under the opening's words too: a new session opened the same
    way gets that tool in its set, even when another replica observed the later turns."""
    opener = LearningService(store, config(token_budget=200), rng=1, cache_ttl=0)
    replica = SqlStore(str(store.engine.url))
    other = LearningService(replica, config(token_budget=200), rng=2, cache_ttl=0)
    every = {a.id for a in TOOLS}
    for i in range(15):
        key = {"session_key": f"trip{i}"}
        opener.select(TOOLS, {**key, "message": "plan my trip to Lisbon"})
        # turn 1 uses the flights tool; turn 2 ("book it") the payment tool, on another replica
        opener.observe(
            RunReport(
                trace_id=f"t{i}-1", session_key=f"trip{i}",
                arms=tuple(ReportedArm(a, True) for a in TOOLS),
                tool_calls=(ToolCall("Tool03"),), context={"message": "plan my trip to Lisbon"},
            )
        )  # fmt: skip
        other.observe(
            RunReport(
                trace_id=f"t{i}-2", session_key=f"trip{i}",
                arms=tuple(ReportedArm(a, a.id in every) for a in TOOLS),
                tool_calls=(ToolCall("Tool11"),), context={"message": "ok, book it and pay"},
            )
        )  # fmt: skip
    fresh = LearningService(store, config(token_budget=200), rng=3, cache_ttl=0)
    picks = [
        fresh.select(TOOLS, {"session_key": f"new{j}", "message": "a trip to Porto"}).selected
        for j in range(10)
    ]
    assert sum("tool:t:Tool11" in p for p in picks) >= 9, picks
    # the opening is kept as hashed features, never as text
    session = store.session_set(fresh.learner_id, "new0")
    assert session is not None and session.opening
    assert all(isinstance(f, int) for f in session.opening)
    assert fresh.verify().ok
    replica.close()


def test_a_baseline_select_makes_the_inventorys_words_nameable_too(store: SqlStore) -> None:
    """The explanation names a feature by the inventory's words once a select carrying a request
    has seen the inventory, whether its draw was the context-aware one or a baseline draw (one
    select in ten by default), so a status shown right after a baseline select is not left with
    hashed features only."""
    from learning_bot.bot.replies import context_fields

    word = f"drizzle{store.dialect}"  # a word no other test's inventory has
    arms = [Arm("tool:t:umbrella", 100, description=f"umbrella {word} shelter"), *TOOLS[:5]]
    service = LearningService(store, config(baseline_rate=1.0), rng=9, cache_ttl=0)
    assert service.select(arms, {"message": word}).is_baseline
    for i in range(12):
        wet = i % 2 == 0
        service.observe(
            RunReport(
                trace_id=f"u{i}",
                arms=tuple(ReportedArm(a, True) for a in arms),
                tool_calls=(ToolCall("umbrella" if wet else "Tool00"),),
                context={"message": word if wet else ""},
            )
        )
    lines = [v for k, v in context_fields(service, "tool:t:umbrella") if k == "Depends on"]
    assert any(f"the message mentions '{word}'" in line for line in lines), lines
