"""How long does a signed `/learning status` take through the Slack app, on a database of 1M
traces and 1,000 arms? Slack drops an answer after 3 s; the target is p99 <= 300 ms.

The database (a SQLite file kept in /tmp/learning-bot-bench and reused by later runs; --rebuild
starts it again) holds one learner with 1,000 tool arms: the first trace includes all of them,
every other trace includes 5 drawn at random and calls some of them, so every trace updates
posteriors. Traces are loaded with `LearningService.observe_many` in batches of 5,000.

A server process runs the Slack app (slack-bolt AsyncApp behind its Starlette adapter) with
uvicorn on a free port, mounted twice: at /slack/events with the default settings (a read is
answered in the acknowledgement) and at /slack/deferred with SLACK_INLINE_SECONDS=0 (every read
is acknowledged with "Working on it..." and answered through response_url). This process plays
Slack: it signs url-encoded slash-command bodies with the signing secret and the current
timestamp, sends them one at a time, and serves the Web API (auth.test) and the response_url
endpoint. Each request is timed from just before it is sent to:

1. inline: the HTTP response, which carries the status blocks;
2. deferred: the HTTP response (the acknowledgement), then the response_url post with the status;

next to the reference measured in the same run: `CommandBus.dispatch` of the same status in
this process (no HTTP, signature, Slack rendering or threads). The three kinds of call take
turns; median and p99 are over every timed call.

    .venv/bin/python bench/slack.py [--quick] [--traces N] [--calls N] [--rebuild]
"""

from __future__ import annotations

import sys
from pathlib import Path

# bench/select.py and bench/storage.py would shadow the standard library's `select` and the
# project's `storage`: take this folder off the import path, put the project root on it.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

import argparse  # noqa: E402
import asyncio  # noqa: E402
import gc  # noqa: E402
import multiprocessing as mp  # noqa: E402
import platform  # noqa: E402
import socket  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from typing import Any  # noqa: E402
from urllib.parse import urlencode  # noqa: E402

import httpx  # noqa: E402
import numpy as np  # noqa: E402
from aiohttp import web  # noqa: E402
from slack_sdk.signature import SignatureVerifier  # noqa: E402

from learning_bot.bot.bus import Actor, Invocation  # noqa: E402
from learning_bot.engine import Arm, LearningConfig, Phase, ReportedArm, RunReport, ToolCall  # noqa: E402
from learning_bot.storage.database import HEAD_REVISION, SchemaError  # noqa: E402

SECRET = "bench-signing-secret-0123456789"
ARMS = 1_000
ARMS_PER_TRACE = 5
BATCH = 5_000
FULL_TRACES = 1_000_000
CACHE = Path(tempfile.gettempdir()) / "learning-bot-bench"
TARGET_P99 = 0.300


def config() -> LearningConfig:
    return LearningConfig(phase=Phase.ACTIVE)


# -- the database ----------------------------------------------------------------------------


def inventory() -> list[Arm]:
    rng = np.random.default_rng(5)
    costs = rng.integers(50, 2_000, ARMS)
    return [Arm(f"tool:bench:T{i:04d}", int(costs[i])) for i in range(ARMS)]


def reports(arms: list[Arm], first: int, last: int, rng: np.random.Generator) -> list[RunReport]:
    """Traces first..last-1: trace 0 includes every arm, the rest ARMS_PER_TRACE each; an arm
    is used with its own fixed probability (so posteriors spread out)."""
    usefulness = np.random.default_rng(6).beta(1.2, 2.5, ARMS)
    out = []
    base = 1_700_000_000_000
    for i in range(first, last):
        picked = np.arange(ARMS) if i == 0 else rng.choice(ARMS, ARMS_PER_TRACE, replace=False)
        used = [int(j) for j in picked if rng.random() < usefulness[j]]
        calls = [ToolCall(arms[j].id.rsplit(":", 1)[1]) for j in used] or [ToolCall("Outside")]
        out.append(
            RunReport(
                trace_id=f"t{i}",
                arms=tuple(ReportedArm(arms[int(j)]) for j in picked),
                tool_calls=tuple(calls),
                channel=f"C{i % 50}",
                timestamp=base + i * 1_000,
            )
        )
    return out


def stored_traces(url: str) -> int | None:
    from learning_bot.engine.service import LearningService
    from learning_bot.storage import SqlStore

    try:
        store = SqlStore(url, auto_create=False)
    except SchemaError:
        return None
    try:
        return LearningService(store, config()).summary().trace_count
    finally:
        store.close()


