"""How long from a Discord interaction event to its initial interaction response, on a
database of 1M traces and 1,000 arms? Discord drops an interaction that gets no response
within 3 s; the target is p99 <= 300 ms.

The database (a SQLite file kept in /tmp/learning-bot-bench and reused by later runs; --rebuild
starts it again; --database-url uses another database, loaded the same way if it is empty)
holds one learner with 1,000 tool arms: the first trace includes all of them, every other
trace includes 8 drawn at random and calls some of them, in one of 20 Discord channels, so
every trace updates posteriors. Traces are loaded with `LearningService.observe_many` in
batches of 5,000; the load time is printed and kept beside the file.

This process runs the real Discord surface: a discord.py client from
`adapters.discord.create_client` over `learning_bot.app.build_app`, logged in against the local
fake of Discord's REST API that the tests use (tests/adapters/discord/fake_discord.py), in the same
event loop. Each call is a gateway INTERACTION_CREATE payload handed to the client's own
parser (`ConnectionState.parse_interaction_create`), and is timed from just before that call
to the moment the fake receives the interaction's first callback (an answer, a defer, or
autocomplete choices). Calls go one at a time, each with a new interaction id, and each runs
to completion (follow-ups included) before the next; the kinds of call take turns in a
shuffled order every round. Garbage collection stays on: it is part of what a user waits for.

The reference, measured in the same run: the same command through `CommandBus.dispatch`
directly in this process (no Discord, parsing, rendering or worker thread); for autocomplete,
reading the arm names and ranking them; for the cancel click, dispatching the cancel of a
fresh prompt.

    .venv/bin/python bench/discord.py [--traces N] [--calls N] [--rebuild] [--database-url URL]
"""

from __future__ import annotations

import sys
from pathlib import Path

# This file is named like discord.py's package, and bench/select.py like the standard
# library's `select`: take this folder off the import path, put the project root on it.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

import argparse  # noqa: E402
import asyncio  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import platform  # noqa: E402
import random  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from typing import Any  # noqa: E402

import discord  # noqa: E402
import numpy as np  # noqa: E402

from learning_bot.adapters.discord import DiscordSettings, LearningClient, create_client  # noqa: E402
from learning_bot.adapters.discord.interactions import arm_suggestions  # noqa: E402
from learning_bot.app import App, build_app  # noqa: E402
from learning_bot.bot.bus import Actor, Invocation  # noqa: E402
from learning_bot.bot.commands import (  # noqa: E402
    CancelCommand,
    Command,
    HelpCommand,
    PhaseCommand,
    ResetCommand,
    RewardCommand,
    StatusCommand,
)
from learning_bot.engine import Arm, LearningConfig, Phase, ReportedArm, RunReport, ToolCall, Usage  # noqa: E402
from learning_bot.settings import Settings  # noqa: E402
from learning_bot.storage.database import HEAD_REVISION, SchemaError  # noqa: E402
from tests.adapters.discord.fake_discord import (  # noqa: E402
    BOT_TOKEN,
    MANAGE_GUILD,
    PERMISSIONS_MEMBER,
    FakeDiscord,
    Place,
    User,
    autocomplete_interaction,
    command_interaction,
    component_interaction,
)

ARMS = 1_000
ARMS_PER_TRACE = 8
CHANNELS = 20
BATCH = 5_000
FULL_TRACES = 1_000_000
CACHE = Path(tempfile.gettempdir()) / "learning-bot-bench"
TARGET_P99 = 0.300
GUILD = 1_300_000_000_000_000_001
CHANNEL_BASE = 1_300_000_000_000_000_100
ADMIN = User(1_400_000_000_000_000_001, "Ada", permissions=PERMISSIONS_MEMBER | MANAGE_GUILD)


def config() -> LearningConfig:
    return LearningConfig(phase=Phase.ACTIVE)


# -- the database ----------------------------------------------------------------------------


def inventory() -> list[Arm]:
    rng = np.random.default_rng(11)
    costs = rng.integers(50, 2_000, ARMS)
    return [Arm(f"tool:bench:Tool{i:04d}", int(costs[i])) for i in range(ARMS)]


