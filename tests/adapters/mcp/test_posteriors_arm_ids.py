"""`GET /v1/learning/{learner}/posteriors` answers the arms asked for in every way a client
writes `arm_ids` in a query: OpenClaw's REST bridge turns the tool's `arm_ids` array into a
string (`a,b,c`); query-string libraries repeat the key, with or without `[]`; a JSON array
is read as one. Three of thirty arms asked for: three answered."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import httpx
import pytest

from learning_bot.adapters.http import create_app
from learning_bot.adapters.http.settings import http_settings
from learning_bot.app import build_app
from learning_bot.settings import Settings
from learning_bot.surfaces import SURFACES

LEARNER = "bridge"
ARMS = [f"tool:kit:T{i:02d}" for i in range(30)]
ASKED = ["tool:kit:T03", "tool:kit:T17", "tool:kit:T29"]


@pytest.fixture
async def client(database_url: str) -> AsyncIterator[httpx.AsyncClient]:
    app = build_app(Settings(database_url=database_url, cache_ttl=0.0), spool=False)
    mcp = next(e for e in SURFACES if e.name == "MCP").build(app, {})
    asgi = create_app(app.bus, http_settings({}), extra_routes=mcp.routes)
    running = asyncio.create_task(mcp.run())
    await asyncio.wait_for(mcp.ready.wait(), 60)  # type: ignore[attr-defined]
    try:
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=asgi), base_url="http://127.0.0.1"
        ) as http:
            candidates = [{"id": a, "metadata": {}, "token_cost": 10} for a in ARMS]
            select = await http.post(
                "/v1/learning/select", json={"learner": LEARNER, "candidates": candidates}
            )
            assert select.status_code == 200, select.text
            yield http
    finally:
        await mcp.stop()
        await running
        app.close()


@pytest.mark.parametrize(
    "query",
    [
        [("arm_ids", ",".join(ASKED))],
        [("arm_ids", a) for a in ASKED],
        [("arm_ids[]", a) for a in ASKED],
        [("arm_ids", json.dumps(ASKED))],
    ],
    ids=["bridge-string", "repeated", "brackets", "json-array"],
)
async def test_three_arms_asked_three_answered(
    client: httpx.AsyncClient, query: list[tuple[str, str]]
) -> None:
    every = await client.get(f"/v1/learning/{LEARNER}/posteriors")
    assert every.status_code == 200, every.text
    assert set(every.json()["posteriors"]) == set(ARMS)
    answer = await client.get(f"/v1/learning/{LEARNER}/posteriors", params=query)
    assert answer.status_code == 200, answer.text
    assert sorted(answer.json()["posteriors"]) == ASKED
