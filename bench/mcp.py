"""How fast are OpenClaw's learning-backend calls (select at 30 arms, and one observe) over MCP,
next to the same calls over the `/v1` REST routes, the learning API's `POST select`, in process,
and qortex 0.8.1's own MCP server on the same machine?

Each transport gets a fresh temporary SQLite file and the learner in the active phase; every
call is timed as one client round trip from one client (median, p99). The qortex server is
the test peer's cached virtualenv (tests/adapters/mcp/qortex_peer.py; built on first use);
it is left out, with the reason, when it cannot be installed.

    .venv/bin/python bench/mcp.py [--calls 300]
"""

from __future__ import annotations

import sys

# bench/select.py would shadow the standard library's `select` module: drop this folder.
sys.path[:] = [p for p in sys.path if not p.rstrip("/").endswith("bench")]

import argparse  # noqa: E402
import asyncio  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Awaitable, Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import httpx  # noqa: E402
import httpx2  # noqa: E402
from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.adapters.mcp.qortex_peer import PEER_ENV, ensure_qortex  # noqa: E402

LEARNER = "openclaw"
TOKEN = "bench-token-0123456789abcdef"
CONTEXT = {"session_key": "agent:main:bench", "channel": "slack", "provider": "x", "model": "y"}
CANDIDATES = [
    {
        "id": f"tool:t{i % 5}:tool{i}",
        "metadata": {"type": "tool", "label": f"tool{i}"},
        "token_cost": 150 + 10 * i,
    }
    for i in range(30)
]
SELECT = {
    "learner": LEARNER,
    "candidates": CANDIDATES,
    "context": CONTEXT,
    "k": 0,
    "token_budget": 3000,
    "min_pulls": 0,
    "seed_arms": [],
}
OBSERVE = {
    "learner": LEARNER,
    "arm_id": "tool:t0:tool0",
    "outcome": "accepted",
    "reward": 1.0,
    "context": CONTEXT,
}
ACTIVE = {"phase": "active", "confirm": True, "learner": LEARNER}
Call = Callable[[str, dict[str, Any]], Awaitable[Any]]


