"""What does a transaction-mode pgbouncer cost the observe path, how many connections does one
process open, and how long does a dead process's spool wait for a live one?

Three tables:

- throughput: observes per second through `LearningService.observe` on PostgreSQL, from
  `--threads` writer threads in one process, each run a new trace with 8 arms (every arm
  included, one called), in three set-ups measured in turns in the same sitting:
  direct (prepared statements, the default on a direct connection), direct-unprepared
  (LEARNING_BOT_DB_POOLER=transaction on a direct connection: what not preparing costs alone)
  and pgbouncer (transaction mode, `default_pool_size` 8, found by `auto`). The ratio is
  against direct.
- connections: the most connections `pg_stat_activity` shows for the process's database
  while 48 threads observe and read at once (every read and transaction engine, the observe
  engine), next to the bound storage.pooling states (2 x (size + overflow)), for the default
  settings and for LEARNING_BOT_DB_POOL_SIZE=2, _MAX_OVERFLOW=1.
- adoption: seconds from a process's spool being left behind (its lock released, as when
  the process is killed) until a live SpoolingStore with `adopt_seconds` has written all
  of its runs, for intervals 0.2 s and 1 s (the default is 5 s): the delay is the interval
  at most, plus the replay.

Each database is a new one on the server of LEARNING_BOT_TEST_DATABASE_URL (default
postgresql+psycopg://postgres@127.0.0.1:5432/test), dropped afterwards; pgbouncer is
Debian's package, started with a generated configuration (tests/storage/test_pgbouncer.py).

    .venv/bin/python bench/pgbouncer.py [--runs 1500] [--threads 4] [--rounds 3]
"""

from __future__ import annotations

import sys
from pathlib import Path

# bench/select.py is named like the stdlib `select` module: take this folder off the import
# path and put the project root on it instead.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

import argparse  # noqa: E402
import os  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
import uuid  # noqa: E402
from collections.abc import Callable  # noqa: E402

from sqlalchemy import create_engine, text  # noqa: E402
from sqlalchemy.engine import make_url  # noqa: E402
from sqlalchemy.pool import NullPool  # noqa: E402

from learning_bot.engine import Arm, LearningConfig, Phase, ReportedArm, RunReport, ToolCall  # noqa: E402
from learning_bot.engine.service import LearningService  # noqa: E402
from learning_bot.storage import SqlStore  # noqa: E402
from learning_bot.storage.pooling import PoolSettings  # noqa: E402
from learning_bot.storage.spool import Spool, SpoolingStore  # noqa: E402
from tests.storage.test_pgbouncer import own_database, running_pgbouncer  # noqa: E402

