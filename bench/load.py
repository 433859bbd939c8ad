"""Sustained load, and faults under load: does the server hold the rate, lose nothing, and
keep its memory flat?

Starts `learning-bot serve` on a fresh database, drives `POST observe` at a steady rate from
8 concurrent clients (20 arms per run) while two readers poll summary and posteriors, samples
the server's memory, and afterwards checks `learning-bot db verify` and that the database holds
every run sent exactly once.

    .venv/bin/python -m bench.load --db sqlite --duration 300 --rate 300
    .venv/bin/python -m bench.load --db postgresql --duration 300 --rate 300
    .venv/bin/python -m bench.load --db postgresql --duration 120 --fault pg-stop
    .venv/bin/python -m bench.load --db sqlite --duration 120 --fault kill-server
    .venv/bin/python -m bench.load --db postgresql --duration 120 --fault proxy-stop --poison 0.01
    .venv/bin/python -m bench.load --spool-appends 4000

`--spool-appends N` measures the spool alone: 5 batches of N runs (20 arms each) appended
through the spooling writer while storage is unavailable (its replay thread retrying every
second, as in an outage), printing the cost per run of each batch.

Faults: `pg-stop` stops the local PostgreSQL for 30 s in the middle of the run (the server
spools runs and replays them); `kill-server` SIGKILLs the server in the middle and starts it
again (clients retry what failed; runs are idempotent by trace id); `proxy-stop` runs the
server's database connections through a local TCP proxy and cuts it for 30 s (the same outage
as far as the server can tell, without stopping a PostgreSQL other work shares).

`--poison F` makes a fraction F of the runs hostile (integers past 2^63, lone surrogates, NUL,
numbers past a float): each must be refused with 400 while good runs are all stored. During
a `proxy-stop` outage the harness also plants spool lines that the current codec refuses, as
a spool left by an older version: each must end in the dead-letter file, and replay go on.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np

from bench.table import print_table
from learning_bot.engine.report_json import report_to_json
from learning_bot.research.simulation import make_workload

TOKEN = "load-token-0123456789abcdef"
BASE = "/__openclaw__/api/learning"
EXE = str(Path(sys.executable).with_name("learning-bot"))
PG_BASE = os.environ.get(
    "LEARNING_BOT_TEST_DATABASE_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)


@dataclass
class Stats:
    sent: int = 0
    ok: int = 0
    spooled: int = 0
    retried: int = 0
    failed: int = 0
    latencies: list[float] = field(default_factory=list)
    reads: int = 0
    read_errors: int = 0
    rss_kib: list[tuple[float, int]] = field(default_factory=list)
    poison_refused: int = 0
    poison_accepted: int = 0


class Server:
    def __init__(self, db: str, port: int, spool: Path) -> None:
        self.db, self.port, self.spool = db, port, spool
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = open(spool.parent / "server.log", "ab")  # noqa: SIM115

    def start(self) -> None:
        env = {
            **os.environ,
            "LEARNING_BOT_DATABASE_URL": self.db,
            "LEARNING_BOT_API_TOKEN": TOKEN,
            "LEARNING_BOT_PHASE": "active",
            "LEARNING_BOT_SPOOL_DIR": str(self.spool),
            "LEARNING_BOT_LOG_LEVEL": "warning",
        }
        self.proc = subprocess.Popen(
            [EXE, "serve", "--port", str(self.port)], env=env, stdout=self.log, stderr=self.log
        )

    def rss_kib(self) -> int:
        if self.proc is None:
            return 0
        try:
            for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        except OSError:
            return 0
        return 0

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> float:
        """SIGTERM; returns how long the server took to exit."""
        if self.proc is None:
            return 0.0
        t0 = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=30)
        return time.monotonic() - t0


async def wait_up(url: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    async with aiohttp.ClientSession() as session:
        while time.monotonic() < deadline:
            try:
                async with session.get(url + BASE + "/healthz") as r:
                    if r.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.1)
    raise RuntimeError("the server did not come up")


async def run_load(
    url: str, bodies: list[dict[str, Any]], rate: float, clients: int, stats: Stats
) -> None:
    start = time.monotonic()
    interval = 1.0 / rate
    headers = {"Authorization": f"Bearer {TOKEN}"}
    timeout = aiohttp.ClientTimeout(total=30)
    async with aiohttp.ClientSession(headers=headers, timeout=timeout) as session:

        async def client(k: int) -> None:
            for i in range(k, len(bodies), clients):
                due = start + i * interval
                delay = due - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                stats.sent += 1
                t0 = time.perf_counter()
                tries = 0
                for _ in range(600):
                    tries += 1
                    try:
                        async with session.post(
                            url + BASE + "/observe",
                            data=json.dumps(bodies[i]),
                            headers={"Content-Type": "application/json"},
                        ) as r:
                            data = await r.json()
                            if bodies[i].get("traceId", "").startswith("poison-"):
                                if r.status == 400:
                                    stats.poison_refused += 1
                                else:
                                    stats.poison_accepted += 1
                                break
                            if r.status == 200:
                                stats.ok += 1
                                stats.spooled += bool(data.get("spooled"))
                                break
                    except (TimeoutError, aiohttp.ClientError):
                        pass
                    stats.retried += 1
                    await asyncio.sleep(0.1)
                else:
                    stats.failed += 1
                if tries == 1:
                    stats.latencies.append(time.perf_counter() - t0)

        await asyncio.gather(*(client(k) for k in range(clients)))


async def readers(url: str, stats: Stats, stop: asyncio.Event) -> None:
    async with aiohttp.ClientSession() as session:

        async def poll(path: str) -> None:
            while not stop.is_set():
                try:
                    async with session.get(url + BASE + path) as r:
                        await r.read()
                        stats.reads += 1
                        stats.read_errors += r.status != 200
                except aiohttp.ClientError:
                    stats.read_errors += 1
                await asyncio.sleep(0.5)

        await asyncio.gather(poll("/summary"), poll("/posteriors"))


POISONS: list[dict[str, Any]] = [
    {"usage": {"total": 2**63}},
    {"usage": {"input": 5 * 10**18}},
    {"durationMs": 2**64},
    {"timestamp": 2**63},
    {"context": {"x": 2**70}},
    {"error": "nul\x00inside"},
    {"error": "lone \ud800 surrogate"},
    {"arms": [{"armId": "tool:fs:R\ud800", "tokenCost": 1}]},
    {"arms": [{"armId": "tool:fs:Read", "tokenCost": 10**30}]},
]


def poisoned(body: dict[str, Any], k: int) -> dict[str, Any]:
    return {**body, "traceId": f"poison-{k}", **POISONS[k % len(POISONS)]}


def plant_old_spool(spool: Path, count: int) -> int:
    """Spool lines the codec refuses, left by a dead process of an older version."""
    folder = spool / "p999999-planted"
    folder.mkdir(parents=True, exist_ok=True)
    lines = []
    for k in range(count):
        bad: dict[str, Any] = {"l": 1, "traceId": f"planted-{k}", "timestamp": 1}
        bad.update(POISONS[k % len(POISONS)])
        lines.append(json.dumps(bad) + "\n")
    (folder / "000000000001.jsonl").write_text("".join(lines))
    return count


class TcpProxy:
    """Forwards 127.0.0.1:<port> to PostgreSQL; `cut()` drops every connection and refuses new
    ones until `restore()`."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.up = True
        self.writers: set[asyncio.StreamWriter] = set()
        self.server: asyncio.Server | None = None
        self.port = 0

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not self.up:
            writer.close()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        self.writers |= {writer, up_writer}

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except (OSError, ConnectionError):
                pass
            finally:
                dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        self.writers -= {writer, up_writer}

    def cut(self) -> None:
        self.up = False
        for writer in list(self.writers):
            writer.transport.abort()
        self.writers.clear()

    def restore(self) -> None:
        self.up = True

    async def close(self) -> None:
        self.cut()
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()
        await asyncio.sleep(0.1)  # the pipes see their connections end


