"""A session's set as a decision priced in money (docs/sessions.md), through LearningService on
a real SqlStore: kept while it pays, drawn again when the cache is broken anyway, when a
provisional set's forced arms have their pulls, and when a new set pays for the rewrite."""

from __future__ import annotations

from collections.abc import Sequence

from learning_bot.engine import Arm, ReportedArm, RunReport
from learning_bot.engine.observation import ToolCall
from learning_bot.engine.service import LearningService
from learning_bot.engine.session_review import (
    BASELINE_DONE,
    COMPACTED,
    MISSED_CACHE,
    MODEL_CHANGED,
    PRICED,
    PROVISIONAL,
)
from learning_bot.engine.session_selection import BASELINE_TURNS
from learning_bot.engine.usage import Usage
from learning_bot.storage import SqlStore
from tests.storage.test_session_selection import config
from tests.storage.test_session_selection import tools as session_tools


def tools(count: int = 30, cost: int = 275) -> list[Arm]:
    return session_tools(count, cost)


def run(
    service: LearningService,
    key: str,
    turn: int,
    arms: Sequence[Arm],
    selected: Sequence[str],
    called: Sequence[str],
    usage: Usage | None = None,
) -> None:
    included = [a for a in arms if a.id in selected]
    service.observe(
        RunReport(
            trace_id=f"{key}-{turn}",
            session_key=key,
            arms=[ReportedArm(a) for a in included],
            tool_calls=[ToolCall(a.rsplit(":", 1)[1]) for a in called],
            usage=usage if usage is not None else Usage(),
        )
    )


def test_a_cold_set_is_provisional_and_redrawn_within_budget_once_its_arms_have_pulls(
    store: SqlStore,
) -> None:
    """One long-lived key (an OpenClaw channel): the cold draw forces every arm in, and the
    set is drawn again, within the budget, as soon as those arms have their pulls."""
    service = LearningService(store, config(min_pulls=2), rng=1, cache_ttl=0)
    arms = tools()
    budget = 4000
    sessions = []
    for turn in range(12):
        selection = service.select(arms, {"session_key": "agent:main:slack:channel:c0"})
        sessions.append((selection.session, selection.session_reason, selection.used_tokens))
        run(service, "chan", turn, arms, selection.selected, selection.selected[:1])
    assert sessions[0][0] == "new" and sessions[0][2] == 30 * 275  # every arm forced in
    redrawn = [i for i, s in enumerate(sessions) if s[0] == "redrawn"]
    assert redrawn and sessions[redrawn[0]][1] == PROVISIONAL
    assert redrawn[0] <= 2  # two pulls each: the third select draws again
    for _, _, used in sessions[redrawn[0] :]:
        assert used <= budget, sessions
    assert sessions[-1][0] == "kept"


def test_a_compaction_or_model_change_redraws_and_a_plain_turn_keeps(store: SqlStore) -> None:
    service = LearningService(store, config(), rng=2, cache_ttl=0)
    arms = tools()
    ctx = {"session_key": "s", "provider": "openai", "model": "gpt-4.1"}
    first = service.select(arms, ctx)
    kept = service.select(arms, ctx)
    assert (kept.session, kept.selected) == ("kept", first.selected)
    compacted = service.select(arms, {**ctx, "compacted": True})
    assert (compacted.session, compacted.session_reason) == ("redrawn", COMPACTED)
    switched = service.select(arms, {**ctx, "model": "gpt-5.4"})
    assert (switched.session, switched.session_reason) == ("redrawn", MODEL_CHANGED)
    assert service.select(arms, {**ctx, "model": "gpt-5.4"}).session == "kept"


def test_two_runs_in_a_row_that_missed_the_cache_redraw_the_next_select(store: SqlStore) -> None:
    service = LearningService(store, config(), rng=3, cache_ttl=0)
    arms = tools()
    first = service.select(arms, {"session_key": "m"})
    tokens = first.used_tokens
    written = Usage(input=200, cache_write=tokens + 2000)
    read = Usage(input=200, cache_read=tokens + 2000)
    run(service, "m", 0, arms, first.selected, [], written)  # a set's first run writes
    second = service.select(arms, {"session_key": "m"})
    run(service, "m", 1, arms, second.selected, [], read)
    assert service.select(arms, {"session_key": "m"}).session == "kept"
    # one miss rewrote the prefix with this set: a new set now would pay a second rewrite
    run(service, "m", 2, arms, second.selected, [], written)
    assert service.select(arms, {"session_key": "m"}).session == "kept"
    # a second in a row: the cache does not hold for this session, a new set costs nothing
    run(service, "m", 3, arms, second.selected, [], written)
    after = service.select(arms, {"session_key": "m"})
    assert (after.session, after.session_reason) == ("redrawn", MISSED_CACHE)
    assert service.select(arms, {"session_key": "m"}).session == "kept"