def database(traces: int, rebuild: bool) -> tuple[str, str]:
    """A kept SQLite file with `traces` traces over ARMS arms; (url, how it was obtained)."""
    from learning_bot.engine.service import LearningService
    from learning_bot.storage import SqlStore

    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / f"slack-r{HEAD_REVISION}-{ARMS}arms-{traces}.sqlite"
    url = f"sqlite:///{path}"
    if path.exists() and not rebuild and stored_traces(url) == traces:
        return url, "kept from an earlier run"
    for extra in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        extra.unlink(missing_ok=True)
    arms = inventory()
    rng = np.random.default_rng(7)
    store = SqlStore(url)
    service = LearningService(store, config())
    start = time.perf_counter()
    for first in range(0, traces, BATCH):
        last = min(traces, first + BATCH)
        service.observe_many(reports(arms, first, last, rng))
        if (last // BATCH) % 20 == 0:
            took = time.perf_counter() - start
            print(f"  loaded {last:,} traces ({took:.0f} s)", file=sys.stderr, flush=True)
    took = time.perf_counter() - start
    with store.engine.connect() as conn:
        conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    store.close()
    return url, f"loaded in {took:.0f} s ({traces / took:,.0f} traces/s)"


# -- the server process ------------------------------------------------------------------------


def serve(url: str, port: int, api_url: str) -> None:
    """The Slack app, twice (inline and deferred reads), with uvicorn on `port`."""
    import uvicorn
    from starlette.applications import Starlette

    from learning_bot.adapters.slack import SlackSettings, create_app, slack_routes
    from learning_bot.app import build_app
    from learning_bot.settings import Settings

    core = build_app(Settings(database_url=url, config=config()))
    routes = []
    for path, inline in (("/slack/events", 2.0), ("/slack/deferred", 0.0)):
        settings = SlackSettings(
            bot_token="xoxb-bench",
            signing_secret=SECRET,
            api_url=api_url,
            inline_seconds=inline,
        )
        routes.extend(slack_routes(create_app(settings, core.bus), path))
    uvicorn.run(Starlette(routes=routes), host="127.0.0.1", port=port, log_level="warning")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


# -- playing Slack -----------------------------------------------------------------------------


class FakeSlack:
    """auth.test for the app's first request, and the response_url endpoint, timestamping
    each post as it arrives."""

    def __init__(self) -> None:
        self.arrived: dict[str, float] = {}
        self.bodies: dict[str, dict[str, Any]] = {}
        self.waiters: dict[str, asyncio.Future[float]] = {}
        self.base = ""
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/api/{method}", self._api)
        app.router.add_post("/response/{key}", self._response)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        host, port = self._runner.addresses[0][:2]
        self.base = f"http://{host}:{port}"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _api(self, request: web.Request) -> web.Response:
        return web.json_response(
            {"ok": True, "team_id": "T1", "user_id": "U-bot", "bot_id": "B-bot", "team": "Bench"}
        )

    async def _response(self, request: web.Request) -> web.Response:
        at = time.perf_counter()
        key = request.match_info["key"]
        self.bodies[key] = await request.json()
        waiter = self.waiters.pop(key, None)
        if waiter is not None and not waiter.done():
            waiter.set_result(at)
        return web.Response(text="ok")

    def expect(self, key: str) -> asyncio.Future[float]:
        future: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        self.waiters[key] = future
        return future


def signed(text: str, response_url: str, trigger: str) -> tuple[str, dict[str, str]]:
    body = urlencode(
        {
            "token": "bench",
            "team_id": "T1",
            "team_domain": "bench",
            "channel_id": "C1",
            "channel_name": "general",
            "user_id": "U-bench",
            "user_name": "bench",
            "command": "/learning",
            "text": text,
            "api_app_id": "A-bench",
            "is_enterprise_install": "false",
            "response_url": response_url,
            "trigger_id": trigger,
        }
    )
    ts = str(int(time.time()))
    headers = {
        "Content-Type": "application/x-www-form-urlencoded",
        "X-Slack-Request-Timestamp": ts,
        "X-Slack-Signature": SignatureVerifier(SECRET).generate_signature(timestamp=ts, body=body),
    }
    return body, headers


@dataclass
class Timings:
    inline: list[float]
    deferred_ack: list[float]
    deferred_post: list[float]
    reference: list[float]


async def wait_up(client: httpx.AsyncClient, proc: Any) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if not proc.is_alive():
            raise SystemExit("the Slack app's server process exited")
        try:
            await client.get("/slack/events")
            return
        except httpx.TransportError:
            await asyncio.sleep(0.2)
    raise SystemExit("the Slack app's server did not start")


async def measure(url: str, calls: int, warmup: int) -> Timings:
    from learning_bot.app import build_app
    from learning_bot.settings import Settings

    fake = FakeSlack()
    await fake.start()
    port = free_port()
    proc = mp.get_context("spawn").Process(
        target=serve, args=(url, port, f"{fake.base}/api/"), daemon=True
    )
    proc.start()
    core = build_app(Settings(database_url=url, config=config()))
    invocation = Invocation("slack", Actor("U-bench", "bench"), "status", scope="T1")
    timings = Timings([], [], [], [])
    seq = 0
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            await wait_up(client, proc)

            async def inline() -> float:
                nonlocal seq
                seq += 1
                body, headers = signed("status", f"{fake.base}/response/i{seq}", f"i.{seq}")
                start = time.perf_counter()
                response = await client.post("/slack/events", content=body, headers=headers)
                took = time.perf_counter() - start
                blocks = response.json().get("blocks", [])
                if response.status_code != 200 or blocks[0]["type"] != "header":
                    raise SystemExit(f"unexpected inline answer: {response.text[:300]}")
                return took

            async def deferred() -> tuple[float, float]:
                nonlocal seq
                seq += 1
                key = f"d{seq}"
                arrived = fake.expect(key)
                body, headers = signed("status", f"{fake.base}/response/{key}", f"d.{seq}")
                start = time.perf_counter()
                response = await client.post("/slack/deferred", content=body, headers=headers)
                acked = time.perf_counter() - start
                if response.json().get("text") != "Working on it...":
                    raise SystemExit(f"unexpected acknowledgement: {response.text[:300]}")
                posted = await asyncio.wait_for(arrived, 30) - start
                if fake.bodies[key]["blocks"][0]["type"] != "header":
                    raise SystemExit(f"unexpected deferred answer: {fake.bodies[key]}")
                return acked, posted

            def reference() -> float:
                start = time.perf_counter()
                reply = core.bus.dispatch(invocation)
                took = time.perf_counter() - start
                if not reply.ok:
                    raise SystemExit(f"status failed: {reply.summary}")
                return took

            for _ in range(warmup):
                await inline()
                await deferred()
                reference()
            gc.collect()
            for _ in range(calls):
                timings.inline.append(await inline())
                acked, posted = await deferred()
                timings.deferred_ack.append(acked)
                timings.deferred_post.append(posted)
                timings.reference.append(reference())
    finally:
        proc.terminate()
        proc.join(10)
        core.close()
        await fake.stop()
    return timings


# -- report ------------------------------------------------------------------------------------


def p99(values: list[float]) -> float:
    return float(np.percentile(values, 99))


def fmt(seconds: float) -> str:
    return f"{seconds * 1e3:,.1f} ms" if seconds >= 1e-3 else f"{seconds * 1e6:,.0f} µs"


def print_table(header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    print("| " + " | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for row in rows:
        cells = [
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        print("| " + " | ".join(cells) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description="Signed /learning status through the Slack app")
    parser.add_argument("--quick", action="store_true", help="100,000 traces and 100 calls")
    parser.add_argument(
        "--traces", type=int, help=f"traces in the database (default {FULL_TRACES:,})"
    )
    parser.add_argument("--calls", type=int, help="timed calls of each kind (default 300)")
    parser.add_argument("--rebuild", action="store_true", help="load the database again")
    args = parser.parse_args()
    traces = args.traces or (100_000 if args.quick else FULL_TRACES)
    calls = args.calls or (100 if args.quick else 300)
    url, note = database(traces, args.rebuild)
    timings = asyncio.run(measure(url, calls, warmup=10))

    print(
        f"Slack /learning status: {traces:,} traces, {ARMS:,} arms, SQLite (WAL); "
        f"Python {platform.python_version()}, {mp.cpu_count()} CPUs; database {note}"
    )
    print()
    ref = statistics.median(timings.reference)
    rows = []
    for name, values, target in (
        ("signed request -> HTTP response (inline)", timings.inline, True),
        ("signed request -> acknowledgement (deferred)", timings.deferred_ack, False),
        ("signed request -> response_url post (deferred)", timings.deferred_post, True),
        ("reference: CommandBus.dispatch in process", timings.reference, False),
    ):
        med = statistics.median(values)
        rows.append(
            [
                name,
                fmt(med),
                fmt(p99(values)),
                f"{med / ref:.1f}x",
                ("met" if p99(values) <= TARGET_P99 else "NOT met") if target else "",
                str(len(values)),
            ]
        )
    print_table(["path", "median", "p99", "vs reference", "p99 <= 300 ms", "calls"], rows)


if __name__ == "__main__":
    main()
