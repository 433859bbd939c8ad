"""Session-stable selection (docs/sessions.md) through LearningService on a real SqlStore: one
decision per session, the same arms in the same order on later selects, on every replica."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from learning_bot.engine import Arm, LearningConfig, Phase, ReportedArm, RunReport
from learning_bot.engine.observation import ToolCall
from learning_bot.engine.service import LearningService
from learning_bot.storage import SqlStore


def tools(count: int = 40, cost: int = 400) -> list[Arm]:
    return [Arm(f"tool:t:Tool{i:02d}", token_cost=cost) for i in range(count)]


def config(**options: object) -> LearningConfig:
    # a tight budget and no seeds, so draws differ from request to request
    settings: dict[str, object] = {
        "phase": Phase.ACTIVE,
        "token_budget": 4000,
        "seed_arm_ids": (),
        "min_pulls": 0,
        "baseline_rate": 0.0,
    }
    return LearningConfig.for_policy("seed", **{**settings, **options})


@pytest.fixture
def replicas(database_url: str) -> Iterator[tuple[LearningService, LearningService]]:
    """Two services, each with its own SqlStore (its own pool and caches), on one database."""
    a, b = SqlStore(database_url), SqlStore(database_url)
    yield (
        LearningService(a, config(), rng=1, cache_ttl=0),
        LearningService(b, config(), rng=2, cache_ttl=0),
    )
    a.close()
    b.close()


def test_a_session_keeps_its_first_set_in_order(store: SqlStore) -> None:
    service = LearningService(store, config(), rng=3, cache_ttl=0)
    arms = tools()
    first = service.select(arms, {"session_key": "s1"})
    assert 0 < len(first.selected) < len(arms)
    for _ in range(5):
        again = service.select(arms, {"session_key": "s1"})
        assert again.selected == first.selected
        assert again.excluded == first.excluded
    # the keyword argument names the same session
    assert service.select(arms, session_key="s1").selected == first.selected
    # without a session every select draws anew
    draws = {service.select(arms).selected for _ in range(8)}
    assert len(draws) > 1


def test_sessions_are_independent(store: SqlStore) -> None:
    service = LearningService(store, config(), rng=4, cache_ttl=0)
    arms = tools()
    sets = {service.select(arms, {"session_key": f"s{i}"}).selected for i in range(8)}
    assert len(sets) > 1


def test_new_arms_are_appended_and_gone_arms_drop_out(store: SqlStore) -> None:
    service = LearningService(store, config(), rng=5, cache_ttl=0)
    arms = tools(20, cost=100)  # 2,000 tokens: everything fits the 4,000 budget
    first = service.select(arms, {"session_key": "grow"})
    assert first.selected == tuple(a.id for a in arms)
    newcomer = Arm("tool:t:Newcomer", token_cost=100)
    with_new = service.select([newcomer, *arms], {"session_key": "grow"})
    assert with_new.selected == (*first.selected, newcomer.id)  # appended, not reordered
    without = service.select([newcomer, *arms[1:]], {"session_key": "grow"})
    assert without.selected == (*first.selected[1:], newcomer.id)
    back = service.select([newcomer, *arms], {"session_key": "grow"})
    assert back.selected == with_new.selected


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
@pytest.mark.parametrize("growth", ["append", "off"])
def test_a_tool_the_model_needed_joins_as_its_provider_allows(
    store: SqlStore, growth: str, provider: str
) -> None:
    """Anthropic takes tools between turns without a rewrite: the tool joins at once, apart
    from the cached prefix (`added`). OpenAI's ordinary tools are the prefix: the tool waits
    for the session's next redraw, which keeps it. "off" leaves the set as decided."""
    options = {"session_growth": growth, "provider": provider, "model": "claude-sonnet-4-5"}
    if provider == "openai":
        options["model"] = "gpt-4.1"
    service = LearningService(store, config(**options), rng=6, cache_ttl=0)
    arms = tools()
    first = service.select(arms, {"session_key": "miss"})
    assert first.session == "new"
    missing = first.excluded[0]
    name = missing.rsplit(":", 1)[1]
    service.observe(
        RunReport(
            trace_id="t-miss",
            session_key="miss",
            arms=[ReportedArm(a) for a in arms if a.id in first.selected],
            tool_calls=[ToolCall(name)],
        )
    )
    after = service.select(arms, {"session_key": "miss"})
    assert after.selected == first.selected  # the cached prefix never changes in place
    if growth == "off":  # sessionGrowth "off": the set stays as decided
        assert after.added == () and after.session == "kept"
        return
    if provider == "anthropic":
        assert after.added == (missing,) and after.session == "grown"
        assert missing not in after.excluded and missing not in after.deferred
        # one miss, not one per turn: the set stays as it is from then on
        again = service.select(arms, {"session_key": "miss"})
        assert again.added == (missing,) and again.session == "kept"
        return
    assert after.added == () and after.session == "kept"
    # the tool waits for the redraw that pays for the rewrite, and that redraw keeps it
    for _ in range(40):
        later = service.select(arms, {"session_key": "miss"})
        if later.session == "redrawn":
            break
    assert later.session == "redrawn", "the wanted tool never joined"
    assert later.session_reason == "a new set pays for the rewrite"
    assert missing in later.selected