def test_a_long_session_is_redrawn_when_the_learner_has_learnt_enough_to_pay_for_it(
    store: SqlStore,
) -> None:
    """Other sessions teach the learner that five tools do the work; a long-lived session
    drawn before that keeps paying for its cold set until a new one saves more over its
    expected remaining turns than rewriting the prompt costs: then it is redrawn, once."""
    service = LearningService(store, config(token_budget=6000), rng=4, cache_ttl=0)
    arms = tools()
    useful = [a.id for a in arms[:5]]
    long = service.select(arms, {"session_key": "long"})
    actions = [long.session]
    for turn in range(200):
        if turn % 2 == 0:  # other sessions' runs: the learner learns which tools are used
            other = service.select(arms, {"session_key": f"other-{turn}"})
            used = [a for a in other.selected if a in useful]
            run(service, f"other-{turn}", 0, arms, other.selected, used)
        selection = service.select(arms, {"session_key": "long"})
        actions.append(selection.session)
        if selection.session == "redrawn":
            assert selection.session_reason == PRICED
        used = [a for a in selection.selected if a in useful]
        run(
            service, "long", turn, arms, selection.selected, used, Usage(input=100, cache_read=9000)
        )
    redraws = actions.count("redrawn")
    assert 1 <= redraws <= 3, actions
    assert actions[-1] == "kept"


def test_nothing_learnt_keeps_the_set(store: SqlStore) -> None:
    service = LearningService(store, config(), rng=5, cache_ttl=0)
    arms = tools()
    first = service.select(arms, {"session_key": "quiet"})
    for _ in range(30):
        again = service.select(arms, {"session_key": "quiet"})
        assert (again.session, again.selected) == ("kept", first.selected)


def test_a_baseline_session_is_a_control_for_its_first_turns_only(store: SqlStore) -> None:
    service = LearningService(store, config(baseline_rate=1.0), rng=6, cache_ttl=0)
    arms = tools()
    seen = [service.select(arms, {"session_key": "b"}) for _ in range(BASELINE_TURNS + 2)]
    assert all(s.is_baseline and len(s.selected) == len(arms) for s in seen[:BASELINE_TURNS])
    later = seen[BASELINE_TURNS + 1]
    assert (later.session, later.session_reason) == ("redrawn", BASELINE_DONE)
    assert not later.is_baseline and later.used_tokens <= 4000


def test_the_decision_survives_a_restart_and_status_counts_redraws(database_url: str) -> None:
    first_store = SqlStore(database_url)
    service = LearningService(first_store, config(), rng=7, cache_ttl=0)
    arms = tools()
    ctx = {"session_key": "r", "provider": "anthropic", "model": "claude-sonnet-4-5"}
    drawn = service.select(arms, ctx)
    service.select(arms, {**ctx, "compacted": True})
    missing = drawn.excluded[0]
    again = service.select(arms, ctx)
    run(service, "r", 0, arms, again.selected, [missing])
    first_store.close()

    store = SqlStore(database_url)  # another process: what it reads is what was stored
    try:
        restarted = LearningService(store, config(session_growth="append"), rng=8, cache_ttl=0)
        after = restarted.select(arms, ctx)
        assert after.selected == again.selected
        summary = restarted.status().summary
        decisions = summary.session_decisions
        assert decisions is not None
        assert (decisions.sessions, decisions.redrawn, decisions.redraws) == (1, 1, 1)
        assert decisions.by_reason == ((COMPACTED, 1),)
    finally:
        store.close()


def test_status_counts_the_sessions_that_took_on_a_tool_through_tool_search(
    store: SqlStore,
) -> None:
    """A session whose model loads a left-out tool through tool search takes it on outside
    its cached prefix (`added`); the summary counts it as grown, a session that did not as
    not."""
    service = LearningService(store, config(token_budget=1000), rng=3, cache_ttl=0)
    arms = tools(8)
    ctx = {"session_key": "found", "provider": "anthropic", "model": "claude-sonnet-4-5"}
    first = service.select(arms, ctx)
    quiet = service.select(arms, {**ctx, "session_key": "quiet"})
    run(service, "quiet", 0, arms, quiet.selected, quiet.selected[:1])
    assert first.deferred
    found = first.deferred[0]
    by_id = {a.id: a for a in arms}
    service.observe(
        RunReport(
            trace_id="found-0",
            session_key="found",
            arms=[ReportedArm(a) for a in arms if a.id in first.selected]
            + [ReportedArm(by_id[found], included=False, loaded=True)],
            tool_calls=[ToolCall(found.rsplit(":", 1)[1])],
            usage=Usage(),
        )
    )
    assert service.select(arms, ctx).added == (found,)
    decisions = service.status().summary.session_decisions
    assert decisions is not None
    assert (decisions.sessions, decisions.grown) == (2, 1)