def spool_appends(per_batch: int, batches: int = 5) -> int:
    """Per-run cost of spooling, batch by batch, while storage is down: flat when an append
    does not depend on how much the spool already holds."""
    from learning_bot.engine import (
        Arm,
        LearningConfig,
        Phase,
        ReportedArm,
        RunReport,
        ToolCall,
        Unavailable,
    )
    from learning_bot.engine.observation import observation_guard, rewards_for_run
    from learning_bot.engine.records import record_from_report
    from learning_bot.storage.spool import Spool
    from learning_bot.storage.spooling_store import SpoolingStore

    config = LearningConfig(phase=Phase.ACTIVE)
    arms = tuple(ReportedArm(Arm(f"tool:bench:T{k}", 100), True) for k in range(20))

    class Down:
        def record_runs(self, learner_id: int, runs: Any, settings: Any = None) -> Any:
            raise Unavailable("storage is unavailable: connection refused")

    tmp = Path(tempfile.mkdtemp(prefix="learning-spool-"))
    store = SpoolingStore(Down(), Spool(tmp / "spool"), retry_seconds=1.0)  # type: ignore[arg-type]
    costs = []
    for batch in range(batches):
        records = []
        for i in range(per_batch):
            run = RunReport(f"s{batch}-{i}", arms, tool_calls=(ToolCall("T1"),))
            guard = observation_guard(run, config, ignore_phase=True)
            records.append(
                record_from_report(run, rewards_for_run(run, config), config.phase, guard)
            )
        t0 = time.perf_counter()
        for record in records:
            store.record_runs(1, [record])
        elapsed = time.perf_counter() - t0
        costs.append(elapsed / per_batch * 1000)
        print(f"batch {batch + 1}: {costs[-1]:.2f} ms/run, {per_batch / elapsed:,.0f} runs/s")
    segments = len(list((tmp / "spool").glob("p*/*.jsonl")))
    print(
        f"{per_batch * batches:,} runs spooled in {segments} segment(s); "
        f"last/first batch cost {costs[-1] / costs[0]:.2f}"
    )
    store.close()
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


