"""What the original learning layer's clients read from the HTTP API: average tokens per run,
the summary's accuracy / exploreRatio / totalReward, lastUpdated never null; and the seedBoost
option."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from learning_bot.app import build_app
from learning_bot.engine import LearningConfig, Phase
from learning_bot.engine.arms import Arm
from learning_bot.engine.observation import ReportedArm, RunReport, ToolCall
from learning_bot.engine.usage import Usage
from learning_bot.settings import Settings

from .conftest import Live, start_server, stop_server

ARMS = [
    {"armId": "tool:fs:Read", "tokenCost": 120},
    {"armId": "tool:web:WebSearch", "tokenCost": 200},
    {"armId": "file:workspace:README.md", "tokenCost": 400},
]


def report(trace_id: str, calls: list[str], total: int, **extra: Any) -> dict[str, Any]:
    return {
        "traceId": trace_id,
        "arms": ARMS,
        "toolCalls": [{"name": c} for c in calls],
        "assistantTexts": ["done"],
        "usage": {"input": total, "output": 0},
        "channel": "C-compat",
        **extra,
    }


@pytest.fixture
def live(database_url: str) -> Iterator[Live]:
    server = start_server(database_url)
    yield server
    stop_server(server)


def test_tokens_timeseries_is_the_average_per_run(live: Live) -> None:
    with live.client() as c:
        for i, total in enumerate((1000, 3000, 8000)):
            assert c.post("/observe", json=report(f"t{i}", ["Read"], total)).status_code == 200
        (avg,) = c.get("/timeseries", params={"metric": "tokens"}).json()["buckets"]
        (total,) = c.get("/timeseries", params={"metric": "totalTokens"}).json()["buckets"]
    assert avg["value"] == pytest.approx(4000.0)
    assert total["value"] == pytest.approx(12000.0)


def test_summary_has_accuracy_explore_ratio_and_total_reward(live: Live) -> None:
    with live.client() as c:
        empty = c.get("/summary").json()
        assert (empty["accuracy"], empty["exploreRatio"], empty["totalReward"]) == (None, None, 0)
        # Three runs, one a baseline; each observes 3 arms: Read referenced, the others not.
        for i in range(3):
            body = report(f"s{i}", ["Read"], 100, isBaseline=i == 0)
            assert c.post("/observe", json=body).status_code == 200
        summary = c.get("/summary").json()
        assert c.get("/metrics").json() == summary
    # 9 observations, 3 of them rewarded.
    assert summary["totalReward"] == pytest.approx(3.0)
    assert summary["accuracy"] == pytest.approx(3 / 9)
    assert summary["exploreRatio"] == pytest.approx(1 / 3)


def test_last_updated_is_the_creation_time_until_the_first_update(database_url: str) -> None:
    server = start_server(database_url, phase=Phase.PASSIVE)
    try:
        with server.client() as c:
            assert c.post("/observe", json=report("p0", ["Read"], 10)).status_code == 200
            posteriors = c.get("/posteriors").json()
    finally:
        stop_server(server)
    assert {p["armId"] for p in posteriors} == {a["armId"] for a in ARMS}
    for p in posteriors:
        assert p["pulls"] == 0  # passive: nothing updated them
        assert isinstance(p["lastUpdated"], int) and p["lastUpdated"] > 1_700_000_000_000


def _run(trace_id: str) -> RunReport:
    arms = (
        ReportedArm(Arm("tool:fs:Read", 10), included=True),
        ReportedArm(Arm("tool:web:WebSearch", 10), included=True),
    )
    return RunReport(trace_id, arms, tool_calls=(ToolCall("Read"),), usage=Usage(input=5))


@pytest.mark.parametrize("boost", [None, 10.0])
def test_seed_boost_starts_new_seed_arms_at_beta_b_1(
    database_url: str, boost: float | None
) -> None:
    config = LearningConfig.from_dict({"phase": "active", "seedBoost": boost})
    app = build_app(Settings(database_url=database_url, config=config, cache_ttl=0.0))
    try:
        service = app.service()
        service.observe(_run("b0"))
        arms = service.arms()
        read, search = arms["tool:fs:Read"].posterior, arms["tool:web:WebSearch"].posterior
        # Read is a seed arm and was referenced; WebSearch is no seed and was not.
        start = 3.0 if boost is None else boost
        assert (read.alpha, read.beta, read.pulls) == (start + 1.0, 1.0, 1)
        assert (search.alpha, search.beta, search.pulls) == (3.0, 2.0, 1)
        assert service.verify().ok
        service.reset()
        assert service.arms()["tool:fs:Read"].posterior.alpha == 1.0
    finally:
        app.close()


def test_seed_boost_is_validated_and_read_in_either_key_style() -> None:
    assert LearningConfig.from_dict({"seedBoost": 4}).seed_boost == 4.0
    assert LearningConfig.from_dict({"seed_boost": None}).seed_boost is None
    assert "seedBoost" not in LearningConfig().to_dict()
    for bad in (0, -1, "high", True, float("nan")):
        with pytest.raises(Exception, match="seedBoost"):
            LearningConfig.from_dict({"seedBoost": bad})
