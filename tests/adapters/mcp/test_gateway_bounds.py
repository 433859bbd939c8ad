"""The gateway's `/v1` routes and the MCP tools decode and bound their inputs as the learning
API does (engine.bounds): a value no backend could store is a 400 (a tool error over MCP)
naming its field, nothing is recorded by the call that failed, and every answer is strict
JSON. `GET /mcp` answers 405: a stateless server never sends anything on that stream."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from learning_bot.adapters.http import create_app
from learning_bot.adapters.http.settings import http_settings
from learning_bot.app import App, build_app
from learning_bot.settings import Settings
from learning_bot.surfaces import SURFACES

LEARNER = "gw"
GOOD = {"id": "tool:fs:Read", "metadata": {"label": "Read"}, "token_cost": 10}
OTHER = {"id": "tool:exec:Bash", "metadata": {}, "token_cost": 10}


def _strict(text: str) -> Any:
    def refuse(name: str) -> Any:
        raise ValueError(f"{name} in an answer")

    return json.loads(text, parse_constant=refuse)


def select_body(metadata_json: str = "{}", context_json: str = "null") -> bytes:
    """A select body written by hand, so it can hold what no JSON encoder writes."""
    return (
        f'{{"learner": "{LEARNER}", "candidates": [{json.dumps(OTHER)}, '
        f'{{"id": "tool:fs:Read", "token_cost": 10, "metadata": {metadata_json}}}], '
        f'"context": {context_json}}}'
    ).encode()


def session_id(started: int, name: str = "s") -> str:
    raw = json.dumps([LEARNER, name, started, "abcdef12"])
    return "lb1." + base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


@dataclass
class Gateway:
    app: App
    http: httpx.AsyncClient

    def traces(self) -> int:
        return self.app.service(LEARNER).traces(1000, 0)[1]

    def pulls(self) -> int:
        return sum(v.posterior.pulls for v in self.app.service(LEARNER).posteriors())


@pytest.fixture
async def gateway(database_url: str) -> AsyncIterator[Gateway]:
    app = build_app(Settings(database_url=database_url, cache_ttl=0.0), spool=False)
    mcp = next(e for e in SURFACES if e.name == "MCP").build(app, {})
    asgi = create_app(app.bus, http_settings({}), extra_routes=mcp.routes)
    transport = httpx.ASGITransport(app=asgi)
    running = asyncio.create_task(mcp.run())
    await asyncio.wait_for(mcp.ready.wait(), 120)  # type: ignore[attr-defined]
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            yield Gateway(app, client)
    finally:
        await mcp.stop()
        await running
        app.close()


REFUSED_SELECTS = [
    (select_body('{"size": 1e400}'), "candidates[1].metadata.size"),
    (select_body('{"label": "\\ud800"}'), "candidates[1].metadata"),
    (select_body('{"big": 123456789012345678901234567890}'), "candidates[1].metadata"),
    (select_body(context_json='{"session_key": "a\\u0000b"}'), "context.session_key"),
    (select_body(context_json='{"channel": "\\udfff"}'), "context.channel"),
    (select_body(context_json='{"n": 1e999}'), "context.n"),
]


async def test_v1_refuses_what_storage_could_not_keep_and_records_nothing(
    gateway: Gateway,
) -> None:
    c = gateway.http
    ok = await c.post("/v1/learning/select", content=select_body())
    assert ok.status_code == 200, ok.text
    assert gateway.traces() == 1
    for body, field in REFUSED_SELECTS:
        answer = await c.post("/v1/learning/select", content=body)
        assert answer.status_code == 400, (field, answer.text)
        assert answer.json()["error"].startswith(field), (field, answer.text)
    assert gateway.traces() == 1, "a refused select records no run"

    observe = {"learner": LEARNER, "arm_id": "tool:fs:Read", "outcome": "accepted"}
    for context, field in (
        ({"session_key": "a\x00b"}, "context.session_key"),
        ({"session_key": "ok", "model": "m\x00"}, "context.model"),
    ):
        answer = await c.post("/v1/learning/observe", json={**observe, "context": context})
        assert answer.status_code == 400, answer.text
        assert answer.json()["error"].startswith(field), answer.text
    assert gateway.pulls() == 0, "a refused observe changes nothing"

    for started, name in ((10**20, "s"), (-5, "s"), (1, "a\x00b")):
        end = await c.post(
            "/v1/learning/sessions/end", json={"session_id": session_id(started, name)}
        )
        assert end.status_code == 400, end.text
        assert end.json()["error"].startswith("session_id"), end.text
    end = await c.post("/v1/learning/sessions/end", json={"session_id": session_id(1000)})
    assert end.status_code == 200, end.text
    assert end.json()["started_at"].startswith("1970-01-01")
    assert gateway.traces() == 1


def mcp_call(name: str, arguments_json: str) -> bytes:
    """A JSON-RPC tools/call written by hand (it may hold what no JSON encoder writes)."""
    return (
        f'{{"jsonrpc": "2.0", "id": 7, "method": "tools/call", '
        f'"params": {{"name": "{name}", "arguments": {arguments_json}}}}}'
    ).encode()


MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


async def call_mcp(gateway: Gateway, body: bytes) -> tuple[bool, str]:
    """POST /mcp: whether the call is a tool error, and its text content, read strictly."""
    answer = await gateway.http.post("/mcp", content=body, headers=MCP_HEADERS)
    assert answer.status_code == 200, answer.text
    data = _strict(answer.text)
    result = data["result"]
    text = "".join(block.get("text", "") for block in result["content"])
    if not result.get("isError"):
        _strict(text)
    return bool(result.get("isError")), text


async def test_mcp_tools_refuse_them_too_and_answer_strict_json(gateway: Gateway) -> None:
    hostile = [
        ('{"size": 1e400}', "candidates[1].metadata"),
        ('{"size": Infinity}', "candidates[1].metadata"),
        ('{"size": NaN}', "candidates[1].metadata"),
        ('{"big": 123456789012345678901234567890}', "candidates[1].metadata"),
    ]
    # (A lone surrogate never reaches a tool: the SDK's JSON-RPC parser refuses the message.)
    for metadata, field in hostile:
        arguments = select_body(metadata).decode()
        is_error, text = await call_mcp(gateway, mcp_call("qortex_learning_select", arguments))
        assert is_error, (metadata, text)
        assert field in text, (metadata, text)
    observe = (
        f'{{"learner": "{LEARNER}", "arm_id": "tool:fs:Read", "outcome": "accepted", '
        '"context": {"session_key": "a\\u0000b"}}'
    )
    is_error, text = await call_mcp(gateway, mcp_call("qortex_learning_observe", observe))
    assert is_error and "context.session_key" in text, text
    assert LEARNER not in gateway.app.bus.services.names(), "nothing recorded, no learner made"

    is_error, text = await call_mcp(
        gateway, mcp_call("qortex_learning_select", select_body().decode())
    )
    assert not is_error, text
    assert gateway.traces() == 1


def test_strict_json_maps_what_json_cannot_say_to_null() -> None:
    from learning_bot.adapters.mcp.tools import strict_json

    shaped = strict_json({"a": float("inf"), "b": [float("nan"), 1.5, (2, -float("inf"))]})
    assert shaped == {"a": None, "b": [None, 1.5, [2, None]]}
    assert _strict(json.dumps(shaped, allow_nan=False)) == shaped


async def test_get_mcp_answers_405_at_once(gateway: Gateway) -> None:
    answer = await gateway.http.get("/mcp", headers={"Accept": "text/event-stream"})
    assert answer.status_code == 405, answer.text
    assert "POST" in answer.headers["allow"]
    assert "stateless" in answer.json()["error"]
