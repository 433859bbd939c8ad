"""The tool implementations in process, on SQLite and PostgreSQL: k on top of the budget,
per-call seed options, the passive phase recording outcomes that a switch to active folds in,
and reads that create no learner."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from learning_bot.adapters.mcp.tools import LearningTools
from learning_bot.app import App, build_app
from learning_bot.engine import Arm, LearningConfig, ReportedArm, RunReport, ToolCall
from learning_bot.engine.errors import NotFound
from learning_bot.settings import Settings
from learning_bot.surfaces import mcp_tools

from . import openclaw_calls as oc


@pytest.fixture
def app(database_url: str) -> Iterator[App]:
    made = build_app(Settings(database_url=database_url, config=LearningConfig(), cache_ttl=0.0))
    yield made
    made.close()


@pytest.fixture
def tools(app: App) -> LearningTools:
    return mcp_tools(app)


def _select(tools: LearningTools, **options: object) -> dict[str, object]:
    args = {**oc.select().arguments, **options}
    return tools.select(**args)


def test_k_caps_the_selection_and_keeps_seeds(tools: LearningTools) -> None:
    tools.learning_phase("active", True, oc.LEARNER)
    capped = _select(tools, k=2, seed_arms=[])
    assert len(capped["selected_arms"]) == 2 and len(capped["excluded_arms"]) == 3
    kept = oc.arm_ids(capped["selected_arms"])
    assert capped["used_tokens"] == sum(c["token_cost"] for c in oc.CANDIDATES if c["id"] in kept)
    seeded = _select(tools, k=1, seed_arms=["tool:exec:Bash", "tool:fs:Read"])
    assert sorted(oc.arm_ids(seeded["selected_arms"])) == ["tool:exec:Bash", "tool:fs:Read"]
    # 0 is no cap, and token_budget 0 is unlimited.
    everything = _select(tools, k=0, token_budget=0, seed_arms=[])
    assert len(everything["selected_arms"]) == 5 and everything["token_budget"] == 0


def test_seed_boost_applies_to_the_call(tools: LearningTools) -> None:
    tools.learning_phase("active", True, oc.LEARNER)
    _select(tools, seed_arms=["tool:fs:Read"], seed_boost=8.0)
    posteriors = tools.posteriors(oc.LEARNER)["posteriors"]
    assert posteriors["tool:fs:Read"]["alpha"] == 8.0  # a seed seen for the first time
    assert posteriors["tool:exec:Bash"]["alpha"] == 3.0  # no seed: its type's prior


def test_passive_records_outcomes_that_active_bootstraps(tools: LearningTools, app: App) -> None:
    chosen = _select(tools)
    assert len(chosen["selected_arms"]) == 5  # passive: every candidate
    for arm in oc.CANDIDATE_IDS:
        observed = tools.observe(**oc.observe(arm, arm == "tool:fs:Read").arguments)
        assert observed["pulls"] == 0  # passive: posteriors stay
    (run,) = app.service(oc.LEARNER).traces()[0]
    assert {a.arm_id for a in run.arms if a.referenced} == {"tool:fs:Read"}
    text = tools.learning_phase("active", True, oc.LEARNER)
    assert "active" in text.lower()
    posteriors = tools.posteriors(oc.LEARNER)["posteriors"]
    assert posteriors["tool:fs:Read"]["alpha"] == 4.0 and posteriors["tool:fs:Read"]["pulls"] == 1
    assert posteriors["tool:exec:Bash"]["beta"] == 2.0
    assert app.service(oc.LEARNER).verify().ok


def test_an_observe_without_a_run_is_an_observation_of_its_own(tools: LearningTools) -> None:
    tools.learning_phase("active", True, oc.LEARNER)
    result = tools.observe(oc.LEARNER, "tool:web:WebFetch", "partial", None, None)
    assert result == {
        "arm_id": "tool:web:WebFetch",
        "alpha": 3.5,
        "beta": 1.5,
        "mean": 0.7,
        "pulls": 1,
    }


def test_reads_of_an_unknown_learner_create_nothing(tools: LearningTools, app: App) -> None:
    with pytest.raises(NotFound, match="unknown learner 'nobody'"):
        tools.posteriors("nobody")
    with pytest.raises(NotFound, match="unknown learner 'nobody'"):
        tools.metrics("nobody")
    names = getattr(app.store, "learner_names")()  # noqa: B009
    assert "nobody" not in names


def test_outcomes_forget_like_every_other_write(database_url: str) -> None:
    config = LearningConfig.from_dict({"halfLife": 3, "phase": "active"})
    made = build_app(Settings(database_url=database_url, config=config, cache_ttl=0.0))
    try:
        tools = mcp_tools(made)
        for _ in range(4):
            _select(tools)
            for arm in oc.CANDIDATE_IDS:
                tools.observe(**oc.observe(arm, arm == "tool:fs:Read").arguments)
        tools.observe(oc.LEARNER, "tool:web:WebFetch", "accepted", None, None)  # no run
        service = made.service(oc.LEARNER)
        report = service.verify()
        assert report.ok, report.problems
        read = tools.posteriors(oc.LEARNER)["posteriors"]["tool:fs:Read"]
        assert read["pulls"] == 4 and read["alpha"] < 3.0 + 4  # older evidence counts less
    finally:
        made.close()


def test_select_reads_the_request_and_lists_deferred_tools(tools: LearningTools, app: App) -> None:
    tools.learning_phase("active", True, oc.LEARNER)
    described = {"get_weather": "weather forecast", "send_email": "send an email"}
    described["read_file"] = "read a file"
    candidates = [
        {"id": f"tool:t:{name}", "metadata": {"description": text}, "token_cost": 100}
        for name, text in described.items()
    ]
    # the request's words have evidence: earlier runs that named them used send_email, as
    # often as runs about the weather used get_weather (a request whose words have none draws
    # as one without context)
    arms = [Arm(c["id"], 100) for c in candidates]
    for i, (message, used) in enumerate(
        [("send an email to Bo", "send_email"), ("weather in Oslo", "get_weather")] * 3
    ):
        app.service(oc.LEARNER).observe(
            RunReport(
                trace_id=f"earlier-{i}",
                arms=tuple(ReportedArm(a, True) for a in arms),
                tool_calls=(ToolCall(used),),
                context={"message": message},
            )
        )
    context = {"session_key": "", "message": "please send an email to Ana"}
    chosen = []
    for _ in range(20):
        answer = tools.select(oc.LEARNER, candidates, context, 0, 100, 0, [], None)
        (picked,) = oc.arm_ids(answer["selected_arms"])
        deferred = oc.arm_ids(answer["deferred_arms"])
        assert sorted([picked, *deferred]) == sorted(c["id"] for c in candidates)
        chosen.append(picked)
    assert chosen.count("tool:t:send_email") >= 12  # the request's tool, most of the time
    run = app.service(oc.LEARNER).traces()[0][0]
    assert "message" not in run.context and run.context["message_chars"] == len(context["message"])
