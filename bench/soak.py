"""A soak that proves nothing is lost: three `learning-bot serve` replicas on one PostgreSQL
behind a round-robin proxy (bench/soak_topology.py: deploy/compose.yaml with
deploy/soak.compose.yaml where a container engine runs, else the same shape from processes),
mixed traffic through the proxy for `--minutes`, PostgreSQL restarted twice and a replica
SIGKILLed every `--kill-every` minutes (then restarted). Afterwards it checks that

- every agent run acknowledged (POST observe answered 200; the client retries a failed observe
  with the same trace id, as an agent runtime does) is stored exactly once: the acknowledged
  trace ids counted here against the database's rows;
- every gateway turn acknowledged (`/v1` select with context.session_key) is one run, and every
  per-arm observe acknowledged is stored once (marked on its run, or kept apart when no run
  was open), and nothing beyond what was sent;
- every Slack reward acknowledged is one manual observation, and no command is stuck (every
  command claimed in `command_results` has its reply; one whose replica died mid-command is
  sent again with the same trigger, as a retry would, and runs once);
- `learning-bot db verify` passes;

and reports p99 latency of select and observe and each replica's resident memory per window
(5 minutes by default), and each replica's memory trend after its first 5 minutes.

Traffic, all through the proxy: agent sessions (select with a session key, then observe with a
trace id); OpenClaw gateway turns as the gateway sends them (session_start, select with
context.session_key, one observe per selected arm sent in parallel, session_end); signed Slack
slash commands (status, reward, `reset <arm> confirm`, `reset undo confirm`); the gateway's reset
of one arm now and then.

    .venv/bin/python -m bench.soak --minutes 30
    .venv/bin/python -m bench.soak --minutes 3 --topology compose      # CI's version

Exit status 0 when every correctness check passes; timings and memory are reported, never
judged. Every process and container it starts is ended before it exits.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import aiohttp
import numpy as np
from aiohttp import web

from bench import soak_topology as topo
from bench.table import print_table, table_lines

API = "/__openclaw__/api/learning"
TOKEN = "soak-" + secrets.token_hex(16)
SECRET = "soak-signing-" + secrets.token_hex(16)
GATEWAY = "openclaw"
AGENT_ARMS = [{"armId": f"tool:soak:T{i}", "tokenCost": 100 + 40 * i} for i in range(8)]
CANDIDATES = [
    {
        "id": f"tool:gw:G{i}",
        "metadata": {"type": "tool", "category": "gw", "label": f"G{i}"},
        "token_cost": 150 + 30 * i,
    }
    for i in range(8)
]
IN_FLIGHT = "already being handled"
UNAVAILABLE = "Storage is unavailable"
LEASE_SECONDS = 10
SLACK_USERS = ("U-soak-1", "U-soak-2", "U-soak-3")
RETRYABLE = {409, 429, 500, 502, 503, 504}
WHAT = {0: "no answer", 1: "200 without a JSON object"}


@dataclass
class SlackCommand:
    trigger: str
    text: str
    write: bool
    sent: int = 0
    answers: list[str] = field(default_factory=list)

    @property
    def final(self) -> bool:
        return any(IN_FLIGHT not in a for a in self.answers)


@dataclass
class Ledger:
    """What the clients were told, and when."""

    start: float
    window: float
    latency: dict[tuple[int, str], list[float]] = field(default_factory=lambda: defaultdict(list))
    calls: Counter[int] = field(default_factory=Counter)
    failed: Counter[int] = field(default_factory=Counter)
    failures: Counter[tuple[str, int]] = field(default_factory=Counter)
    agent_sent: set[str] = field(default_factory=set)
    agent_acked: set[str] = field(default_factory=set)
    agent_spooled: int = 0
    agent_retries: int = 0
    gw_selected: dict[str, list[str]] = field(default_factory=dict)
    gw_select_failed: set[str] = field(default_factory=set)
    gw_acked: set[tuple[str, str]] = field(default_factory=set)
    gw_unacked: int = 0
    gw_spooled: int = 0
    gw_resets: int = 0
    slack: dict[str, SlackCommand] = field(default_factory=dict)
    rss: list[tuple[float, int, int, int]] = field(default_factory=list)
    """(seconds since start, replica, incarnation, KiB)"""
    incarnation: list[int] = field(default_factory=lambda: [0] * topo.REPLICAS)
    down: set[int] = field(default_factory=set)
    """Replicas being killed and restarted: their memory is not sampled meanwhile."""
    born: dict[tuple[int, int], float] = field(default_factory=dict)
    events: list[str] = field(default_factory=list)

    def now(self) -> float:
        return time.monotonic() - self.start

    def slot(self) -> int:
        return int(self.now() // self.window)

    def record(self, kind: str, seconds: float, status: int) -> None:
        """One call's first attempt; `status` 0 when it got no HTTP answer."""
        slot = self.slot()
        self.calls[slot] += 1
        if status == 200:
            self.latency[(slot, kind)].append(seconds)
        else:
            self.failed[slot] += 1
            self.failures[(kind, status)] += 1

    def event(self, text: str) -> None:
        t = self.now()
        line = f"{int(t // 60):02d}:{int(t % 60):02d} {text}"
        self.events.append(line)
        print("  " + line, file=sys.stderr, flush=True)