def pg_ctl(action: str) -> None:
    version = sorted(os.listdir("/etc/postgresql"))[-1]
    subprocess.run(
        ["pg_ctlcluster", "--skip-systemctl-redirect", version, "main", action], check=True
    )


def fresh_database(kind: str, tmp: Path) -> tuple[str, Any]:
    if kind == "sqlite":
        return f"sqlite:///{tmp}/load.sqlite", None
    import sqlalchemy as sa

    schema = f"load_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(PG_BASE, poolclass=sa.pool.NullPool)
    with admin.begin() as conn:
        conn.exec_driver_sql(f"CREATE SCHEMA {schema}")
    sep = "&" if "?" in PG_BASE else "?"
    return f"{PG_BASE}{sep}options=-csearch_path%3D{schema}", (admin, schema)


def count_traces(db: str) -> int:
    from learning_bot.storage import SqlStore

    store = SqlStore(db)
    try:
        with store.engine.connect() as conn:
            return int(conn.exec_driver_sql("SELECT COUNT(*) FROM traces").scalar_one())
    finally:
        store.close()


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--db", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--duration", type=float, default=300)
    parser.add_argument("--rate", type=float, default=300)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--arms", type=int, default=20)
    parser.add_argument("--port", type=int, default=8795)
    parser.add_argument(
        "--fault", choices=("none", "pg-stop", "proxy-stop", "kill-server"), default="none"
    )
    parser.add_argument("--poison", type=float, default=0.0, help="fraction of hostile runs")
    parser.add_argument("--spool-appends", type=int, default=0, help="spool alone: N per batch")
    args = parser.parse_args()
    if args.spool_appends:
        return spool_appends(args.spool_appends)
    if args.fault in ("pg-stop", "proxy-stop") and args.db != "postgresql":
        parser.error(f"--fault {args.fault} needs --db postgresql")

    total = int(args.duration * args.rate)
    workload = make_workload(args.arms, seed=3)
    rng = np.random.default_rng(3)
    ids = [a.id for a in workload.arms]
    nonce = uuid.uuid4().hex[:8]
    bodies = [
        report_to_json(workload.report(f"{nonce}-{i}", ids, workload.draw_usage(i, rng)[1], False))
        for i in range(total)
    ]
    poison_every = round(1 / args.poison) if args.poison > 0 else 0
    n_poison = 0
    if poison_every:
        for i in range(poison_every // 2, total, poison_every):
            bodies[i] = poisoned(bodies[i], n_poison)
            n_poison += 1
    good = total - n_poison
    planted = 0
    tmp = Path(tempfile.mkdtemp(prefix="learning-load-"))
    db, cleanup = fresh_database(args.db, tmp)
    served_db = db
    proxy: TcpProxy | None = None
    if args.fault == "proxy-stop":
        from urllib.parse import urlsplit, urlunsplit

        parts = urlsplit(db)
        proxy = TcpProxy((parts.hostname or "127.0.0.1", parts.port or 5432))
        await proxy.start()
        user = f"{parts.username}@" if parts.username else ""
        served_db = urlunsplit(parts._replace(netloc=f"{user}127.0.0.1:{proxy.port}"))
    server = Server(served_db, args.port, tmp / "spool")
    server.start()
    url = f"http://127.0.0.1:{args.port}"
    stats = Stats()
    stop_readers = asyncio.Event()
    try:
        await wait_up(url)
        t_start = time.monotonic()

        async def sampler() -> None:
            while not stop_readers.is_set():
                stats.rss_kib.append((time.monotonic() - t_start, server.rss_kib()))
                await asyncio.sleep(5)

        async def fault() -> None:
            await asyncio.sleep(
                args.duration / 2 - 15
                if args.fault in ("pg-stop", "proxy-stop")
                else args.duration / 2
            )
            nonlocal planted
            if args.fault == "proxy-stop" and proxy is not None:
                print("fault: cutting the database connection for 30 s", flush=True)
                proxy.cut()
                if poison_every:
                    planted = plant_old_spool(tmp / "spool", max(1, n_poison // 4))
                await asyncio.sleep(30)
                proxy.restore()
                print("fault: the database connection is back", flush=True)
            elif args.fault == "pg-stop":
                print("fault: stopping PostgreSQL for 30 s", flush=True)
                await asyncio.to_thread(pg_ctl, "stop")
                await asyncio.sleep(30)
                await asyncio.to_thread(pg_ctl, "start")
                print("fault: PostgreSQL started again", flush=True)
            elif args.fault == "kill-server":
                print("fault: SIGKILL to the server, then a restart", flush=True)
                server.kill()
                await asyncio.sleep(2)
                server.start()

        tasks = [
            asyncio.create_task(readers(url, stats, stop_readers)),
            asyncio.create_task(sampler()),
        ]
        if args.fault != "none":
            tasks.append(asyncio.create_task(fault()))
        load_start = time.monotonic()
        await run_load(url, bodies, args.rate, args.clients, stats)
        elapsed = time.monotonic() - load_start
        stop_readers.set()
        await asyncio.gather(*tasks)
        # let the spool drain (after a database outage or a restart)
        deadline = time.monotonic() + 120
        while count_traces(db) < good and time.monotonic() < deadline:
            await asyncio.sleep(1)
        shutdown = server.stop()
    finally:
        if server.proc is not None and server.proc.poll() is None:
            server.kill()
        if proxy is not None:
            await proxy.close()
    stored = count_traces(db)
    dead_file = tmp / "spool" / "dead-letter.jsonl"
    dead = len(dead_file.read_text().splitlines()) if dead_file.exists() else 0
    verify = subprocess.run(
        [EXE, "db", "verify"],
        env={**os.environ, "LEARNING_BOT_DATABASE_URL": db},
        capture_output=True,
        text=True,
    )
    lat = sorted(stats.latencies)
    p50 = statistics.median(lat) * 1000 if lat else float("nan")
    p99 = lat[int(0.99 * (len(lat) - 1))] * 1000 if lat else float("nan")
    rss = [kib for _, kib in stats.rss_kib if kib]
    slope = 0.0
    if len(stats.rss_kib) >= 3:
        xs = np.array([t for t, kib in stats.rss_kib if kib], dtype=float)
        ys = np.array(rss, dtype=float)
        if len(xs) >= 3:
            slope = float(np.polyfit(xs, ys, 1)[0]) * 60 / 1024  # MiB per minute
    print()
    rows = [
        ("target rate", f"{args.rate:.0f} runs/s", "held", f"{stats.ok / elapsed:,.0f} runs/s"),
        ("runs sent", f"{total:,}", "stored once", f"{stored:,}"),
    ]
    if poison_every:
        rows += [
            (
                "hostile runs",
                f"{n_poison}",
                "refused 400",
                f"{stats.poison_refused} (accepted {stats.poison_accepted})",
            ),
            ("old spool lines planted", f"{planted}", "in dead-letter file", f"{dead}"),
        ]
    rss_start = rss[0] / 1024 if rss else 0
    rss_end = rss[-1] / 1024 if rss else 0
    rows += [
        ("observe p50", f"{p50:.1f} ms", "p99", f"{p99:.1f} ms"),
        ("failed calls", f"{stats.failed}", "retried", f"{stats.retried}"),
        ("spooled", f"{stats.spooled}", "reads (errors)", f"{stats.reads} ({stats.read_errors})"),
        (
            "server RSS start",
            f"{rss_start:.0f} MiB",
            "end",
            f"{rss_end:.0f} MiB (trend {slope:+.2f} MiB/min)",
        ),
        ("shutdown on SIGTERM", f"{shutdown:.2f} s", "db verify", f"exit {verify.returncode}"),
    ]
    print_table(("database", args.db, "fault", str(args.fault)), rows)
    if stats.rss_kib:
        # Resident memory at each whole minute: a cache filling up levels off, a leak does not.
        minutes = {}
        for t, kib in stats.rss_kib:
            if kib:
                minutes.setdefault(int(t // 60), kib)
        marks = ", ".join(f"{m} min {kib / 1024:.0f}" for m, kib in sorted(minutes.items()))
        print(f"server RSS by minute (MiB): {marks}, end {rss[-1] / 1024:.0f}")
    print(verify.stdout.strip())
    ok = (
        stored == good
        and verify.returncode == 0
        and stats.failed == 0
        and stats.poison_refused == n_poison
        and dead == planted
    )
    print("result:", "PASS" if ok else "FAIL")
    if cleanup is not None:
        admin, schema = cleanup
        with admin.begin() as conn:
            conn.exec_driver_sql(f"DROP SCHEMA {schema} CASCADE")
    shutil.rmtree(tmp, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