def stats(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return statistics.median(ordered) * 1000, p99 * 1000


async def timed(call: Call, calls: int) -> dict[str, tuple[float, float]]:
    for _ in range(20):  # warm up
        await call("qortex_learning_select", SELECT)
        await call("qortex_learning_observe", OBSERVE)
    out = {}
    for name, args in (("select", SELECT), ("observe", OBSERVE)):
        samples = []
        tool = f"qortex_learning_{name}"
        for _ in range(calls):
            start = time.perf_counter()
            await call(tool, args)
            samples.append(time.perf_counter() - start)
        out[name] = stats(samples)
    return out


def session_call(session: ClientSession) -> Call:
    async def call(name: str, args: dict[str, Any]) -> Any:
        result = await session.call_tool(name, args)
        if result.is_error:
            raise RuntimeError(f"{name}: {result.content}")
        return result

    return call


async def in_process(db: Path, calls: int) -> dict[str, tuple[float, float]]:
    from learning_bot.adapters.mcp.tools import LearningTools
    from learning_bot.app import build_app
    from learning_bot.settings import load_settings

    app = build_app(load_settings(database_url=f"sqlite:///{db}"))
    try:
        tools = LearningTools(app.bus)
        tools.learning_phase("active", True, LEARNER)
        methods = {"qortex_learning_select": tools.select, "qortex_learning_observe": tools.observe}

        async def call(name: str, args: dict[str, Any]) -> Any:
            return methods[name](**args)

        return await timed(call, calls)
    finally:
        app.close()


async def over_stdio(params: StdioServerParameters, calls: int, ours: bool) -> Any:
    with open(os.devnull, "w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            if ours:
                await session.call_tool("learning_phase", ACTIVE)
            return await timed(session_call(session), calls)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def with_server(db: Path, work: Callable[[str], Awaitable[Any]]) -> Any:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEARNING_BOT_")}
    env.update(LEARNING_BOT_DATABASE_URL=f"sqlite:///{db}", LEARNING_BOT_API_TOKEN=TOKEN)
    program = Path(sys.executable).with_name("learning-bot")
    proc = subprocess.Popen(
        [str(program), "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient() as client:
            for _ in range(400):
                try:
                    if (await client.get(f"{base}/v1/health")).status_code == 200:
                        break
                except httpx.TransportError:
                    await asyncio.sleep(0.05)
        return await work(base)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(15)


async def mcp_http(base: str, calls: int) -> Any:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with (
        httpx2.AsyncClient(headers=headers) as http,
        streamable_http_client(f"{base}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        await session.call_tool("learning_phase", ACTIVE)
        return await timed(session_call(session), calls)


async def rest(base: str, calls: int, api_select: bool) -> Any:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(base_url=base, headers=headers) as client:
        learning = "/__openclaw__/api/learning"
        await client.post(f"{learning}/phase", params={"learner": LEARNER}, json=ACTIVE)
        arms = [{"armId": c["id"], "tokenCost": c["token_cost"]} for c in CANDIDATES]

        async def call(name: str, args: dict[str, Any]) -> Any:
            if api_select and name == "qortex_learning_select":
                r = await client.post(
                    f"{learning}/select", params={"learner": LEARNER}, json={"arms": arms}
                )
            else:
                path = "select" if name.endswith("select") else "observe"
                r = await client.post(f"/v1/learning/{path}", json=args)
            r.raise_for_status()
            return r.json()

        return await timed(call, calls)


def row(label: str, result: Any, reference: float | None) -> str:
    if isinstance(result, str):
        return f"| {label} | {result} | | | |"
    (s_med, s_p99), (o_med, o_p99) = result["select"], result["observe"]
    ratio = f"{s_med / reference:.1f}x" if reference else "1.0x"
    return f"| {label} | {s_med:.2f} / {s_p99:.2f} | {o_med:.2f} / {o_p99:.2f} | {ratio} |"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()
    n = args.calls
    tmp = Path(tempfile.mkdtemp(prefix="bench-mcp-"))
    results: list[tuple[str, Any]] = []
    local = await in_process(tmp / "inproc.sqlite", n)
    results.append(("in process (the same tool functions)", local))
    ours = StdioServerParameters(
        command=sys.executable,
        args=["-m", "learning_bot", "mcp", f"--database-url=sqlite:///{tmp / 'stdio.sqlite'}"],
        env={"HOME": str(tmp)},
    )
    results.append(("MCP over stdio (python -m learning_bot mcp)", await over_stdio(ours, n, True)))
    results.append(
        (
            "MCP over Streamable HTTP (/mcp)",
            await with_server(tmp / "mh.sqlite", lambda b: mcp_http(b, n)),
        )
    )
    results.append(
        (
            "REST /v1/learning/select, observe",
            await with_server(tmp / "r.sqlite", lambda b: rest(b, n, False)),
        )
    )
    results.append(
        (
            "HTTP POST select (learning API) + /v1 observe",
            await with_server(tmp / "a.sqlite", lambda b: rest(b, n, True)),
        )
    )
    program, reason = ensure_qortex()
    if program is None:
        results.append(("qortex 0.8.1 MCP over stdio", f"left out: {reason}"))
    else:
        home = tmp / "qortex-home"
        home.mkdir()
        peer = StdioServerParameters(
            command=str(program), args=["mcp-serve"], env={"HOME": str(home), **PEER_ENV}
        )
        results.append(("qortex 0.8.1 MCP over stdio", await over_stdio(peer, n, False)))
    reference = local["select"][0]
    print(f"30 arms, {n} calls each, one client; milliseconds")
    print("| path | select median / p99 | observe median / p99 | select vs in process |")
    print("|---|---|---|---|")
    for label, result in results:
        print(row(label, result, reference))


if __name__ == "__main__":
    asyncio.run(main())