# -- the clients --------------------------------------------------------------------------------


def outcome(status: int, ok: bool) -> int:
    """The status a call is recorded under: 1 for a 200 without the JSON object expected."""
    return 1 if status == 200 and not ok else status


async def paced(next_at: float, interval: float) -> float:
    """Sleep until `next_at` (never more than one interval behind), return the next due time."""
    now = time.monotonic()
    next_at = max(next_at, now - interval)
    if next_at > now:
        await asyncio.sleep(next_at - now)
    return next_at + interval


async def post(
    session: aiohttp.ClientSession, url: str, body: dict[str, Any], **kw: Any
) -> tuple[int, Any]:
    """(status, JSON body or None); status 0 when the call failed on the way."""
    try:
        async with session.post(url, json=body, **kw) as answer:
            try:
                data = await answer.json(content_type=None)
            except ValueError:
                data = None
            return answer.status, data
    except (aiohttp.ClientError, TimeoutError):
        return 0, None


async def agent(
    k: int, url: str, session: aiohttp.ClientSession, ledger: Ledger, end: float, rate: float
) -> None:
    rng = random.Random(k)
    interval, next_at, n = 1.0 / rate, time.monotonic(), 0
    while time.monotonic() < end:
        n += 1
        key = f"agent-{k}-{n}"
        for turn in range(rng.randint(1, 4)):
            next_at = await paced(next_at, interval)
            if time.monotonic() >= end:
                return
            t0 = time.perf_counter()
            status, data = await post(
                session, url + "/select", {"arms": AGENT_ARMS, "sessionKey": key}
            )
            ok = status == 200 and isinstance(data, dict)
            ledger.record("agent select", time.perf_counter() - t0, outcome(status, ok))
            chosen = set(data.get("selected") or []) if ok else {a["armId"] for a in AGENT_ARMS}
            arms = [a for a in AGENT_ARMS if a["armId"] in chosen] or AGENT_ARMS
            called = rng.sample(arms, k=min(len(arms), rng.randint(0, 3)))
            trace = f"soak-{k}-{n}-{turn}"
            body = {
                "traceId": trace,
                "sessionKey": key,
                "arms": arms,
                "toolCalls": [{"name": str(a["armId"]).rsplit(":", 1)[1]} for a in called],
                "assistantTexts": ["done"],
                "usage": {"input": rng.randint(500, 4000), "output": rng.randint(50, 800)},
                "channel": "soak",
            }
            ledger.agent_sent.add(trace)
            deadline = time.monotonic() + 120
            for attempt in range(60):  # observe is idempotent by trace id: retry what failed
                t0 = time.perf_counter()
                status, data = await post(session, url + "/observe", body)
                if attempt == 0:
                    ledger.record("agent observe", time.perf_counter() - t0, status)
                if status == 200:
                    ledger.agent_acked.add(trace)
                    ledger.agent_spooled += bool(isinstance(data, dict) and data.get("spooled"))
                    break
                if (status not in RETRYABLE and status != 0) or time.monotonic() > deadline:
                    break
                ledger.agent_retries += 1
                await asyncio.sleep(0.5)


