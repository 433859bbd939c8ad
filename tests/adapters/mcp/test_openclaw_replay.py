"""OpenClaw's gateway replayed for 50 runs of one conversation (budget 4,000, minPulls 2, 30
candidate tools, each run's observes sent at once), from an empty learner, over each way the
gateway reaches its learning backend: MCP over stdio (`learning-bot mcp`), MCP over
Streamable HTTP (`/mcp` of `learning-bot serve`) and the `/v1` REST routes.

Every observe counts once: each arm's pulls are the observes sent for it and the learner's
totals what was sent. And once each arm has been seen `minPulls` times, the session's
selection keeps to the budget: only seeds and arms still under minPulls may go past it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("mcp", reason="the mcp SDK is not installed")

import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from . import openclaw_calls as oc
from . import openclaw_replay as rp
from .conftest import TOKEN, serving, stdio_params

pytestmark = pytest.mark.slow

SETTINGS = {
    "LEARNING_BOT_PHASE": "active",
    # no baseline session (every arm within the budget, 10% of sessions by default): the one
    # session of the replay is a selection whatever the coin says
    "LEARNING_BOT_BASELINE_RATE": "0",
}
AUTH = {"Authorization": f"Bearer {TOKEN}"}
TIMEOUT = 120.0


@asynccontextmanager
async def over_stdio(tmp_path: Path, url: str) -> AsyncIterator[oc.CallTool]:
    params = stdio_params(url, tmp_path / "home")
    params.env = {**(params.env or {}), **SETTINGS}
    with (tmp_path / "stderr.txt").open("w") as errlog:
        async with oc.stdio_session(params, errlog) as session:
            yield oc.session_caller(session, TIMEOUT)


@asynccontextmanager
async def over_streamable_http(tmp_path: Path, url: str) -> AsyncIterator[oc.CallTool]:
    async with (
        serving(tmp_path, {**SETTINGS, "LEARNING_BOT_DATABASE_URL": url}) as served,
        httpx2.AsyncClient(headers=AUTH, timeout=TIMEOUT) as http,
        streamable_http_client(f"{served.base}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield oc.session_caller(session, TIMEOUT)


REST_POSTS = {
    "qortex_learning_select": "/v1/learning/select",
    "qortex_learning_observe": "/v1/learning/observe",
    "qortex_learning_session_start": "/v1/learning/sessions/start",
    "qortex_learning_session_end": "/v1/learning/sessions/end",
}


@asynccontextmanager
async def over_rest(tmp_path: Path, url: str) -> AsyncIterator[oc.CallTool]:
    async with (
        serving(tmp_path, {**SETTINGS, "LEARNING_BOT_DATABASE_URL": url}) as served,
        httpx.AsyncClient(base_url=served.base, headers=AUTH, timeout=TIMEOUT) as client,
    ):

        async def call(name: str, arguments: dict[str, Any]) -> oc.ToolReply:
            if name in REST_POSTS:
                response = await client.post(REST_POSTS[name], json=arguments)
            else:  # posteriors, metrics: GET /v1/learning/{learner}/...
                read = name.removeprefix("qortex_learning_")
                response = await client.get(f"/v1/learning/{arguments['learner']}/{read}")
            return oc.reply_of(name, arguments, not response.is_success, response.text)

        try:
            yield call
        except httpx.TransportError as exc:
            output = served.process.output()
            raise AssertionError(f"serve stopped answering: {exc!r}\n{output}") from exc


Transport = Callable[[Path, str], AbstractAsyncContextManager[oc.CallTool]]
TRANSPORTS: dict[str, Transport] = {
    "stdio": over_stdio,
    "streamable-http": over_streamable_http,
    "rest": over_rest,
}
Replayed = tuple[rp.Replay, dict[str, Any], dict[str, Any]]
_on_sqlite: dict[str, Replayed] = {}


async def replayed(transport: str, root: Path, url: str) -> Replayed:
    """The replay over `transport` and what the learner holds after it."""
    async with TRANSPORTS[transport](root, url) as call:
        done = await rp.replay(call)
        posteriors, metrics = await rp.learned(call)
    return done, posteriors, metrics


async def replayed_on_sqlite(transport: str, factory: pytest.TempPathFactory) -> Replayed:
    """The replay over `transport` on a SQLite file, once per test run (the count and the
    budget tests read the same replay)."""
    if transport not in _on_sqlite:
        root = factory.mktemp(transport)
        url = f"sqlite:///{root / 'learning.sqlite'}"
        _on_sqlite[transport] = await replayed(transport, root, url)
    return _on_sqlite[transport]


@pytest.mark.parametrize("transport", list(TRANSPORTS))
async def test_every_observe_counts_once(
    transport: str, database_url: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    if database_url.startswith("sqlite"):
        done, posteriors, metrics = await replayed_on_sqlite(transport, tmp_path_factory)
    else:
        root = tmp_path_factory.mktemp(f"{transport}-pg")
        done, posteriors, metrics = await replayed(transport, root, database_url)
    rp.check_counts(done, posteriors, metrics)


@pytest.mark.parametrize("transport", list(TRANSPORTS))
async def test_the_session_keeps_to_the_budget_once_arms_are_explored(
    transport: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    done, _, _ = await replayed_on_sqlite(transport, tmp_path_factory)
    assert done.errors == []
    problems = rp.over_budget(done, start=10)
    assert problems == [], "\n".join(problems)
