"""Every documented way of running learning-bot, started as a subprocess exactly as the docs
says, against local fakes of Slack and Discord: it stays up for at least 10 s, answers one real
request on each surface it was configured with, and stops on SIGTERM and on SIGINT with
status 0 (within a generous bound: a machine busy with other work may take many seconds).
`serve` stops only on a signal, or when a surface fails: then it exits non-zero and names the
surface.

The processes run concurrently (CONCURRENT at a time) in one event loop shared by this module:
the module fixture starts every selected scenario, and each test waits for its own outcome and
shows the process's command line and output when it fails. The command lines are the constants
in `launch.py`. One scenario alone:

    .venv/bin/pytest tests/e2e -k 'serve+slack-http:SIGTERM'
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio
from aiohttp import web

from learning_bot.surfaces import SURFACES
from tests.adapters.discord.fake_discord import BOT_TOKEN, FakeDiscord
from tests.adapters.slack.fake_slack import FakeSlack

from .fake_gateway import FakeGateway
from .launch import (
    DISCORD_RUN,
    SERVE,
    SLACK_HTTP,
    SLACK_SOCKET_MODE,
    Process,
    describe_exit,
    environment,
    free_port,
)
from .probes import (
    SLACK_APP_TOKEN,
    SLACK_BOT_TOKEN,
    SLACK_SECRET,
    check_discord,
    check_http,
    check_slack_http,
    check_slack_socket_mode,
    http_answers,
    port_answers,
)

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.asyncio(loop_scope="module")]

STAY_UP_SECONDS = 10.0
"""The process must still run this long after it started answering."""
STOP_SECONDS = 90.0
"""Bound on ending after SIGTERM or SIGINT on a busy machine (it only costs time when the
process does not stop at all)."""
START_SECONDS = 90.0
"""Bound on start-up (imports, schema creation, connecting to the fakes) on a busy machine."""
FAIL_SECONDS = 90.0
"""Bound on how long `serve` may take to notice that a surface failed and exit."""
CONCURRENT = 6
"""Processes under test at once: enough to finish quickly, few enough for a 2-core machine."""


@dataclass(frozen=True)
class Way:
    """A documented way of running learning-bot and the surfaces it should make live."""

    argv: tuple[str, ...]
    http: bool = False
    """Serves the learning API on its port."""
    slack: str | None = None
    """Slack in "http" mode (events posted to /slack/events on its port) or "socket" mode."""
    discord: bool = False


WAYS = {
    "serve": Way(SERVE, http=True),
    "serve+slack-http": Way(SERVE, http=True, slack="http"),
    "serve+slack-socket": Way(SERVE, http=True, slack="socket"),
    "serve+discord": Way(SERVE, http=True, discord=True),
    "serve+slack-http+discord": Way(SERVE, http=True, slack="http", discord=True),
    "serve+slack-socket+discord": Way(SERVE, http=True, slack="socket", discord=True),
    "slack-http": Way(SLACK_HTTP, slack="http"),
    "slack-socket": Way(SLACK_SOCKET_MODE, slack="socket"),
    "discord-run": Way(DISCORD_RUN, discord=True),
}
SIGNALS = (signal.SIGTERM, signal.SIGINT)
FAILING_SURFACES = tuple(
    entry.name.lower() for entry in SURFACES if not entry.every_worker and entry.command
)
"""The registry's chat surfaces, those with a subcommand of their own (they connect out, so a
refused credential ends `serve`; the alert scheduler logs a failed round and goes on)."""


class Fakes:
    """The fake Slack and Discord a process talks to, started as its way needs them."""

    def __init__(self) -> None:
        self.slack: FakeSlack | None = None
        self.discord: FakeDiscord | None = None
        self.gateway: FakeGateway | None = None
        self.env: dict[str, str] = {}

    async def start(self, slack: str | None, discord: bool) -> None:
        if slack is not None:
            self.slack = FakeSlack()
            await self.slack.start()
            self.env.update(SLACK_BOT_TOKEN=SLACK_BOT_TOKEN, SLACK_API_URL=self.slack.api_url)
            if slack == "socket":
                self.env["SLACK_APP_TOKEN"] = SLACK_APP_TOKEN
            else:
                self.env["SLACK_SIGNING_SECRET"] = SLACK_SECRET
        if discord:
            self.discord = FakeDiscord()
            self.gateway = FakeGateway()
            self.env.update(
                DISCORD_TOKEN=BOT_TOKEN,
                DISCORD_API_URL=await self.discord.start(),
                DISCORD_GATEWAY_URL=await self.gateway.start(),
            )

    async def close(self) -> None:
        if self.gateway is not None:
            await self.gateway.close()
        if self.discord is not None:
            await self.discord.close()
        if self.slack is not None:
            await self.slack.stop()


@contextlib.asynccontextmanager
async def fakes_for(slack: str | None, discord: bool) -> AsyncIterator[Fakes]:
    fakes = Fakes()
    try:
        await fakes.start(slack, discord)
        yield fakes
    finally:
        await fakes.close()


class Failed(AssertionError):
    def __init__(self, process: Process, message: str) -> None:
        super().__init__(f"{message}\n\n{process.output()}")


Check = tuple[str, Callable[[], Awaitable[object]]]
"""What is being waited for, and a coroutine function that returns once it happened (or raises
AssertionError saying what went wrong)."""


async def step(process: Process, check: Check, timeout: float) -> None:
    """Run one check; fail naming it if the process ends first, if the check fails, or after
    `timeout` seconds."""
    what, action = check
    task = asyncio.ensure_future(action())
    exited = asyncio.ensure_future(process.proc.wait())
    try:
        done, _ = await asyncio.wait({task, exited}, timeout=timeout, return_when="FIRST_COMPLETED")
        if task in done:
            try:
                task.result()
            except Exception as exc:
                raise Failed(process, f"{what}: {exc!r}") from None
            return
        if exited in done:
            raise Failed(
                process,
                f"exited with {describe_exit(exited.result())} after {process.uptime():.1f} s, "
                f"before {what}",
            )
        raise Failed(process, f"{what}: not within {timeout:.0f} s")
    finally:
        for pending in (task, exited):
            pending.cancel()
        await asyncio.gather(task, exited, return_exceptions=True)


async def until(check: Callable[[], Awaitable[bool]]) -> None:
    while not await check():
        await asyncio.sleep(0.2)


def started_checks(way: Way, fakes: Fakes, base: str) -> list[Check]:
    """What shows that the process is up: its port answers, it connected to Slack's Socket
    Mode, it identified at the Discord gateway."""
    checks: list[Check] = []
    if way.http:
        checks.append(("the HTTP API answering", lambda: until(lambda: http_answers(base))))
    elif way.slack == "http":
        checks.append(("the port answering", lambda: until(lambda: port_answers(base))))
    if fakes.slack is not None and way.slack == "socket":
        slack = fakes.slack

        async def connected() -> None:
            await slack.wait_until(lambda: bool(slack.api("apps.connections.open")), START_SECONDS)

        checks.append(("connecting to Slack Socket Mode", connected))
    if fakes.gateway is not None:
        checks.append(("identifying at the Discord gateway", fakes.gateway.identified.wait))
    return checks


def request_checks(way: Way, fakes: Fakes, base: str) -> list[Check]:
    """One real request per configured surface, answered."""
    checks: list[Check] = []
    if way.http:
        checks.append(("GET summary", lambda: check_http(base)))
    if fakes.slack is not None:
        slack = fakes.slack
        if way.slack == "http":
            checks.append(("a signed slash command", lambda: check_slack_http(base, slack)))
        else:
            checks.append(("a Socket Mode slash command", lambda: check_slack_socket_mode(slack)))
    if fakes.discord is not None and fakes.gateway is not None:
        discord, gateway = fakes.discord, fakes.gateway
        checks.append(("a Discord interaction", lambda: check_discord(discord, gateway)))
    return checks


async def run_way(
    way: Way, sig: signal.Signals, root: Path, *, sigint_ignored: bool = False
) -> None:
    """Start the process (`sigint_ignored`: as a script's background job starts it, SIGINT
    ignored), wait until it is up, send one request per surface, check it still runs
    STAY_UP_SECONDS after it came up, send `sig`, and expect status 0 within STOP_SECONDS."""
    async with fakes_for(way.slack, way.discord) as fakes:
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        argv = [part.format(port=port) for part in way.argv]
        env = environment(root, fakes.env)
        process = await Process.start(argv, env, root, sigint_ignored=sigint_ignored)
        try:
            for check in started_checks(way, fakes, base):
                await step(process, check, START_SECONDS)
            up_since = time.monotonic()
            for check in request_checks(way, fakes, base):
                await step(process, check, START_SECONDS)
            code = await process.exit_within(up_since + STAY_UP_SECONDS - time.monotonic())
            if code is not None:
                raise Failed(
                    process,
                    f"exited with {describe_exit(code)} {process.uptime():.1f} s after start, "
                    "without a signal; it must run until stopped",
                )
            process.send(sig)
            code = await process.exit_within(STOP_SECONDS)
            if code is None:
                raise Failed(process, f"still running {STOP_SECONDS:.0f} s after {sig.name}")
            if code != 0:
                raise Failed(process, f"{sig.name} ended it with {describe_exit(code)}, not 0")
        finally:
            await process.kill()


async def refusing_slack() -> tuple[web.AppRunner, str]:
    """A Slack Web API that refuses every token (apps.connections.open included)."""

    async def refuse(_: web.Request) -> web.Response:
        return web.json_response({"ok": False, "error": "invalid_auth"})

    app = web.Application()
    app.router.add_route("*", "/api/{method}", refuse)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    host, port = runner.addresses[0][:2]
    return runner, f"http://{host}:{port}/api/"


async def serve_with_failing_surface(surface: str, root: Path) -> None:
    """`serve` whose Slack (Socket Mode, the app token refused) or Discord (the bot token
    refused) surface fails: it exits on its own, non-zero, and its stderr names the surface."""
    async with contextlib.AsyncExitStack() as stack:
        fakes = await stack.enter_async_context(fakes_for(None, surface == "discord"))
        if surface == "slack":
            runner, api_url = await refusing_slack()
            stack.push_async_callback(runner.cleanup)
            fakes.env.update(
                SLACK_BOT_TOKEN=SLACK_BOT_TOKEN,
                SLACK_APP_TOKEN=SLACK_APP_TOKEN,
                SLACK_API_URL=api_url,
            )
        elif surface == "discord":
            fakes.env["DISCORD_TOKEN"] = "refused-" + BOT_TOKEN
        else:
            raise AssertionError(f"say here how {surface}'s service refuses it")
        port = free_port()
        argv = [part.format(port=port) for part in SERVE]
        process = await Process.start(argv, environment(root, fakes.env), root)
        try:
            code = await process.exit_within(FAIL_SECONDS)
            if code is None:
                raise Failed(process, f"still running {FAIL_SECONDS:.0f} s after {surface} failed")
            if code <= 0:
                raise Failed(
                    process,
                    f"exited with {describe_exit(code)} after {surface} failed, not a failure",
                )
            if surface not in process.stderr_text().lower():
                raise Failed(
                    process,
                    f"exited with {describe_exit(code)}, but stderr does not name {surface}",
                )
        finally:
            await process.kill()


def scenario(key: str, root: Path) -> Awaitable[None]:
    if key.startswith("fails:"):
        return serve_with_failing_surface(key.removeprefix("fails:"), root)
    name, sig = key.split(":")
    if sig == BACKGROUND:
        return run_way(WAYS[name], signal.SIGINT, root, sigint_ignored=True)
    return run_way(WAYS[name], signal.Signals[sig], root)


BACKGROUND = "SIGINT-after-started-in-background"
"""Started with SIGINT ignored, as `learning-bot ... &` in a shell script starts it, then sent
SIGINT: every way still stops on it, as it says it does."""
WAY_KEYS = [f"{name}:{sig}" for name in WAYS for sig in (*(s.name for s in SIGNALS), BACKGROUND)]
FAIL_KEYS = [f"fails:{surface}" for surface in FAILING_SURFACES]


class Scenarios:
    """Runs the selected scenarios concurrently, CONCURRENT at a time, in declaration order."""

    def __init__(self, tmp: pytest.TempPathFactory) -> None:
        self._tmp = tmp
        self._limit = asyncio.Semaphore(CONCURRENT)
        self._tasks: dict[str, asyncio.Task[None]] = {}

    def schedule(self, key: str) -> asyncio.Task[None]:
        if key not in self._tasks:
            root = self._tmp.mktemp(key.replace(":", "-").replace("+", "-"))
            self._tasks[key] = asyncio.create_task(self._limited(key, root), name=key)
        return self._tasks[key]

    async def _limited(self, key: str, root: Path) -> None:
        async with self._limit:
            await scenario(key, root)

    async def outcome(self, key: str) -> None:
        await asyncio.shield(self.schedule(key))

    async def close(self) -> None:
        for task in self._tasks.values():
            task.cancel()
        await asyncio.gather(*self._tasks.values(), return_exceptions=True)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def scenarios(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Scenarios]:
    runner = Scenarios(tmp_path_factory)
    for item in request.session.items:
        key = getattr(getattr(item, "callspec", None), "params", {}).get("key")
        if item.module is request.module and isinstance(key, str):
            runner.schedule(key)
    yield runner
    await runner.close()


@pytest.mark.parametrize("key", WAY_KEYS)
async def test_documented_way_of_running(key: str, scenarios: Scenarios) -> None:
    await scenarios.outcome(key)


@pytest.mark.parametrize("key", FAIL_KEYS)
async def test_serve_exits_nonzero_naming_a_failed_surface(key: str, scenarios: Scenarios) -> None:
    await scenarios.outcome(key)