async def gateway(
    k: int, base: str, session: aiohttp.ClientSession, ledger: Ledger, end: float, rate: float
) -> None:
    rng = random.Random(1000 + k)
    interval, next_at, n = 1.0 / rate, time.monotonic(), 0
    v1 = base + "/v1/learning"

    async def call(kind: str, path: str, body: dict[str, Any]) -> Any:
        t0 = time.perf_counter()
        status, data = await post(session, f"{v1}/{path}", body)
        ok = status == 200 and isinstance(data, dict)
        ledger.record(kind, time.perf_counter() - t0, outcome(status, ok))
        return data if ok else None

    async def observe(key: str, context: dict[str, Any], arm: str, referenced: bool) -> None:
        body = {
            "learner": GATEWAY,
            "arm_id": arm,
            "outcome": "accepted" if referenced else "rejected",
            "reward": 1.0 if referenced else 0.0,
            "context": context,
        }
        data = await call("v1 observe", "observe", body)
        if data is None:
            ledger.gw_unacked += 1
        else:
            ledger.gw_acked.add((key, arm))
            ledger.gw_spooled += bool(data.get("spooled"))

    while time.monotonic() < end:
        next_at = await paced(next_at, interval)
        if time.monotonic() >= end:
            return
        n += 1
        key = f"agent:gw{k}:soak:{n}"
        started = await call(
            "v1 session", "sessions/start", {"learner": GATEWAY, "session_name": key}
        )
        context = {
            "session_key": key,
            "channel": "soak",
            "provider": "anthropic",
            "model": "claude-sonnet-4",
            "phase": "active",
        }
        select = {
            "learner": GATEWAY,
            "candidates": CANDIDATES,
            "context": context,
            "k": 0,
            "token_budget": 800,
            "min_pulls": 0,
            "seed_arms": None,
        }
        chosen = await call("v1 select", "select", select)
        if chosen is None:
            ledger.gw_select_failed.add(key)
        else:
            ids = [str(a["id"]) for a in chosen.get("selected_arms", [])]
            ledger.gw_selected[key] = ids
            await asyncio.gather(*(observe(key, context, a, rng.random() < 0.6) for a in ids))
        if started is not None:
            await call("v1 session", "sessions/end", {"session_id": started["session_id"]})
        if n % 40 == 0:  # the gateway's reset of one arm, now and then
            arm = CANDIDATES[rng.randrange(len(CANDIDATES))]["id"]
            done = await call(
                "v1 reset", "reset", {"learner": GATEWAY, "arm_ids": [arm], "context": None}
            )
            ledger.gw_resets += done is not None


# -- Slack: the fake Web API and response_url, and the signed slash commands ---------------------


