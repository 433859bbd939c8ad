"""The learner's settings over HTTP (POST settings, beside phase) and MCP (learning_config):
the same command as `/learning config`, so the same validation, audit and idempotence."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from learning_bot.adapters.mcp.tools import ToolFailed
from learning_bot.app import build_app
from learning_bot.engine import LearningConfig
from learning_bot.engine.errors import InvalidInput
from learning_bot.settings import Settings
from learning_bot.surfaces import mcp_tools

from .conftest import Live, start_server, stop_server


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    path: Path = tmp_path_factory.mktemp("settings") / "api.sqlite"
    server = start_server(f"sqlite:///{path}")
    yield server
    stop_server(server)


def test_settings_route(served: Live) -> None:
    with served.client() as client:
        changed = client.post("/settings", json={"settings": {"halfLife": 40, "policy": "seed"}})
        assert changed.status_code == 200, changed.text
        body = changed.json()
        assert body["settings"]["halfLife"] == 40 and body["learner"] == "default"
        assert "halfLife" in body["changed"]
        again = client.post("/settings", json={"settings": {"halfLife": 40}})
        assert again.status_code == 200 and again.json()["changed"] == []
        assert client.get("/config").json()["halfLife"] == 40
        for payload, words in (
            ({"settings": {"halfLife": -1}}, "halfLife"),
            ({"settings": {"policy": "nope"}}, "policy"),
            ({"settings": {"phase": "active"}}, "phase command"),
            ({"settings": {}}, "non-empty object"),
            ({"settings": {"halfLife": 1}, "x": 1}, "unexpected field"),
            ([1], "JSON object"),
        ):
            refused = client.post("/settings", json=payload)
            assert refused.status_code == 400 and words in refused.text, (payload, refused.text)
        assert client.get("/config").json()["halfLife"] == 40
    with served.client(token=None) as anonymous:
        assert anonymous.post("/settings", json={"settings": {"halfLife": 3}}).status_code == 401


def test_mcp_config_tool(database_url: str) -> None:
    app = build_app(Settings(database_url=database_url, config=LearningConfig(), cache_ttl=0.0))
    try:
        tools = mcp_tools(app)
        with pytest.raises(ToolFailed, match="unknown learner"):  # a read creates nothing
            tools.learning_config(None, "mcp-config")
        text = tools.learning_config({"halfLife": 25}, "mcp-config")
        assert "-> 25" in text
        assert "halfLife" in tools.learning_config(None, "mcp-config")
        assert "nothing changed" in tools.learning_config({"halfLife": 25}, "mcp-config")
        assert app.service("mcp-config").config.half_life == 25
        with pytest.raises(ToolFailed, match="unknown setting"):
            tools.learning_config({"bogus": 1}, "mcp-config")
        with pytest.raises(InvalidInput, match="settings"):
            tools.learning_config(["halfLife"], "mcp-config")
    finally:
        app.close()
