"""A write that only acts on what a learner holds (a reward, a reset, a reset's undo) names a
learner that must exist: an unknown one is a 404 that leaves no empty learner behind, over HTTP,
MCP and the bus alike; and an empty `?learner=` is refused, not taken for the default learner."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from learning_bot.adapters.mcp.tools import ToolFailed
from learning_bot.app import build_app
from learning_bot.engine import LearningConfig
from learning_bot.settings import Settings
from learning_bot.surfaces import mcp_tools

from .conftest import Live, start_server, stop_server

ARMS = [{"armId": "tool:fs:Read", "tokenCost": 40}, {"armId": "tool:fs:Write", "tokenCost": 60}]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    path: Path = tmp_path_factory.mktemp("unknown") / "api.sqlite"
    server = start_server(f"sqlite:///{path}")
    yield server
    stop_server(server)


def test_reward_reset_and_undo_of_an_unknown_learner_are_404_and_create_nothing(
    served: Live,
) -> None:
    with served.client() as client:
        for path, body in (
            ("/reward", {"armId": "tool:fs:Read", "reward": 1}),
            ("/reset", {}),
            ("/reset", {"armIds": ["tool:fs:Read"]}),
            ("/reset/undo", {}),
        ):
            answer = client.post(path, params={"learner": "typo"}, json=body)
            assert answer.status_code == 404, (path, answer.text)
            assert "unknown learner 'typo'" in answer.json()["error"], answer.text
        assert "typo" not in client.get("/learners").json()["learners"]
        # A learner comes into being with its runtime's first select, and is then reset.
        assert client.post("/select", params={"learner": "real"}, json={"arms": ARMS}).is_success
        reset = client.post("/reset", params={"learner": "real"}, json={})
        assert reset.status_code == 200, reset.text


@pytest.mark.parametrize("empty", ["", " ", "%20%20"])
def test_an_empty_learner_parameter_is_refused_not_read_as_the_default(
    served: Live, empty: str
) -> None:
    with served.client() as client:
        before = client.get("/posteriors").json()
        for path, body in (("/reset", {}), ("/select", {"arms": ARMS}), ("/phase", None)):
            answer = (
                client.post(f"{path}?learner={empty}", json=body)
                if body is not None
                else client.get(f"{path}?learner={empty}")
            )
            assert answer.status_code == 400, (path, answer.text)
            assert "?learner= parameter is empty" in answer.json()["error"], answer.text
        assert client.get("/posteriors").json() == before


def test_the_mcp_reset_of_an_unknown_learner_is_an_error_and_creates_nothing(
    database_url: str,
) -> None:
    app = build_app(Settings(database_url=database_url, config=LearningConfig(), cache_ttl=0.0))
    try:
        tools = mcp_tools(app)
        with pytest.raises(ToolFailed, match="unknown learner 'nobody'"):
            tools.reset("nobody")
        with pytest.raises(ToolFailed, match="unknown learner 'nobody'"):
            tools.learning_reward("tool:fs:Read", 1.0, None, "nobody")
        assert "nobody" not in getattr(app.store, "learner_names")()  # noqa: B009
    finally:
        app.close()


def test_an_undo_body_must_be_an_object_and_takes_no_fields(served: Live) -> None:
    with served.client() as client:
        for body in ("[]", '"str"', "null", "3"):
            answer = client.post(
                "/reset/undo", content=body, headers={"Content-Type": "application/json"}
            )
            assert answer.status_code == 400, (body, answer.text)
            assert "must be a JSON object (or empty)" in answer.json()["error"], answer.text
        answer = client.post("/reset/undo", json={"armId": "x"})
        assert answer.status_code == 400
        assert answer.json()["error"] == 'unknown field "armId"; this body takes no fields'