class FakeSlack:
    """auth.test, users.info (every soak user an admin) and chat.postMessage, and the
    response_url endpoint where replicas post the answers of commands that write."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self.base = ""
        self.arrived: dict[str, asyncio.Event] = defaultdict(asyncio.Event)
        self._runner: web.AppRunner | None = None

    async def start(self, host: str) -> None:
        app = web.Application()
        app.router.add_route("*", "/api/{method}", self._api)
        app.router.add_post("/response/{trigger}", self._response)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, host, 0).start()
        port = self._runner.addresses[0][1]
        self.base = f"http://{host}:{port}"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        if method == "users.info":
            form = dict(await request.post()) if request.can_read_body else {}
            user = str(form.get("user") or request.query.get("user") or "U-soak")
            return web.json_response(
                {"ok": True, "user": {"id": user, "name": user.lower(), "is_admin": True}}
            )
        return web.json_response(
            {"ok": True, "team_id": "T-soak", "user_id": "U-bot", "bot_id": "B-bot", "ts": "1.0"}
        )

    async def _response(self, request: web.Request) -> web.Response:
        trigger = request.match_info["trigger"]
        data = await request.json()
        command = self.ledger.slack.get(trigger)
        if command is not None:
            command.answers.append(str(data.get("text") or ""))
        self.arrived[trigger].set()
        return web.Response(text="ok")


def signed(text: str, user: str, response_url: str, trigger: str) -> tuple[str, dict[str, str]]:
    from slack_sdk.signature import SignatureVerifier

    body = urlencode(
        {
            "token": "soak",
            "team_id": "T-soak",
            "team_domain": "soak",
            "channel_id": "C-soak",
            "channel_name": "soak",
            "user_id": user,
            "user_name": user.lower(),
            "command": "/learning",
            "text": text,
            "api_app_id": "A-soak",
            "is_enterprise_install": "false",
            "response_url": response_url,
            "trigger_id": trigger,
        }
    )
    ts = str(int(time.time()))  # Slack signs with the wall clock; the app checks it
    headers = {
        "Content-Type": "application/x-www-form-urlencoded",
        "X-Slack-Request-Timestamp": ts,
        "X-Slack-Signature": SignatureVerifier(SECRET).generate_signature(timestamp=ts, body=body),
    }
    return body, headers


async def send_slack(
    session: aiohttp.ClientSession, base: str, fake: FakeSlack, command: SlackCommand, user: str
) -> None:
    body, headers = signed(
        command.text, user, f"{fake.base}/response/{command.trigger}", command.trigger
    )
    command.sent += 1
    t0 = time.perf_counter()
    status = 0
    try:
        async with session.post(base + "/slack/events", data=body, headers=headers) as answer:
            status = answer.status
            data = await answer.json(content_type=None) if answer.status == 200 else None
    except (aiohttp.ClientError, TimeoutError, ValueError):
        data = None
    ok = status == 200
    fake.ledger.record("slack", time.perf_counter() - t0, status)
    if ok and not command.write and isinstance(data, dict):
        command.answers.append(str(data.get("text") or ""))


async def slack(
    base: str,
    session: aiohttp.ClientSession,
    fake: FakeSlack,
    ledger: Ledger,
    end: float,
    every: float,
) -> None:
    rng = random.Random(7)
    next_at, n = time.monotonic(), 0
    while time.monotonic() < end:
        next_at = await paced(next_at, every)
        if time.monotonic() >= end:
            return
        n += 1
        roll = rng.random()
        arm = AGENT_ARMS[rng.randrange(len(AGENT_ARMS))]["armId"]
        if roll < 0.4:
            text = "status"
        elif roll < 0.8:
            text = f"reward {arm} {'good' if rng.random() < 0.7 else 'bad'} soak-r{n}"
        elif roll < 0.92:
            text = f"reset {arm} confirm"
        else:
            text = "reset undo confirm"
        command = SlackCommand(f"{n}.{secrets.token_hex(6)}", text, write=text != "status")
        ledger.slack[command.trigger] = command
        await send_slack(session, base, fake, command, SLACK_USERS[n % len(SLACK_USERS)])


# -- faults and memory --------------------------------------------------------------------------


async def faults(
    topology: Any, ledger: Ledger, duration: float, kill_every: float, pg_restarts: int
) -> None:
    plan: list[tuple[float, str, int]] = []
    t, i = kill_every / 2, 0
    while t < duration - 5:
        plan.append((t, "kill", i % topo.REPLICAS))
        t, i = t + kill_every, i + 1
    plan += [(duration * (k + 1) / (pg_restarts + 1), "postgres", 0) for k in range(pg_restarts)]
    for at, what, replica in sorted(plan):
        delay = at - ledger.now()
        if delay > 0:
            await asyncio.sleep(delay)
        if what == "kill":
            ledger.down.add(replica)
            await asyncio.to_thread(topology.kill, replica)
            ledger.event(f"replica {replica + 1} SIGKILLed")
            await asyncio.sleep(topo.RESTART_DELAY)
            await asyncio.to_thread(topology.restart, replica)
            ledger.incarnation[replica] += 1
            ledger.born[(replica, ledger.incarnation[replica])] = ledger.now()
            ledger.down.discard(replica)
            try:
                took = await asyncio.to_thread(
                    topo.wait_healthy, topology.replica_url(replica), 120
                )
                ledger.event(f"replica {replica + 1} restarted, healthy after {took:.1f} s")
            except RuntimeError as exc:
                ledger.event(f"replica {replica + 1} restarted but not healthy: {exc}")
        else:
            t0 = time.monotonic()
            try:
                await asyncio.to_thread(topology.restart_postgres)
                ledger.event(f"PostgreSQL restarted in {time.monotonic() - t0:.1f} s")
            except Exception as exc:  # reported; the checks afterwards judge the outcome
                ledger.event(f"PostgreSQL restart failed: {exc}")


async def sample_memory(topology: Any, ledger: Ledger, end: float) -> None:
    while time.monotonic() < end:
        for i in range(topo.REPLICAS):
            pid = await asyncio.to_thread(topology.replica_pid, i)
            kib = topo.rss_kib(pid)
            if kib and i not in ledger.down:  # not a process on its way out
                ledger.rss.append((ledger.now(), i, ledger.incarnation[i], kib))
        await asyncio.sleep(5)


# -- afterwards -----------------------------------------------------------------------------------


async def settle(topology: Any, ledger: Ledger) -> None:
    """Every replica up and its spool empty (bounded)."""
    for i in range(topo.REPLICAS):
        if topology.replica_pid(i) is None:
            await asyncio.to_thread(topology.restart, i)
        await asyncio.to_thread(topo.wait_healthy, topology.replica_url(i), 120)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        pending = []
        for i in range(topo.REPLICAS):
            health = await asyncio.to_thread(topo.healthy, topology.replica_url(i), 5)
            spool = (health or {}).get("spool") if health is not None else {"pending": True}
            if isinstance(spool, dict) and spool.get("pending"):
                pending.append(i + 1)
        if not pending:
            return
        await asyncio.sleep(1)
    ledger.event(f"spools still pending after 300 s on replicas {pending}")


async def finish_commands(
    base: str, session: aiohttp.ClientSession, fake: FakeSlack, ledger: Ledger
) -> int:
    """Send every write command without a final answer again, with its trigger (a retry: the
    stored reply comes back, or the claim's lease has run out and the command runs once).
    Returns how many were sent again."""
    again = 0
    for _ in range(6):
        waiting = [c for c in ledger.slack.values() if c.write and not c.final]
        if not waiting:
            break
        await asyncio.sleep(LEASE_SECONDS + 1)
        for command in waiting:
            fake.arrived[command.trigger].clear()
            await send_slack(session, base, fake, command, SLACK_USERS[0])
            again += 1
        for command in waiting:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(fake.arrived[command.trigger].wait(), 30)
    return again


@dataclass
class Check:
    name: str
    expected: str
    found: str
    ok: bool


def described(ledger: Ledger, trigger: str) -> str:
    """A Slack command, for a failed check: its text and what it was answered."""
    command = ledger.slack.get(trigger)
    if command is None:
        return f"{trigger} (no command the soak sent)"
    return f"{command.text!r} answered {[a[:80] for a in command.answers]!r}"


def check_database(url: str, ledger: Ledger) -> list[Check]:
    import sqlalchemy as sa

    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    checks: list[Check] = []
    try:
        with engine.connect() as conn:
            q = conn.exec_driver_sql
            ids = {str(r.name): int(r.id) for r in q("SELECT id, name FROM learners")}
            agent_id, gw_id = ids.get("default", -1), ids.get(GATEWAY, -1)

            stored = Counter(
                {
                    str(r[0]): int(r[1])
                    for r in q(
                        "SELECT trace_id, count(*) FROM traces WHERE learner_id = %(l)s"
                        " GROUP BY trace_id",
                        {"l": agent_id},
                    )
                }
            )
            acked = ledger.agent_acked
            missing = [t for t in acked if stored[t] == 0]
            twice = [t for t, c in stored.items() if c > 1]
            unknown = [t for t in stored if t not in ledger.agent_sent]
            unacked_stored = sum(1 for t in stored if t in ledger.agent_sent and t not in acked)
            checks.append(
                Check(
                    "agent runs (POST observe)",
                    f"{len(acked):,} acknowledged, each stored once",
                    f"{sum(1 for t in acked if stored[t] == 1):,} stored once; {len(missing)} "
                    f"missing, {len(twice)} twice, {len(unknown)} unknown; "
                    f"{unacked_stored} unacknowledged stored",
                    not missing and not twice and not unknown,
                )
            )

            runs = Counter(
                {
                    str(r[0]): int(r[1])
                    for r in q(
                        "SELECT session_key, count(*) FROM traces WHERE learner_id = %(l)s"
                        " GROUP BY session_key",
                        {"l": gw_id},
                    )
                }
            )
            selected = ledger.gw_selected
            missing_runs = [k for k in selected if runs[k] == 0]
            twice_runs = [k for k, c in runs.items() if c > 1]
            known = set(selected) | ledger.gw_select_failed
            unknown_runs = [k for k in runs if k not in known]
            checks.append(
                Check(
                    "gateway runs (/v1 select)",
                    f"{len(selected):,} acknowledged, each one run",
                    f"{sum(1 for k in selected if runs[k] == 1):,} one run; {len(missing_runs)} "
                    f"missing, {len(twice_runs)} twice, {len(unknown_runs)} unknown",
                    not missing_runs and not twice_runs and not unknown_runs,
                )
            )

            marked = Counter(
                (str(r[0]), str(r[1]))
                for r in q(
                    "SELECT t.session_key, p.arm_id FROM trace_arms a"
                    " JOIN traces t ON t.id = a.trace_pk"
                    " JOIN posteriors p ON p.learner_id = t.learner_id AND p.arm_key = a.arm_key"
                    " WHERE t.learner_id = %(l)s AND a.reward IS NOT NULL",
                    {"l": gw_id},
                )
            )
            apart = int(
                q(
                    "SELECT count(*) FROM observations WHERE learner_id = %(l)s"
                    " AND source = 'auto'",
                    {"l": gw_id},
                ).scalar_one()
            )
            outcomes = ledger.gw_acked
            unmarked = [o for o in outcomes if marked[o] == 0]
            total = sum(marked.values()) + apart
            ceiling = len(outcomes) + ledger.gw_unacked
            checks.append(
                Check(
                    "per-arm outcomes (/v1 observe)",
                    f"{len(outcomes):,} acknowledged stored once; at most "
                    f"{ledger.gw_unacked} unacknowledged",
                    f"{len(outcomes) - len(unmarked):,} on their run, {apart} apart from a run; "
                    f"{total:,} stored in all",
                    len(unmarked) <= apart and len(outcomes) <= total <= ceiling,
                )
            )

            rewards = Counter(
                str(r[0])
                for r in q(
                    "SELECT reason FROM observations WHERE learner_id = %(l)s"
                    " AND source = 'manual' AND reason LIKE 'soak-r%%'",
                    {"l": agent_id},
                )
            )
            replies = {
                str(r[0]).removeprefix("slack:command:"): r[1]
                for r in q("SELECT key, reply FROM command_results WHERE key LIKE 'slack:%%'")
            }
            # A claim without a reply is stuck when its command writes (or is none the clients
            # sent) and may have changed something: a command's first change stores a reply on
            # its claim in the same transaction, so a write whose claim has none changed
            # nothing, and a retry past the lease (LEARNING_BOT_COMMAND_LEASE) takes the claim
            # over and runs it once. Reported apart: reads (a replica killed mid-command, a
            # reply lost to a PostgreSQL restart) and writes every answer of which said storage
            # was unavailable (refused before any change, and the refusal's record lost too).
            claimed = [k for k, reply in replies.items() if reply is None]
            reads = [k for k in claimed if k in ledger.slack and not ledger.slack[k].write]
            refused = [
                k
                for k in claimed
                if k in ledger.slack
                and ledger.slack[k].write
                and ledger.slack[k].answers
                and all(UNAVAILABLE in a for a in ledger.slack[k].answers)
            ]
            stuck = [k for k in claimed if k not in reads and k not in refused]
            reward_ok, reward_bad = 0, []
            for command in ledger.slack.values():
                if not command.text.startswith("reward "):
                    continue
                reason = command.text.rsplit(" ", 1)[1]
                reply = replies.get(command.trigger)
                kind = json.loads(reply).get("kind") if reply else None
                want = 1 if kind == "ok" else 0
                if rewards[reason] == want:
                    reward_ok += want
                else:
                    reward_bad.append(command.trigger)
            writes = [c for c in ledger.slack.values() if c.write]
            unanswered = [c.trigger for c in writes if not c.final]
            checks.append(
                Check(
                    "Slack rewards",
                    "each one answered ok stored once, others not at all",
                    f"{reward_ok} stored once; {len(reward_bad)} otherwise",
                    not reward_bad,
                )
            )
            checks.append(
                Check(
                    "stuck commands",
                    "every claimed write has its reply and its answer",
                    f"{len(stuck)} write claims without a reply ({len(reads)} of reads, "
                    f"{len(refused)} of writes refused while storage was unavailable); "
                    f"{len(unanswered)} of {len(writes)} writes unanswered"
                    + "".join(f"; stuck: {described(ledger, k)}" for k in stuck[:3]),
                    not stuck and not unanswered,
                )
            )
    finally:
        engine.dispose()
    return checks


def p99(values: list[float]) -> str:
    if not values:
        return "-"
    return f"{float(np.percentile(np.array(values) * 1000, 99)):.0f}"


def report(ledger: Ledger, minutes: float) -> list[str]:
    slots = max(1, int(np.ceil(minutes * 60 / ledger.window)))
    kinds = ("agent select", "agent observe", "v1 select", "v1 observe", "slack")
    header = ("minutes", "agent select p99", "agent observe p99", "/v1 select p99",
              "/v1 observe p99", "Slack p99", "calls", "failed",
              "RSS max r1 / r2 / r3")  # fmt: skip
    rows = []
    w = ledger.window / 60
    for s in range(slots):
        rss = []
        for i in range(topo.REPLICAS):
            kib = [
                k
                for t, r, _, k in ledger.rss
                if r == i and s * ledger.window <= t < (s + 1) * ledger.window
            ]
            rss.append(f"{max(kib) / 1024:.0f}" if kib else "-")
        cells = [p99(ledger.latency[(s, kind)]) + " ms" for kind in kinds]
        rows.append(
            (
                f"{s * w:g}-{(s + 1) * w:g}",
                *cells,
                f"{ledger.calls[s]:,}",
                f"{ledger.failed[s]:,}",
                f"{' / '.join(rss)} MiB",
            )
        )
    return table_lines(header, rows)


def memory_trends(ledger: Ledger, settle_seconds: float) -> list[str]:
    """Each replica process's memory after its first `settle_seconds`: first and last sample
    and the slope of a line fitted to them."""
    lines = []
    for i in range(topo.REPLICAS):
        for inc in sorted({n for _, r, n, _ in ledger.rss if r == i}):
            born = ledger.born.get((i, inc), 0.0)
            samples = [(t, k) for t, r, n, k in ledger.rss if r == i and n == inc]
            late = [(t, k) for t, k in samples if t - born >= settle_seconds]
            life = (samples[-1][0] - born) / 60 if samples else 0
            if len(late) < 6:
                lines.append(
                    f"replica {i + 1} process {inc + 1}: started at minute {born / 60:.1f}, "
                    f"lived {life:.1f} min (too short for a trend)"
                )
                continue
            ts = np.array([t for t, _ in late]) / 60
            mib = np.array([k for _, k in late]) / 1024
            slope = float(np.polyfit(ts, mib, 1)[0])
            lines.append(
                f"replica {i + 1} process {inc + 1}: started at minute {born / 60:.1f}, lived "
                f"{life:.1f} min; {mib[0]:.0f} MiB at its minute {settle_seconds / 60:.2g}, "
                f"{mib[-1]:.0f} MiB at its end, max {mib.max():.0f}; trend {slope:+.2f} MiB/min"
            )
    return lines


def images_present() -> bool:
    names = ("learning-bot:latest", "learning-bot-postgres:15", "learning-bot-proxy:latest")
    return all(
        subprocess.run(["docker", "image", "inspect", n], capture_output=True).returncode == 0
        for n in names
    )


def choose_topology(wanted: str) -> tuple[str, str]:
    if wanted != "auto":
        return wanted, "as asked"
    if topo.compose_command() is None:
        return "processes", "no container engine with compose runs here"
    if not images_present():
        return "processes", "the images of deploy/build-images.sh are not built"
    return "compose", "a container engine runs here"


async def run(args: argparse.Namespace, topology: Any, settings: dict[str, str]) -> int:
    duration = args.minutes * 60
    kill_every = (args.kill_every if args.kill_every else min(5.0, args.minutes / 3)) * 60
    window = (args.window if args.window else min(5.0, args.minutes / 3)) * 60
    ledger = Ledger(start=time.monotonic(), window=window)
    fake = FakeSlack(ledger)
    host = topology.slack_host() if topology.name == "compose" else "127.0.0.1"
    await fake.start(host)
    if topology.name == "compose":
        settings["SLACK_API_URL"] = fake.base.replace(host, "host.docker.internal") + "/api/"
    else:
        settings["SLACK_API_URL"] = fake.base + "/api/"
    t0 = time.monotonic()
    await asyncio.to_thread(topology.start, settings)
    print(f"  deployment up in {time.monotonic() - t0:.0f} s ({topology.name})", file=sys.stderr)
    ledger.start = time.monotonic()
    for i in range(topo.REPLICAS):
        ledger.born[(i, 0)] = 0.0
    end = ledger.start + duration
    base = topology.proxy_url
    headers = {"Authorization": f"Bearer {TOKEN}"}
    timeout = aiohttp.ClientTimeout(total=60)
    async with aiohttp.ClientSession(headers=headers, timeout=timeout) as session:
        tasks = [
            *(agent(k, base + API, session, ledger, end, args.rate / 3) for k in range(3)),
            *(gateway(k, base, session, ledger, end, args.turns / 2) for k in range(2)),
            slack(base, session, fake, ledger, end, args.slack_every),
            faults(topology, ledger, duration, kill_every, args.pg_restarts),
            sample_memory(topology, ledger, end),
        ]
        await asyncio.wait_for(asyncio.gather(*tasks), duration + 600)
        ledger.event("traffic stopped; waiting for every replica and spool")
        await settle(topology, ledger)
        again = await finish_commands(base, session, fake, ledger)
    await fake.stop()
    checks = await asyncio.to_thread(check_database, topology.database_url, ledger)
    verify = await asyncio.to_thread(
        subprocess.run,
        [topo.EXE, "--database-url", topology.database_url, "db", "verify"],
        capture_output=True,
        text=True,
        check=False,
    )
    checks.append(Check("db verify", "exit 0", f"exit {verify.returncode}", verify.returncode == 0))

    ok = all(c.ok for c in checks)
    if not ok:  # the deployment's logs first, so the report below is what a tail shows last
        print(topology.logs()[-20000:], file=sys.stderr, flush=True)
    kills = sum("SIGKILLed" in e for e in ledger.events)
    turns = len(ledger.gw_selected) + len(ledger.gw_select_failed)
    outcomes = len(ledger.gw_acked) + ledger.gw_unacked
    restarts = sum("PostgreSQL restarted" in e for e in ledger.events)
    print(
        f"\nsoak: {args.minutes:g} min, topology {topology.name}, 3 replicas behind the proxy, "
        f"PostgreSQL: {topology.postgres}; {kills} replica SIGKILLs (every "
        f"{kill_every / 60:g} min, restarted after {topo.RESTART_DELAY:g} s), {restarts} "
        f"PostgreSQL restarts"
    )
    print(
        f"traffic: {len(ledger.agent_sent):,} agent runs ({ledger.agent_retries:,} observe "
        f"retries, {ledger.agent_spooled:,} spooled), {turns:,} gateway turns "
        f"({outcomes:,} per-arm observes, "
        f"{ledger.gw_spooled:,} spooled, {ledger.gw_resets} resets), {len(ledger.slack):,} Slack "
        f"commands ({again} sent again after their replica died)\n"
    )
    for line in report(ledger, args.minutes):
        print(line)
    print()
    print_table(
        ("check", "expected", "found", ""),
        [(c.name, c.expected, c.found, "ok" if c.ok else "FAILED") for c in checks],
    )
    print()
    for line in memory_trends(ledger, min(300.0, duration / 3)):
        print(line)
    failures = ", ".join(
        f"{kind} {WHAT.get(status, status)}: {n}"
        for (kind, status), n in sorted(ledger.failures.items())
    )
    print(f"\nfailed first attempts: {failures or 'none'}")
    print("events:")
    for line in ledger.events:
        print("  " + line)
    print(verify.stdout.strip() or verify.stderr.strip())
    print("result:", "PASS" if ok else "FAIL", flush=True)
    if not ok:
        failed = "; ".join(f"{c.name}: {c.found}" for c in checks if not c.ok)
        print(f"soak: FAIL ({failed})", file=sys.stderr, flush=True)
    return 0 if ok else 1


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--minutes", type=float, default=30, help="traffic duration (default 30)")
    parser.add_argument(
        "--topology",
        choices=["auto", "compose", "processes"],
        default="auto",
        help="compose (deploy/compose.yaml + deploy/soak.compose.yaml), processes, or auto: "
        "compose when a container engine runs and the images are built",
    )
    parser.add_argument(
        "--postgres",
        choices=["private", "local"],
        default="private",
        help="processes only: a cluster of the soak's own (default) or the local cluster "
        "(pg_ctlcluster restart: cuts every other user's connections too)",
    )
    parser.add_argument(
        "--kill-every", type=float, default=0, help="minutes (default min(5, minutes/3))"
    )
    parser.add_argument("--pg-restarts", type=int, default=2)
    parser.add_argument(
        "--window", type=float, default=0, help="report window, minutes (default min(5, minutes/3))"
    )
    parser.add_argument("--rate", type=float, default=8, help="agent runs per second (3 clients)")
    parser.add_argument(
        "--turns", type=float, default=2, help="gateway turns per second (2 clients)"
    )
    parser.add_argument(
        "--slack-every", type=float, default=4, help="seconds between Slack commands"
    )
    args = parser.parse_args()
    if not 0 < args.minutes <= 240:
        parser.error("--minutes must be in (0, 240]")

    kind, why = choose_topology(args.topology)
    print(f"soak: topology {kind} ({why})", file=sys.stderr, flush=True)
    root = topo.temporary_root()
    topology = topo.make(kind, root, args.postgres)
    settings = {
        "LEARNING_BOT_API_TOKEN": TOKEN,
        "LEARNING_BOT_PHASE": "active",
        "LEARNING_BOT_COMMAND_LEASE": str(LEASE_SECONDS),
        "LEARNING_BOT_LOG_LEVEL": "warning",
        "SLACK_BOT_TOKEN": "xoxb-soak",
        "SLACK_SIGNING_SECRET": SECRET,
    }

    def stop(signum: int, _: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, stop)
    try:
        return asyncio.run(run(args, topology, settings))
    except KeyboardInterrupt:
        print("soak: interrupted", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        topology.close()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