def reports(arms: list[Arm], first: int, last: int, rng: np.random.Generator) -> list[RunReport]:
    """Traces first..last-1: trace 0 includes every arm, the others ARMS_PER_TRACE each; an
    arm is used with its own fixed probability, so posteriors spread out."""
    usefulness = np.random.default_rng(12).beta(1.2, 2.5, ARMS)
    base = 1_700_000_000_000
    out = []
    for i in range(first, last):
        picked = np.arange(ARMS) if i == 0 else rng.choice(ARMS, ARMS_PER_TRACE, replace=False)
        used = [int(j) for j in picked if rng.random() < usefulness[j]]
        calls = [ToolCall(arms[j].name) for j in used] or [ToolCall("Outside")]
        out.append(
            RunReport(
                trace_id=f"t{i}",
                arms=tuple(ReportedArm(arms[int(j)]) for j in picked),
                tool_calls=tuple(calls),
                channel=str(CHANNEL_BASE + i % CHANNELS),
                timestamp=base + i * 1_000,
                is_baseline=i % 10 == 0,
                usage=Usage(input=1_500 + 40 * len(picked), output=200),
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


def load(url: str, have: int, traces: int) -> float:
    from learning_bot.engine.service import LearningService
    from learning_bot.storage import SqlStore

    arms = inventory()
    rng = np.random.default_rng([13, have])
    store = SqlStore(url)
    service = LearningService(store, config())
    start = time.perf_counter()
    for first in range(have, traces, BATCH):
        last = min(traces, first + BATCH)
        service.observe_many(reports(arms, first, last, rng))
        if (last // BATCH) % 20 == 0:
            took = time.perf_counter() - start
            print(f"  loaded {last:,} traces ({took:.0f} s)", file=sys.stderr, flush=True)
    took = time.perf_counter() - start
    if url.startswith("sqlite"):
        with store.engine.connect() as conn:
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    store.close()
    return took


def database(traces: int, rebuild: bool, url: str | None) -> tuple[str, str]:
    """(url, how its traces got there)."""
    if url is not None:
        have = stored_traces(url) or 0
        if have > traces:
            raise SystemExit(f"{url} holds {have:,} traces, more than --traces {traces:,}")
        if have == traces:
            return url, f"{traces:,} traces already there"
        took = load(url, have, traces)
        return url, f"loaded {traces - have:,} traces in {took:.0f} s"
    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / f"discord-r{HEAD_REVISION}-{ARMS}arms-{traces}.sqlite"
    sidecar = path.with_suffix(".json")
    url = f"sqlite:///{path}"
    if path.exists() and not rebuild and stored_traces(url) == traces:
        took = json.loads(sidecar.read_text())["seconds"] if sidecar.exists() else None
        when = f"; loading took {took:.0f} s" if took is not None else ""
        return url, f"kept from an earlier run{when}"
    for extra in (path, Path(f"{path}-wal"), Path(f"{path}-shm"), sidecar):
        extra.unlink(missing_ok=True)
    took = load(url, 0, traces)
    sidecar.write_text(json.dumps({"traces": traces, "seconds": took}))
    return url, f"loaded in {took:.0f} s ({traces / took:,.0f} traces/s)"


# -- the calls ---------------------------------------------------------------------------------


@dataclass
class Kind:
    name: str
    event: Callable[[Place], dict[str, Any]]
    reference: Callable[[], float]
    """Times the reference once; returns seconds."""
    times: list[float] = field(default_factory=list)
    deferred: int = 0
    refs: list[float] = field(default_factory=list)


def invocation(command: Command, channel: int) -> Invocation:
    actor = Actor(str(ADMIN.id), ADMIN.name, is_admin=True)
    return Invocation("discord-bench", actor, command, str(GUILD), str(channel))


async def deliver(fake: FakeDiscord, client: LearningClient, payload: dict[str, Any]) -> float:
    """Seconds from handing the event to the client to the fake receiving its first
    callback; waits for everything the event started before returning."""
    fake.expect(payload)
    before = asyncio.all_tasks()
    start = time.perf_counter()
    client._connection.parse_interaction_create(payload)  # type: ignore[arg-type]
    started = asyncio.all_tasks() - before
    await asyncio.wait_for(asyncio.gather(*started), timeout=30)
    calls = [c for c in fake.calls_for(int(payload["id"])) if c.kind == "callback"]
    if not calls or calls[0].status != 200:
        raise SystemExit(f"interaction {payload['data']} got no accepted response: {calls}")
    return calls[0].at - start


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def kinds(app: App, fake: FakeDiscord) -> list[Kind]:
    bus = app.bus
    channel = CHANNEL_BASE + 3

    def cmd(sub: str, **options: Any) -> Callable[[Place], dict[str, Any]]:
        return lambda place: command_interaction(sub, options, user=ADMIN, place=place)

    def reference(command: Command) -> Callable[[], float]:
        return lambda: timed(lambda: bus.dispatch(invocation(command, channel)))

    def suggest() -> object:
        names = [(v.arm_id, v.label) for v in app.service().posteriors()]
        return arm_suggestions(names, "Tool01")

    def cancel_reference() -> float:
        prompt = bus.dispatch(invocation(ResetCommand(), channel))
        if not prompt.actions:
            raise SystemExit(f"the reset prompt failed: {prompt.summary}")
        cancel = CancelCommand(prompt.actions[0].token)
        return timed(lambda: bus.dispatch(invocation(cancel, channel)))

    return [
        Kind("status", cmd("status"), reference(StatusCommand())),
        Kind(
            "status top 25 public",
            cmd("status", top=25, public=True),
            reference(StatusCommand(top=25, public=True)),
        ),
        Kind("status arm", cmd("status", arm="Tool0123"), reference(StatusCommand(arm="Tool0123"))),
        Kind(
            "reward arm",
            cmd("reward", arm="Tool0042", value="good", reason="bench"),
            reference(RewardCommand("Tool0042", 1.0, "bench")),
        ),
        Kind("reward latest run", cmd("reward", value="bad"), reference(RewardCommand(None, 0.0))),
        Kind(
            "autocomplete arm",
            lambda place: autocomplete_interaction(
                "reward", "arm", "Tool01", user=ADMIN, place=place
            ),
            lambda: timed(suggest),
        ),
        Kind("phase", cmd("phase"), reference(PhaseCommand())),
        Kind("help", cmd("help"), reference(HelpCommand())),
        Kind("reset (prompt)", cmd("reset", arms="all"), reference(ResetCommand())),
        Kind("cancel click", lambda place: {}, cancel_reference),
    ]


async def measure(app: App, calls: int, warmup: int) -> list[Kind]:
    fake = FakeDiscord()
    discord.http.Route.BASE = await fake.start()
    client = create_client(DiscordSettings(token=BOT_TOKEN), app.bus)
    await client.login(BOT_TOKEN)
    place = Place(GUILD, CHANNEL_BASE + 3)
    plan = kinds(app, fake)
    rng = random.Random(5)
    try:
        for round_ in range(warmup + calls):
            order = plan[:]
            rng.shuffle(order)
            for kind in order:
                if kind.name == "cancel click":
                    continue
                payload = kind.event(place)
                seconds = await deliver(fake, client, payload)
                first = next(c for c in fake.calls_for(int(payload["id"])) if c.kind == "callback")
                assert isinstance(first.body, dict)
                if round_ >= warmup:
                    kind.times.append(seconds)
                    kind.deferred += first.body.get("type") in (5, 6)
                if kind.name == "reset (prompt)":
                    click = plan[-1]
                    message = fake.message(fake.interactions[int(payload["id"])].original_id or 0)
                    custom_id = message["components"][0]["components"][1]["custom_id"]
                    seconds = await deliver(
                        fake,
                        client,
                        component_interaction(message, custom_id, user=ADMIN, place=place),
                    )
                    if round_ >= warmup:
                        click.times.append(seconds)
            for kind in order:
                seconds = await asyncio.to_thread(kind.reference)
                if round_ >= warmup:
                    kind.refs.append(seconds)
    finally:
        await client.close()
        await fake.close()
    return plan


# -- reporting -------------------------------------------------------------------------------


def p99(values: list[float]) -> float:
    return float(np.percentile(values, 99)) if values else float("nan")


def fmt(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms" if seconds >= 1e-3 else f"{seconds * 1e6:.0f} µs"


def print_table(header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    line = "| " + " | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)) + " |"
    print(line)
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for row in rows:
        cells = [row[0].ljust(widths[0])] + [
            c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)
        ]
        print("| " + " | ".join(cells) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", type=int, default=FULL_TRACES, help="traces in the database")
    parser.add_argument("--calls", type=int, default=60, help="timed calls of each kind")
    parser.add_argument("--warmup", type=int, default=3, help="untimed rounds first")
    parser.add_argument("--rebuild", action="store_true", help="load the kept database again")
    parser.add_argument("--database-url", help="another database (loaded if it is empty)")
    args = parser.parse_args()
    logging.getLogger("discord").setLevel(logging.ERROR)

    url, origin = database(args.traces, args.rebuild, args.database_url)
    # One user sends hundreds of changes a minute here: the per-user rate limit is off.
    app = build_app(Settings(database_url=url, config=config(), rate_limit=0))
    try:
        summary = app.service().summary()
        print(
            f"Python {platform.python_version()}, discord.py {discord.__version__}; database "
            f"{url.split('///')[-1] if url.startswith('sqlite') else url.split('@')[-1]}: "
            f"{summary.trace_count:,} traces, {summary.arm_count:,} arms ({origin})"
        )
        print(
            f"{args.calls} timed calls of each kind after {args.warmup} warm-up rounds; "
            "event -> first callback at the fake Discord\n"
        )
        plan = asyncio.run(measure(app, args.calls, args.warmup))
    finally:
        app.close()

    rows = []
    every: list[float] = []
    for kind in plan:
        every.extend(kind.times)
        median = statistics.median(kind.times)
        ref = statistics.median(kind.refs)
        rows.append(
            [
                kind.name,
                str(len(kind.times)),
                str(kind.deferred),
                fmt(median),
                fmt(p99(kind.times)),
                fmt(max(kind.times)),
                fmt(ref),
                f"{median / ref:.1f}x",
            ]
        )
    overall_p99 = p99(every)
    rows.append(
        [
            "all",
            str(len(every)),
            str(sum(k.deferred for k in plan)),
            fmt(statistics.median(every)),
            fmt(overall_p99),
            fmt(max(every)),
            "",
            "",
        ]
    )
    print_table(
        ["call", "n", "deferred", "median", "p99", "max", "bus alone (median)", "median/bus"],
        rows,
    )
    verdict = "met" if overall_p99 <= TARGET_P99 else "NOT met"
    print(f"\nTarget p99 <= {TARGET_P99 * 1000:.0f} ms: {verdict} ({fmt(overall_p99)}).")


if __name__ == "__main__":
    main()
