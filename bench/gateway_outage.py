"""A PostgreSQL outage under gateway-shaped load: is every acknowledged per-arm outcome stored
exactly once afterwards?

Starts `learning-bot serve` (active phase) on a fresh PostgreSQL schema reached through a local
TCP proxy, and drives OpenClaw gateway turns from several clients: one select with 8
candidates, then one per-arm observe per selected arm, half the clients over `/v1`, half over
MCP (`/mcp`). In the middle the proxy is cut for `--outage` seconds (every connection dropped,
new ones refused: an outage as far as the server can tell, without stopping a PostgreSQL other
work shares). Afterwards it waits for the spool to drain and compares the outcomes the clients
were told succeeded with the pulls stored, and runs `db verify`.

    .venv/bin/python -m bench.gateway_outage --duration 90 --outage 30
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from bench import load
from bench.table import print_table

TOKEN = "bench-token-0123456789abcdef"
LEARNER = "gw"
EXE = str(Path(sys.executable).with_name("learning-bot"))
CANDIDATES = [
    {"id": f"tool:bench:T{i}", "metadata": {"label": f"T{i}"}, "token_cost": 50 + i}
    for i in range(8)
]
HEADERS = {"Authorization": f"Bearer {TOKEN}"}
MCP_HEADERS = {**HEADERS, "Accept": "application/json, text/event-stream"}


@dataclass
class Stats:
    acknowledged: int = 0
    spooled: int = 0
    runs: int = 0
    fallbacks: int = 0
    failed: int = 0
    latencies: list[float] = field(default_factory=list)


async def mcp(client: httpx.AsyncClient, name: str, arguments: dict[str, Any]) -> Any:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
    body["params"] = {"name": name, "arguments": arguments}
    answer = await client.post("/mcp", json=body, headers=MCP_HEADERS)
    answer.raise_for_status()
    result = answer.json()["result"]
    if result.get("isError"):
        raise RuntimeError(result["content"][0]["text"])
    return json.loads(result["content"][0]["text"])


async def v1(client: httpx.AsyncClient, path: str, body: dict[str, Any]) -> Any:
    answer = await client.post(f"/v1/learning/{path}", json=body, headers=HEADERS)
    answer.raise_for_status()
    return answer.json()


async def turns(url: str, k: int, stats: Stats, stop: asyncio.Event) -> None:
    over_mcp = k % 2 == 1
    n = 0
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        while not stop.is_set():
            n += 1
            context = {"session_key": f"c{k}-s{n}", "channel": "bench"}
            select = {"learner": LEARNER, "candidates": CANDIDATES, "context": context}
            t0 = time.perf_counter()
            try:
                if over_mcp:
                    chosen = await mcp(client, "qortex_learning_select", select)
                else:
                    chosen = await v1(client, "select", select)
            except Exception:
                stats.failed += 1
                continue
            stats.latencies.append(time.perf_counter() - t0)
            stats.runs += 1
            stats.fallbacks += "fallback" in chosen
            for i, arm in enumerate(chosen["selected_arms"]):
                observe = {"learner": LEARNER, "arm_id": arm["id"], "context": context}
                observe["outcome"] = "accepted" if (i + n) % 3 else "rejected"
                t0 = time.perf_counter()
                try:
                    if over_mcp:
                        result = await mcp(client, "qortex_learning_observe", observe)
                    else:
                        result = await v1(client, "observe", observe)
                except Exception:
                    stats.failed += 1
                    continue
                stats.latencies.append(time.perf_counter() - t0)
                stats.acknowledged += 1
                stats.spooled += bool(result.get("spooled"))


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--duration", type=float, default=90)
    parser.add_argument("--outage", type=float, default=30)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--port", type=int, default=8797)
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="gateway-outage-"))
    db, cleanup = load.fresh_database("postgresql", tmp)
    parts = urlsplit(db)
    proxy = load.TcpProxy((parts.hostname or "127.0.0.1", parts.port or 5432))
    await proxy.start()
    proxied = db.replace(f"{parts.hostname}:{parts.port}", f"127.0.0.1:{proxy.port}")
    env = {
        **os.environ,
        "LEARNING_BOT_DATABASE_URL": proxied,
        "LEARNING_BOT_API_TOKEN": TOKEN,
        "LEARNING_BOT_PHASE": "active",
        "LEARNING_BOT_SPOOL_DIR": str(tmp / "spool"),
    }
    log = open(tmp / "server.log", "ab")  # noqa: SIM115
    server = subprocess.Popen(
        [EXE, "serve", "--port", str(args.port)], env=env, stdout=log, stderr=log
    )
    url = f"http://127.0.0.1:{args.port}"
    async with httpx.AsyncClient(base_url=url) as probe:
        for _ in range(600):
            try:
                if (await probe.get("/v1/health")).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.1)
    stats = Stats()
    stop = asyncio.Event()
    clients = [asyncio.create_task(turns(url, k, stats, stop)) for k in range(args.clients)]
    start = (args.duration - args.outage) / 2
    await asyncio.sleep(start)
    before = stats.acknowledged
    proxy.cut()
    await asyncio.sleep(args.outage)
    during = stats.acknowledged - before
    proxy.restore()
    await asyncio.sleep(args.duration - start - args.outage)
    stop.set()
    await asyncio.gather(*clients)
    t_drain = time.monotonic()
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        while True:
            health = await client.get(
                "/__openclaw__/api/learning/healthz", params={"learner": LEARNER}
            )
            if health.status_code == 200 and not health.json().get("spool", {}).get("pending"):
                break
            await asyncio.sleep(0.2)
        drained = time.monotonic() - t_drain
        posteriors = (await client.get(f"/v1/learning/{LEARNER}/posteriors")).json()
        summary = (
            await client.get("/__openclaw__/api/learning/summary", params={"learner": LEARNER})
        ).json()
    server.send_signal(signal.SIGTERM)
    server.wait(timeout=30)
    stored = sum(p["pulls"] for p in posteriors["posteriors"].values())
    verify = subprocess.run(
        [EXE, "--database-url", db, "db", "verify"], capture_output=True, text=True, env=env
    )
    await proxy.close()
    if cleanup is not None:
        admin, schema = cleanup
        with admin.begin() as conn:
            conn.exec_driver_sql(f"DROP SCHEMA {schema} CASCADE")
    ms = sorted(x * 1000 for x in stats.latencies)
    rows = [
        ("outage", f"{args.outage:g} s of {args.duration:g} s", "clients", f"{args.clients}"),
        ("selects answered", f"{stats.runs:,}", "runs stored", f"{summary['traceCount']:,}"),
        ("outcomes acknowledged", f"{stats.acknowledged:,}", "pulls stored", f"{stored:,}"),
        ("during the outage", f"{during:,}", "spooled", f"{stats.spooled:,}"),
        ("select fallbacks", f"{stats.fallbacks:,}", "failed calls", f"{stats.failed:,}"),
        ("call p50", f"{statistics.median(ms):.1f} ms", "p99", f"{ms[int(len(ms) * 0.99)]:.1f} ms"),
        ("spool drained in", f"{drained:.1f} s", "db verify", f"exit {verify.returncode}"),
    ]
    print_table(("", "", "", ""), rows)
    ok = stored == stats.acknowledged and stats.runs == summary["traceCount"]
    ok = ok and verify.returncode == 0 and stats.failed == 0
    print("result:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