BASE = os.environ.get(
    "LEARNING_BOT_TEST_DATABASE_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)
ARMS = [Arm(f"tool:bench:T{i}", 100 + i) for i in range(8)]
CONFIG = LearningConfig(phase=Phase.ACTIVE)


def run_report(trace_id: str, used: int) -> RunReport:
    return RunReport(
        trace_id=trace_id,
        arms=tuple(ReportedArm(a) for a in ARMS),
        tool_calls=(ToolCall(ARMS[used % len(ARMS)].name),),
        channel="bench",
    )


def observe_rate(url: str, pool: PoolSettings, runs: int, threads: int) -> float:
    """Observes per second from `threads` threads sharing one store and service."""
    store = SqlStore(url, pool=pool)
    svc = LearningService(store, CONFIG, cache_ttl=0.5)
    svc.observe(run_report(f"warm-{uuid.uuid4().hex}", 0))
    per = runs // threads
    prefix = uuid.uuid4().hex[:8]
    failures: list[BaseException] = []
    start = threading.Barrier(threads + 1)

    def work(worker: int) -> None:
        start.wait()
        for i in range(per):
            try:
                svc.observe(run_report(f"{prefix}-{worker}-{i}", i + worker))
            except Exception as exc:  # counted, never hidden
                failures.append(exc)

    pool_threads = [threading.Thread(target=work, args=(w,)) for w in range(threads)]
    for t in pool_threads:
        t.start()
    start.wait()
    began = time.perf_counter()
    for t in pool_threads:
        t.join()
    elapsed = time.perf_counter() - began
    store.close()
    if failures:
        raise SystemExit(f"{len(failures)} observes failed: {failures[0]}")
    return per * threads / elapsed


def throughput(runs: int, threads: int, rounds: int) -> None:
    print(f"\n## throughput: {runs} observes per measurement, {threads} threads, {rounds} rounds")
    with own_database(BASE, "bench_pgb") as direct, running_pgbouncer(direct, pool_size=8) as pgb:
        setups: dict[str, tuple[str, PoolSettings]] = {
            "direct": (direct, PoolSettings()),
            "direct-unprepared": (direct, PoolSettings(pooler="transaction")),
            "pgbouncer": (pgb, PoolSettings()),
        }
        rates: dict[str, list[float]] = {name: [] for name in setups}
        for _ in range(rounds):
            for name, (url, pool) in setups.items():
                rates[name].append(observe_rate(url, pool, runs, threads))
    reference = statistics.median(rates["direct"])
    print(f"{'set-up':<20}{'observes/s (median)':>22}{'ratio':>8}   rounds")
    for name, values in rates.items():
        median = statistics.median(values)
        shown = " ".join(f"{v:.0f}" for v in values)
        print(f"{name:<20}{median:>22.0f}{median / reference:>8.2f}   {shown}")


def peak_connections(url: str, pool: PoolSettings) -> int:
    """The most connections the database shows while 48 threads observe and read at once."""
    name = make_url(url).database
    admin = create_engine(BASE, poolclass=NullPool)
    store = SqlStore(url, pool=pool)
    svc = LearningService(store, CONFIG, cache_ttl=0)
    svc.observe(run_report("warm", 0))
    stop = threading.Event()
    peak = 0

    def load(worker: int) -> None:
        i = 0
        while not stop.is_set():
            svc.observe(run_report(f"c-{worker}-{i}-{uuid.uuid4().hex[:6]}", i))
            svc.posteriors()
            i += 1

    workers = [threading.Thread(target=load, args=(w,)) for w in range(48)]
    for t in workers:
        t.start()
    with admin.connect() as conn:
        deadline = time.monotonic() + 4.0
        while time.monotonic() < deadline:
            count = conn.execute(
                text("SELECT count(*) FROM pg_stat_activity WHERE datname = :d"), {"d": name}
            ).scalar()
            peak = max(peak, int(count or 0))
            time.sleep(0.01)
    stop.set()
    for t in workers:
        t.join()
    store.close()
    admin.dispose()
    return peak


def connections() -> None:
    print("\n## connections per process (48 threads observing and reading for 4 s)")
    print(f"{'settings':<34}{'peak seen':>10}{'bound 2 x (size + overflow)':>30}")
    for label, pool in (
        ("default (size 8, overflow 8)", PoolSettings()),
        ("POOL_SIZE=2, MAX_OVERFLOW=1", PoolSettings(size=2, overflow=1)),
    ):
        with own_database(BASE, "bench_conn") as url:
            peak = peak_connections(url, pool)
        print(f"{label:<34}{peak:>10}{pool.max_connections:>30}")


def adoption_delay(interval: float, runs: int = 200) -> float:
    """Seconds from a spool left behind until a live process has written all its runs."""
    with own_database(BASE, "bench_adopt") as url, tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        store = SqlStore(url)
        svc = LearningService(store, CONFIG, cache_ttl=0)
        learner = svc.learner_id
        live = SpoolingStore(store, Spool(root), adopt_seconds=interval)
        from learning_bot.engine.observation import observation_guard, rewards_for_run
        from learning_bot.engine.records import record_from_report

        dead = Spool(root)
        for i in range(runs):
            report = run_report(f"dead-{i}", i)
            record = record_from_report(
                report,
                rewards_for_run(report, CONFIG),
                Phase.ACTIVE,
                observation_guard(report, CONFIG, ignore_phase=True),
            )
            dead.append(learner, [record], name=svc.learner)
        time.sleep(interval * 0.37)  # not in step with the live process's ticks
        began = time.perf_counter()
        dead.close()  # its lock released, as when the process ends
        waited = _wait(lambda: svc.traces(limit=1)[1] == runs + 0)
        live.close()
        return waited - began


def _wait(check: Callable[[], bool]) -> float:
    while not check():
        time.sleep(0.005)
    return time.perf_counter()


def adoption(rounds: int) -> None:
    print(f"\n## adoption delay (200 spooled runs, {rounds} rounds)")
    print(f"{'adopt interval':<16}{'median s':>10}{'max s':>8}")
    for interval in (0.2, 1.0):
        delays = [adoption_delay(interval) for _ in range(rounds)]
        print(f"{interval:<16}{statistics.median(delays):>10.2f}{max(delays):>8.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1500)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    throughput(args.runs, args.threads, args.rounds)
    connections()
    adoption(args.rounds)


if __name__ == "__main__":
    main()