def test_an_idle_session_draws_again(store: SqlStore) -> None:
    now = [1_000_000]
    service = LearningService(
        store, config(session_idle_seconds=1), rng=7, cache_ttl=0, wall_clock=lambda: now[0]
    )
    arms = tools()
    first = service.select(arms, {"session_key": "idle"})
    now[0] += 1_000  # within the window
    assert service.select(arms, {"session_key": "idle"}).selected == first.selected
    seen = set()
    for _ in range(2):
        now[0] += 1_050  # past it
        seen.add(service.select(arms, {"session_key": "idle"}).selected)
    assert seen - {first.selected}, "an idle session never drew again"


def test_no_session_idle_window_selects_per_request(store: SqlStore) -> None:
    service = LearningService(store, config(session_idle_seconds=0), rng=8, cache_ttl=0)
    arms = tools()
    assert len({service.select(arms, {"session_key": "k"}).selected for _ in range(8)}) > 1


def test_baseline_is_decided_once_per_session(store: SqlStore) -> None:
    service = LearningService(store, config().merged({"baseline_rate": 0.5}), rng=9, cache_ttl=0)
    arms = tools()
    for i in range(12):
        first = service.select(arms, {"session_key": f"b{i}"})
        for _ in range(3):
            again = service.select(arms, {"session_key": f"b{i}"})
            assert again.is_baseline == first.is_baseline
            assert again.selected == first.selected


def test_a_baseline_session_offers_every_arm(store: SqlStore) -> None:
    # a baseline session is the full-prompt control group of the measured cost saving
    service = LearningService(store, config(baseline_rate=1.0), rng=10, cache_ttl=0)
    arms = tools()
    first = service.select(arms, {"session_key": "full"})
    assert first.is_baseline and first.excluded == ()
    assert first.selected == tuple(a.id for a in arms)
    assert service.select(arms, {"session_key": "full"}).selected == first.selected
    per_request = service.select(arms)
    assert per_request.is_baseline and per_request.excluded  # docs/learning.md: packed to budget


def test_two_replicas_answer_a_session_alike(
    replicas: tuple[LearningService, LearningService],
) -> None:
    a, b = replicas
    arms = tools()
    for i in range(10):
        key = f"r{i}"
        first = (a if i % 2 else b).select(arms, {"session_key": key})
        for service in (a, b, a, b):
            assert service.select(arms, {"session_key": key}).selected == first.selected


def test_two_replicas_at_the_same_moment_agree(
    replicas: tuple[LearningService, LearningService],
) -> None:
    a, b = replicas
    arms = tools()
    for i in range(10):
        key = f"c{i}"
        answers: dict[str, tuple[str, ...]] = {}
        start = threading.Barrier(2)

        def ask(
            name: str,
            service: LearningService,
            key: str = key,
            start: threading.Barrier = start,
            answers: dict[str, tuple[str, ...]] = answers,
        ) -> None:
            start.wait()
            answers[name] = service.select(arms, {"session_key": key}).selected

        threads = [threading.Thread(target=ask, args=(n, s)) for n, s in (("a", a), ("b", b))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert answers["a"] == answers["b"], key
        assert a.select(arms, {"session_key": key}).selected == answers["a"]


def test_session_keys_are_checked(store: SqlStore) -> None:
    from learning_bot.engine import InvalidInput

    service = LearningService(store, config(), rng=10, cache_ttl=0)
    arms = tools(3)
    with pytest.raises(InvalidInput, match="session_key"):
        service.select(arms, {"session_key": "x" * 300})
    with pytest.raises(InvalidInput, match="session_key"):
        service.select(arms, {"session_key": 5})
    with pytest.raises(InvalidInput, match="session_key"):
        service.select(arms, {"session_key": "a\x00b"})


def test_passive_phase_ignores_sessions(store: SqlStore) -> None:
    service = LearningService(store, config(phase=Phase.PASSIVE), rng=11, cache_ttl=0)
    arms = tools()
    assert service.select(arms, {"session_key": "p"}).selected == tuple(a.id for a in arms)


def test_learner_data_removal_removes_sessions(store: SqlStore) -> None:
    service = LearningService(store, config(), rng=12, cache_ttl=0)
    service.select(tools(), {"session_key": "gone"})
    store.delete_learner_data(service.learner_id)
    assert store.session_set(service.learner_id, "gone") is None


def test_an_idle_session_draws_again_in_the_group_its_first_select_chose(store: SqlStore) -> None:
    """The baseline coin is tossed once per session: a session idle past its window gets a new
    set, but a baseline session stays a full-prompt session and a selected one stays selected,
    so the measured saving compares whole sessions."""
    now = [1_000_000]
    service = LearningService(
        store,
        config(session_idle_seconds=1).merged({"baseline_rate": 0.5}),
        rng=10,
        cache_ttl=0,
        wall_clock=lambda: now[0],
    )
    arms = tools()
    groups = []
    for i in range(16):
        first = service.select(arms, {"session_key": f"g{i}"})
        groups.append(first.is_baseline)
        for _ in range(6):
            now[0] += 5_000  # past the idle window: a new draw each time
            again = service.select(arms, {"session_key": f"g{i}"})
            assert again.is_baseline == first.is_baseline
            if first.is_baseline:
                assert again.selected == tuple(a.id for a in arms)
            else:
                assert len(again.selected) < len(arms)
    assert len(set(groups)) == 2, "both groups should occur at baseline rate 0.5"
