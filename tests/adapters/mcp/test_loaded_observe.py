"""A per-arm observe of a deferred tool the model loaded through tool search
(`qortex_learning_observe` with `loaded: true`), on SQLite and PostgreSQL: it completes the
select's run, which now counts the tool as included and used; without `loaded` the same
observe finds no run that included the tool and stays an observation of its own. The flag
survives the spool."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from learning_bot.adapters.mcp.tools import LearningTools
from learning_bot.app import App, build_app
from learning_bot.engine import LearningConfig, Phase
from learning_bot.engine.errors import InvalidInput
from learning_bot.engine.store_records import PendingArmOutcome
from learning_bot.settings import Settings
from learning_bot.storage.spool_lines import outcome_line, read_outcome_line
from learning_bot.surfaces import mcp_tools

from . import openclaw_calls as oc

KEY = "agent:main:slack:channel:c0loaded"
CONTEXT = {"session_key": KEY, "message": "what is the weather in Lyon"}
CANDIDATES = [
    {"id": "tool:t:read_file", "metadata": {"description": "read a file"}, "token_cost": 100},
    {"id": "tool:t:get_weather", "metadata": {"description": "weather"}, "token_cost": 500},
]
WEATHER = "tool:t:get_weather"


@pytest.fixture
def app(database_url: str) -> Iterator[App]:
    config = LearningConfig(phase=Phase.ACTIVE, baseline_rate=0.0)
    made = build_app(Settings(database_url=database_url, config=config, cache_ttl=0.0))
    yield made
    made.close()


@pytest.fixture
def tools(app: App) -> LearningTools:
    return mcp_tools(app)


def _select_without_weather(tools: LearningTools) -> None:
    answer = tools.select(oc.LEARNER, CANDIDATES, CONTEXT, 0, 150, 0, ["tool:t:read_file"], None)
    assert oc.arm_ids(answer["selected_arms"]) == ["tool:t:read_file"]
    assert oc.arm_ids(answer["deferred_arms"]) == [WEATHER]


def _run_arms(app: App) -> dict[str, tuple[bool, bool, float | None]]:
    (run,) = app.service(oc.LEARNER).traces()[0]
    return {a.arm_id: (a.included, a.referenced, a.reward) for a in run.arms}


def test_a_loaded_tool_completes_the_run_that_left_it_out(tools: LearningTools, app: App) -> None:
    started = tools.session_start(oc.LEARNER, KEY)
    _select_without_weather(tools)
    tools.observe(oc.LEARNER, "tool:t:read_file", "rejected", None, CONTEXT)
    got = tools.observe(oc.LEARNER, WEATHER, "accepted", None, CONTEXT, True)
    assert got["pulls"] == 1 and got["alpha"] == 4.0
    assert _run_arms(app) == {
        "tool:t:read_file": (True, False, 0.0),
        WEATHER: (True, True, 1.0),
    }
    assert app.service(oc.LEARNER).verify().ok
    ended = tools.session_end(started["session_id"])
    assert sorted(ended["selected_arms"]) == [WEATHER, "tool:t:read_file"]
    assert ended["outcomes"] == {"tool:t:read_file": "rejected", WEATHER: "accepted"}


def test_without_loaded_the_observe_stays_an_observation_of_its_own(
    tools: LearningTools, app: App
) -> None:
    _select_without_weather(tools)
    got = tools.observe(oc.LEARNER, WEATHER, "accepted", None, CONTEXT)
    assert got["pulls"] == 1  # the posterior learns all the same
    assert _run_arms(app)[WEATHER] == (False, False, None)
    assert app.service(oc.LEARNER).verify().ok


def test_loaded_must_be_a_flag(tools: LearningTools) -> None:
    with pytest.raises(InvalidInput, match=r"^loaded"):
        tools.observe(oc.LEARNER, WEATHER, "accepted", None, CONTEXT, "yes")


def test_the_spool_keeps_the_flag() -> None:
    pending = PendingArmOutcome(WEATHER, 1.0, True, KEY, True, 5, "k-1", Phase.ACTIVE, True)
    assert read_outcome_line(outcome_line(7, pending, "openclaw")) == (7, "openclaw", pending)
    plain = PendingArmOutcome(WEATHER, 1.0, True, KEY, True, 5, "k-2", Phase.ACTIVE)
    assert '"loaded"' not in outcome_line(7, plain)
    assert read_outcome_line(outcome_line(7, plain))[2] == plain
