"""The gateway's paths while PostgreSQL is down, as the learning API's: `/v1` and MCP select
fall back to every candidate and say so, `/v1` and MCP per-arm observes are spooled and
recorded exactly once when storage is back, also by a server started during the outage; and
`db verify` passes afterwards."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from learning_bot.adapters.http import create_app
from learning_bot.adapters.http.settings import http_settings
from learning_bot.app import App, build_app
from learning_bot.cli import main
from learning_bot.engine import LearningConfig, Phase
from learning_bot.engine.store_records import PendingArmOutcome
from learning_bot.settings import Settings
from learning_bot.surfaces import SURFACES

from .test_storage_down import Proxy, proxied, wait_until  # noqa: F401  (fixture)

pytestmark = pytest.mark.postgres

LEARNER = "gw"
CANDIDATES = [
    {"id": "tool:fs:Read", "metadata": {}, "token_cost": 10},
    {"id": "tool:exec:Bash", "metadata": {}, "token_cost": 10},
    {"id": "skill:deploy:main", "metadata": {}, "token_cost": 10},
]
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}


@asynccontextmanager
async def gateway(url: str) -> AsyncIterator[tuple[App, httpx.AsyncClient]]:
    """One `serve` process's app, `/v1` and `/mcp`, in this process."""
    settings = Settings(database_url=url, config=LearningConfig(phase=Phase.ACTIVE), cache_ttl=0.0)
    app = build_app(settings, serving=True)
    mcp = next(e for e in SURFACES if e.name == "MCP").build(app, {})
    asgi = create_app(app.bus, http_settings({}), extra_routes=mcp.routes)
    running = asyncio.create_task(mcp.run())
    await asyncio.wait_for(mcp.ready.wait(), 120)  # type: ignore[attr-defined]
    transport = httpx.ASGITransport(app=asgi)
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            yield app, client
    finally:
        await mcp.stop()
        await running
        app.close()


async def mcp_call(client: httpx.AsyncClient, name: str, arguments: dict[str, Any]) -> Any:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }
    answer = await client.post("/mcp", json=body, headers=MCP_HEADERS)
    assert answer.status_code == 200, answer.text
    result = answer.json()["result"]
    assert not result.get("isError"), result
    return json.loads(result["content"][0]["text"])


class Turns:
    """Gateway turns (a select, then one observe per candidate), over `/v1` or MCP; counts
    the acknowledged outcomes."""

    def __init__(self) -> None:
        self.acknowledged = 0
        self.runs = 0
        self.spooled = 0
        self.fallbacks = 0

    async def turn(self, client: httpx.AsyncClient, session: str, *, over_mcp: bool) -> None:
        context = {"session_key": session, "channel": "c"}
        select = {"learner": LEARNER, "candidates": CANDIDATES, "context": context}
        if over_mcp:
            chosen = await mcp_call(client, "qortex_learning_select", select)
        else:
            answer = await client.post("/v1/learning/select", json=select)
            assert answer.status_code == 200, answer.text
            chosen = answer.json()
        self.runs += 1
        if "fallback" in chosen:
            assert "unavailable" in chosen["fallback"]
            assert len(chosen["selected_arms"]) == len(CANDIDATES), "every candidate"
            self.fallbacks += 1
        for i, arm in enumerate(chosen["selected_arms"]):
            observe = {
                "learner": LEARNER,
                "arm_id": arm["id"],
                "outcome": "accepted" if i % 2 else "rejected",
                "context": context,
            }
            if over_mcp:
                result = await mcp_call(client, "qortex_learning_observe", observe)
            else:
                answer = await client.post("/v1/learning/observe", json=observe)
                assert answer.status_code == 200, answer.text
                result = answer.json()
            self.acknowledged += 1
            self.spooled += bool(result.get("spooled"))


async def test_gateway_outcomes_survive_a_postgresql_outage_exactly_once(
    proxied: tuple[Proxy, str],  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    proxy, url = proxied
    monkeypatch.setenv("LEARNING_BOT_SPOOL_DIR", str(tmp_path / "spool"))
    proxy.up = True
    turns = Turns()
    async with gateway(url) as (first, client):
        await turns.turn(client, "before", over_mcp=False)
        proxy.down()
        for k in range(4):
            await turns.turn(client, f"v1-{k}", over_mcp=False)
            await turns.turn(client, f"mcp-{k}", over_mcp=True)
        async with gateway(url) as (late, late_client):  # started during the outage
            await turns.turn(late_client, "late-v1", over_mcp=False)
            await turns.turn(late_client, "late-mcp", over_mcp=True)
            async with stdio_session(url, tmp_path) as stdio:  # `learning-bot mcp`, too
                await stdio_turn(stdio, turns)
                await outage_and_recovery(proxy, turns, first, late, tmp_path / "spool")
    capsys.readouterr()
    assert main(["--database-url", url, "db", "verify"]) == 0, capsys.readouterr().out


async def outage_and_recovery(
    proxy: Proxy, turns: Turns, first: App, late: App, spool: Path
) -> None:
    """Storage back: every process replays its spool; each acknowledged outcome once."""
    assert turns.spooled >= 11 * len(CANDIDATES), "the outage's outcomes were spooled"
    assert turns.fallbacks >= 3, "a process with nothing cached selects every candidate"
    proxy.up = True
    for app in (first, late):
        wait_until(lambda app=app: not app.service(LEARNER).spool_health()["pending"])
    wait_until(lambda: not any(spool.glob("p*/*.jsonl")))  # the stdio process's too
    # A replay of what was replayed already changes nothing (each outcome's key).
    service = first.service(LEARNER)
    service.refresh(force=True)
    pulls = sum(v.posterior.pulls for v in service.posteriors())
    assert pulls == turns.acknowledged, "every acknowledged outcome, exactly once"
    traces = service.traces(1000, 0)[1]
    assert traces == turns.runs
    assert first.service(LEARNER).spool_health()["deadLetters"] == 0

    # A replay that runs again over what it wrote already (storage failed before the
    # segment was deleted) records each outcome once: its key.
    writer: Any = first.writer
    again = PendingArmOutcome(
        "tool:fs:Read", 1.0, True, "before", True, 1, "arm-outcome:same", Phase.ACTIVE
    )
    for _ in range(2):
        writer.spool.append_outcome(service.learner_id, again)
        writer.replay_now()
    service.refresh(force=True)
    assert sum(v.posterior.pulls for v in service.posteriors()) == pulls + 1


@asynccontextmanager
async def stdio_session(url: str, root: Path) -> AsyncIterator[ClientSession]:
    """`python -m learning_bot mcp` as the gateway spawns it, started during the outage."""
    env = {
        "HOME": str(root / "home"),
        "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
        "LEARNING_BOT_SPOOL_DIR": os.environ["LEARNING_BOT_SPOOL_DIR"],
        "LEARNING_BOT_PHASE": "active",
    }
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "learning_bot", "mcp", f"--database-url={url}"],
        env=env,
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


async def stdio_call(session: ClientSession, name: str, arguments: dict[str, Any]) -> Any:
    result = await session.call_tool(name, arguments)
    text = "".join(getattr(block, "text", "") for block in result.content)
    assert not result.is_error, text
    return json.loads(text)


async def stdio_turn(session: ClientSession, turns: Turns) -> None:
    context = {"session_key": "stdio", "channel": "c"}
    select = {"learner": LEARNER, "candidates": CANDIDATES, "context": context}
    chosen = await stdio_call(session, "qortex_learning_select", select)
    turns.runs += 1
    assert "unavailable" in chosen["fallback"], chosen
    turns.fallbacks += 1
    for arm in chosen["selected_arms"]:
        observe = {"learner": LEARNER, "arm_id": arm["id"], "outcome": "accepted"}
        result = await stdio_call(
            session, "qortex_learning_observe", {**observe, "context": context}
        )
        assert result["spooled"] is True
        turns.acknowledged += 1
        turns.spooled += 1
