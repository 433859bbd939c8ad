"""How fast does the storage layer observe, select and report, next to a plain ORM loop?

For a SQLite file (WAL) and for PostgreSQL (LEARNING_BOT_TEST_DATABASE_URL, default
postgresql+psycopg://postgres@127.0.0.1:5432/test; every measurement in a new schema that this
script creates and drops) it prints:

1. observe throughput, traces/s, with 20 and 200 arms and 1 or 4 writer processes (spawned,
   released together by one Event), through `LearningService.observe(report)` per call and
   `observe_many` in batches of 100. Reports come from `research.simulation` (every arm included,
   working turns, so every arm of every trace gets a reward) and are built before timing. Each
   writer runs for a fixed time; throughput is every writer's traces over the span from the
   first writer's start to the last writer's end. After each run: `verify()` passes, the traces
   stored equal the traces sent, the posterior changes equal traces x arms, no call raised, and
   the number of transactions the store had to rerun (deadlock, serialisation failure, lock
   timeout, duplicate id; counted by wrapping `storage.runs.with_retries` in the writers).
2. the reference, measured in the same run: a plain SQLAlchemy ORM read-modify-write loop on a
   table of its own (arm id, alpha, beta, pulls). Per trace it computes the rewards with the same
   `rewards_for_run`, opens a Session, `get`s each arm row, adds the reward in Python and commits.
   With 4 writers it reports how many committed increments were lost (committed traces x arms
   minus the stored pulls) and how many transactions failed ("database is locked" on SQLite,
   deadlocks on PostgreSQL; failed transactions are not retried).
3. `LearningService.select` latency at 1,000 arms (median and p99), on an `ArmSet` built once,
   with posteriors stored by observing traces first, next to `select_arms` alone, a cold
   `store.load_arms` of the 1,000 rows, and loading + selecting on every call (no cache).
4. `LearningService.status()` latency (median and p99) at 10k and 100k stored traces (and 1M with
   --million), next to a straightforward COUNT/SUM scan of the traces table. Traces are loaded
   with `observe_many` in batches of 1,000, 5 arms each. The loaded SQLite files are kept in
   /tmp/learning-bot-bench and reused by later runs (--rebuild starts them again).

5. PostgreSQL observe in one round trip (also alone with --round-trip): per-call observe at 20
   arms with 1 and 4 writers, `SqlStore.record_runs` per call (records built before timing),
   the ORM reference, and two ceilings of the server measured by the same processes (a bare
   INSERT per transaction; an UPDATE of one shared row per transaction); then the CPU one run
   costs when one writer runs alone, in the writer and in its PostgreSQL backends (/proc).

Latencies: each call timed on its own with time.perf_counter, garbage collection off while
timing; the median is the median of per-round medians, p99 is over every call of every round.

    .venv/bin/python -m bench.storage [--quick] [--skip-postgres] [--million] [--rebuild]
    .venv/bin/python -m bench.storage --round-trip [--quick]
"""

from __future__ import annotations

import argparse
import gc
import json
import multiprocessing as mp
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
import traceback
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import sqlalchemy as sa
from sqlalchemy import String, event
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from bench.table import print_table
from learning_bot.engine import (
    ArmSet,
    LearningConfig,
    Phase,
    RunReport,
    now_ms,
    observation_guard,
    rewards_for_run,
)
from learning_bot.engine.records import record_from_report
from learning_bot.engine.selection import select_arms
from learning_bot.engine.service import LearningService
from learning_bot.engine.store_records import RewardChange
from learning_bot.research.simulation import Workload, make_workload
from learning_bot.storage import SqlStore
from learning_bot.storage.database import HEAD_REVISION, SchemaError, is_retryable

PG_ENV = "LEARNING_BOT_TEST_DATABASE_URL"
PG_DEFAULT = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
SQLITE_CACHE = Path(tempfile.gettempdir()) / "learning-bot-bench"

ARM_COUNTS = (20, 200)
WRITERS = (1, 4)
BATCH = 100
PATHS = ("observe", "observe_many", "orm")
PATH_NAMES = {
    "observe": "observe (per call)",
    "observe_many": f"observe_many ({BATCH})",
    "orm": "ORM read-modify-write",
}
REPORTS_PER_WRITER = {20: 15_000, 200: 2_500}
"""Reports each writer builds before timing (reused by every run; each run has its own
database): more than a writer gets through in one run."""

SELECT_ARMS = 1_000
SELECT_TRACES = 30
STATUS_ARMS = 5
LOAD_BATCH = 1_000

SQLITE_TARGET = 4_000.0
PG_TARGET = 1_000.0
SELECT_TARGET = 1e-3
STATUS_RATIO_TARGET = 2.0
STATUS_TARGET = 50e-3


@dataclass(frozen=True)
class Plan:
    runs: int
    round_trip_runs: int
    cpu_calls: int
    seconds: float
    rounds: int
    select_calls: int
    slow_calls: int
    status_calls: int
    scan_calls: int


FULL = Plan(
    runs=3,
    round_trip_runs=5,
    cpu_calls=1500,
    seconds=3.0,
    rounds=7,
    select_calls=300,
    slow_calls=40,
    status_calls=100,
    scan_calls=5,
)
QUICK = Plan(
    runs=1,
    round_trip_runs=1,
    cpu_calls=300,
    seconds=1.5,
    rounds=3,
    select_calls=100,
    slow_calls=10,
    status_calls=30,
    scan_calls=2,
)


def bench_config(phase: Phase = Phase.ACTIVE, **changes: Any) -> LearningConfig:
    return LearningConfig(phase=phase, **changes)


def build_reports(
    workload: Workload, count: int, prefix: str, seed: Sequence[int]
) -> list[RunReport]:
    """Working turns with every arm included; which arms get used follows the workload."""
    rng = np.random.default_rng(list(seed))
    ids = [arm.id for arm in workload.arms]
    out = []
    for i in range(count):
        _, used = workload.draw_usage(i, rng)
        out.append(workload.report(f"{prefix}{i}", ids, used, False))
    return out


# --- the reference: a plain ORM read-modify-write loop ------------------------------------


class RmwBase(DeclarativeBase):
    pass


class RmwArm(RmwBase):
    """The reference's posterior table."""

    __tablename__ = "bench_rmw_arms"

    arm_id: Mapped[str] = mapped_column(String(512), primary_key=True)
    alpha: Mapped[float]
    beta: Mapped[float]
    pulls: Mapped[int]


def reference_engine(url: str) -> sa.Engine:
    """A plain engine; on SQLite a 10 s busy timeout and synchronous=NORMAL, the durability
    the store uses, on the WAL file."""
    if url.startswith("sqlite"):
        engine = sa.create_engine(url, connect_args={"timeout": 10.0})

        @event.listens_for(engine, "connect")
        def _on_connect(dbapi_conn: Any, _record: Any) -> None:
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.close()

        return engine
    return sa.create_engine(url)


def prepare_reference(url: str, workload: Workload) -> None:
    engine = reference_engine(url)
    if url.startswith("sqlite"):
        with engine.connect() as conn:
            conn.exec_driver_sql("PRAGMA journal_mode=WAL")
    RmwBase.metadata.create_all(engine)
    with Session(engine) as session:
        session.add_all(RmwArm(arm_id=a.id, alpha=1.0, beta=1.0, pulls=0) for a in workload.arms)
        session.commit()
    engine.dispose()


def reference_pulls(url: str) -> int:
    engine = reference_engine(url)
    with engine.connect() as conn:
        total = conn.execute(sa.select(sa.func.coalesce(sa.func.sum(RmwArm.pulls), 0))).scalar()
    engine.dispose()
    return int(total or 0)


def prepare_ceilings(url: str) -> None:
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "CREATE TABLE bench_commits (id bigserial PRIMARY KEY, writer integer, n bigint)"
        )
        conn.exec_driver_sql("CREATE TABLE bench_shared (id integer PRIMARY KEY, n bigint)")
        conn.exec_driver_sql("INSERT INTO bench_shared VALUES (1, 0)")
    engine.dispose()


def ceiling_rows(url: str, path: str) -> int:
    """Rows the ceiling path left: inserted rows, or the shared row's count."""
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    with engine.connect() as conn:
        query = (
            "SELECT count(*) FROM bench_commits"
            if path == "commit_insert"
            else "SELECT n FROM bench_shared WHERE id = 1"
        )
        rows = int(conn.exec_driver_sql(query).scalar_one())
    engine.dispose()
    return rows


# --- writer processes ---------------------------------------------------------------------


@dataclass(frozen=True)
class Task:
    path: str
    url: str
    arms: int
    seed: int
    seconds: float


@dataclass
class WriterResult:
    worker: int
    start: float
    end: float
    sent: int = 0
    committed: int = 0
    ran_out: bool = False
    exceptions: Counter[str] = field(default_factory=Counter)
    retries: Counter[str] = field(default_factory=Counter)
    first_error: str = ""


def _error_kind(exc: BaseException) -> str:
    orig = getattr(exc, "orig", None) or exc
    code = getattr(orig, "sqlstate", None)
    text = str(orig).lower()
    if code == "40P01" or "deadlock" in text:
        return "deadlock"
    if code == "40001":
        return "serialization"
    if code == "23505":
        return "duplicate"
    if code == "55P03":
        return "lock timeout"
    if "database is locked" in text or "database is busy" in text:
        return "database is locked"
    return type(orig).__name__


RETRIES: Counter[str] = Counter()
"""Transactions the store reran in this writer process, by cause (see _count_retries)."""


def _count_retries() -> None:
    """Count every transaction attempt the store reruns, by cause, in RETRIES."""
    import learning_bot.storage.runs as store_module

    original = store_module.with_retries
    if getattr(original, "counting", False):
        return

    def counting(fn: Callable[[], Any], **kwargs: Any) -> Any:
        def attempt() -> Any:
            try:
                return fn()
            except Exception as exc:
                if is_retryable(exc):
                    RETRIES[_error_kind(exc)] += 1
                raise

        return original(attempt, **kwargs)

    counting.counting = True  # type: ignore[attr-defined]
    store_module.with_retries = counting


def _run_service(
    task: Task, reports: list[RunReport], go: Any, ready: Callable[[], None]
) -> WriterResult:
    _count_retries()
    RETRIES.clear()
    store = SqlStore(task.url)
    service = LearningService(store, bench_config())
    ready()
    go.wait()
    start = time.monotonic()
    deadline = start + task.seconds
    result = WriterResult(0, start, start)
    i = 0
    step = 1 if task.path == "observe" else BATCH
    while i < len(reports) and time.monotonic() < deadline:
        chunk = reports[i : i + step]
        i += len(chunk)
        result.sent += len(chunk)
        try:
            if step == 1:
                service.observe(chunk[0])
            else:
                service.observe_many(chunk)
            result.committed += len(chunk)
        except Exception as exc:
            result.exceptions[_error_kind(exc)] += 1
            result.first_error = result.first_error or f"{type(exc).__name__}: {exc}"[:300]
    result.end = time.monotonic()
    result.ran_out = i >= len(reports)
    result.retries = Counter(RETRIES)
    store.close()
    return result


def _run_reference(
    task: Task, reports: list[RunReport], go: Any, ready: Callable[[], None]
) -> WriterResult:
    engine = reference_engine(task.url)
    config = bench_config()
    with engine.connect():
        pass
    ready()
    go.wait()
    start = time.monotonic()
    deadline = start + task.seconds
    result = WriterResult(0, start, start)
    i = 0
    while i < len(reports) and time.monotonic() < deadline:
        report = reports[i]
        i += 1
        result.sent += 1
        outcome = rewards_for_run(report, config)
        try:
            with Session(engine) as session:
                for arm_id, reward in outcome.rewards.items():
                    row = session.get(RmwArm, arm_id)
                    assert row is not None
                    row.alpha += reward
                    row.beta += 1.0 - reward
                    row.pulls += 1
                session.commit()
            result.committed += 1
        except DBAPIError as exc:
            result.exceptions[_error_kind(exc)] += 1
            result.first_error = result.first_error or str(exc.orig)[:300]
    result.end = time.monotonic()
    result.ran_out = i >= len(reports)
    engine.dispose()
    return result


def _run_store(
    task: Task, reports: list[RunReport], go: Any, ready: Callable[[], None]
) -> WriterResult:
    """`SqlStore.record_runs` per run, the records built before timing as
    `LearningService.observe` builds them: the storage layer without the service."""
    _count_retries()
    RETRIES.clear()
    store = SqlStore(task.url)
    config = bench_config()
    service = LearningService(store, config)
    learner = service.learner_id
    records = [
        record_from_report(
            r,
            rewards_for_run(r, config),
            config.phase,
            observation_guard(r, config, ignore_phase=True),
        )
        for r in reports
    ]
    store.load_arms(learner)
    ready()
    go.wait()
    start = time.monotonic()
    deadline = start + task.seconds
    result = WriterResult(0, start, start)
    i = 0
    while i < len(records) and time.monotonic() < deadline:
        record = records[i]
        i += 1
        result.sent += 1
        try:
            store.record_runs(learner, [record])
            result.committed += 1
        except Exception as exc:
            result.exceptions[_error_kind(exc)] += 1
            result.first_error = result.first_error or f"{type(exc).__name__}: {exc}"[:300]
    result.end = time.monotonic()
    result.ran_out = i >= len(records)
    result.retries = Counter(RETRIES)
    store.close()
    return result


CEILINGS = {
    "commit_insert": "INSERT INTO bench_commits (writer, n) VALUES (%s, %s)",
    "commit_update": "UPDATE bench_shared SET n = n + 1 WHERE id = 1",
}
"""The ceiling paths: one statement per transaction (autocommit), prepared, on psycopg."""


def _run_ceiling(
    task: Task, reports: list[RunReport], go: Any, ready: Callable[[], None]
) -> WriterResult:
    """A bare statement per transaction from this writer: what a round trip and a durable
    commit cost on this server, nothing else (`commit_update`: every writer on one row)."""
    import psycopg

    conn = psycopg.connect(
        sa.make_url(task.url).set(drivername="postgresql").render_as_string(False),
        autocommit=True,
    )
    sql = CEILINGS[task.path]
    worker = os.getpid()
    ready()
    go.wait()
    start = time.monotonic()
    deadline = start + task.seconds
    result = WriterResult(0, start, start)
    while time.monotonic() < deadline:
        result.sent += 1
        try:
            params = (worker, result.sent) if task.path == "commit_insert" else None
            conn.execute(sql, params, prepare=True)
            result.committed += 1
        except psycopg.Error as exc:
            result.exceptions[_error_kind(exc)] += 1
            result.first_error = result.first_error or str(exc)[:300]
    result.end = time.monotonic()
    conn.close()
    return result


RUNNERS: dict[str, Callable[[Task, list[RunReport], Any, Callable[[], None]], WriterResult]] = {
    "observe": _run_service,
    "observe_many": _run_service,
    "store": _run_store,
    "orm": _run_reference,
    "commit_insert": _run_ceiling,
    "commit_update": _run_ceiling,
}


def writer_main(index: int, tasks: Any, results: Any, go: Any) -> None:
    """A writer process: builds its reports once per arm count, then runs tasks until None."""
    cache: dict[tuple[int, int], list[RunReport]] = {}
    results.put(("started", index, None))
    while True:
        task: Task | None = tasks.get()
        if task is None:
            return
        try:
            key = (task.arms, task.seed)
            if key not in cache:
                workload = make_workload(task.arms, seed=task.seed)
                cache[key] = build_reports(
                    workload, REPORTS_PER_WRITER[task.arms], f"w{index}-", (task.seed, index)
                )
            run = RUNNERS[task.path]
            gc.collect()
            result = run(task, cache[key], go, lambda: results.put(("ready", index, None)))
            result.worker = index
            results.put(("done", index, result))
        except BaseException:
            results.put(("error", index, traceback.format_exc()))


class WriterPool:
    """Writer processes started once (spawn) and reused; each task runs on a fresh database."""

    def __init__(self, size: int) -> None:
        ctx = mp.get_context("spawn")
        self.go = ctx.Event()
        self.results: Any = ctx.Queue()
        self.tasks: list[Any] = [ctx.Queue() for _ in range(size)]
        self.processes = [
            ctx.Process(target=writer_main, args=(i, q, self.results, self.go), daemon=True)
            for i, q in enumerate(self.tasks)
        ]
        for p in self.processes:
            p.start()
        # Wait until every writer has imported everything, so that no start-up work competes
        # with the first measurement.
        for _ in self.processes:
            self._get()

    def _get(self) -> tuple[str, int, Any]:
        message: tuple[str, int, Any] = self.results.get(timeout=900)
        if message[0] == "error":
            raise RuntimeError(f"writer {message[1]} failed:\n{message[2]}")
        return message

    def run(self, task: Task, writers: int) -> list[WriterResult]:
        self.go.clear()
        for q in self.tasks[:writers]:
            q.put(task)
        for _ in range(writers):
            self._get()
        self.go.set()
        done = [self._get()[2] for _ in range(writers)]
        self.go.clear()
        return done

    def close(self) -> None:
        for q in self.tasks:
            q.put(None)
        for p in self.processes:
            p.join(timeout=30)


# --- databases ----------------------------------------------------------------------------


def postgres_schema_url(base: str, schema: str) -> str:
    sep = "&" if "?" in base else "?"
    return f"{base}{sep}options=-csearch_path%3D{schema}"


@contextmanager
def fresh_database(backend: str, pg_base: str) -> Iterator[str]:
    """A new SQLite file in a temporary folder, or a new PostgreSQL schema; removed after."""
    if backend == "sqlite":
        with tempfile.TemporaryDirectory(prefix="learning-bot-bench-") as folder:
            yield f"sqlite:///{folder}/bench.sqlite"
        return
    schema = f"bench_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(pg_base, poolclass=sa.pool.NullPool)
    with admin.begin() as conn:
        conn.exec_driver_sql(f"CREATE SCHEMA {schema}")
    try:
        yield postgres_schema_url(pg_base, schema)
    finally:
        with admin.begin() as conn:
            conn.exec_driver_sql(f"DROP SCHEMA {schema} CASCADE")
        admin.dispose()


# --- 1 and 2: observe throughput ----------------------------------------------------------


@dataclass
class RunOutcome:
    rate: float
    sent: int
    committed: int
    stored: int
    verify_ok: bool | None
    changes_ok: bool | None
    lost: int | None
    exceptions: Counter[str]
    retries: Counter[str]
    ran_out: bool
    first_error: str


def throughput_run(
    pool: WriterPool,
    backend: str,
    pg_base: str,
    path: str,
    arms: int,
    writers: int,
    seed: int,
    seconds: float,
) -> RunOutcome:
    workload = make_workload(arms, seed=seed)
    with fresh_database(backend, pg_base) as url:
        if path == "orm":
            prepare_reference(url, workload)
        elif path in CEILINGS:
            prepare_ceilings(url)
        else:
            store = SqlStore(url)
            LearningService(store, bench_config())  # creates the learner, active
            store.close()
        results = pool.run(Task(path, url, arms, seed, seconds), writers)
        start = min(r.start for r in results)
        end = max(r.end for r in results)
        sent = sum(r.sent for r in results)
        committed = sum(r.committed for r in results)
        exceptions: Counter[str] = Counter()
        retries: Counter[str] = Counter()
        for r in results:
            exceptions.update(r.exceptions)
            retries.update(r.retries)
        first_error = next((r.first_error for r in results if r.first_error), "")
        if path == "orm":
            pulls = reference_pulls(url)
            stored, verify_ok, changes_ok = committed, None, None
            lost = committed * arms - pulls
        elif path in CEILINGS:
            stored = ceiling_rows(url, path)
            verify_ok = changes_ok = stored == committed
            lost = committed - stored
        else:
            store = SqlStore(url)
            report = LearningService(store, bench_config()).verify()
            store.close()
            stored = report.traces_checked
            verify_ok = report.ok
            changes_ok = report.observations_checked == stored * arms
            lost = None
    return RunOutcome(
        committed / (end - start),
        sent,
        committed,
        stored,
        verify_ok,
        changes_ok,
        lost,
        exceptions,
        retries,
        any(r.ran_out for r in results),
        first_error,
    )


def fmt_count(counter: Counter[str]) -> str:
    if not counter:
        return "0"
    return ", ".join(f"{n:,} {kind}" for kind, n in sorted(counter.items()))


def fmt_rate(values: Sequence[float]) -> str:
    med = statistics.median(values)
    if len(values) == 1:
        return f"{med:,.0f}"
    return f"{med:,.0f} ({min(values):,.0f}-{max(values):,.0f})"


@dataclass
class ThroughputResults:
    runs: dict[tuple[int, int, str], list[RunOutcome]]

    def rate(self, arms: int, writers: int, path: str) -> float:
        return statistics.median(o.rate for o in self.runs[(arms, writers, path)])

    def clean(self, arms: int, writers: int, path: str) -> bool:
        return all(
            not o.exceptions
            and not o.retries
            and o.verify_ok
            and o.changes_ok
            and o.stored == o.sent
            for o in self.runs[(arms, writers, path)]
        )


def measure_throughput(
    pool: WriterPool, backend: str, pg_base: str, plan: Plan, seed: int
) -> ThroughputResults:
    runs: dict[tuple[int, int, str], list[RunOutcome]] = {}
    configs = [(a, w, p) for a in ARM_COUNTS for w in WRITERS for p in PATHS]
    for r in range(plan.runs):
        # Configurations take turns, so a load spike on the shared machine hits them alike.
        for arms, writers, path in configs[r % 3 :] + configs[: r % 3]:
            outcome = throughput_run(
                pool, backend, pg_base, path, arms, writers, seed, plan.seconds
            )
            runs.setdefault((arms, writers, path), []).append(outcome)
            print(
                f"  run {r + 1}/{plan.runs}: {arms} arms, {writers} writer(s), "
                f"{PATH_NAMES[path]}: {outcome.rate:,.0f} traces/s",
                file=sys.stderr,
                flush=True,
            )
    results = ThroughputResults(runs)

    rows = []
    for arms in ARM_COUNTS:
        for writers in WRITERS:
            rates = {p: [o.rate for o in runs[(arms, writers, p)]] for p in PATHS}
            ref = statistics.median(rates["orm"])
            rows.append(
                [
                    f"{arms}",
                    f"{writers}",
                    fmt_rate(rates["observe"]),
                    fmt_rate(rates["observe_many"]),
                    fmt_rate(rates["orm"]),
                    f"{statistics.median(rates['observe']) / ref:.2f}x",
                    f"{statistics.median(rates['observe_many']) / ref:.2f}x",
                ]
            )
    print(
        f"observe throughput, traces/s: median of {plan.runs} run(s) of {plan.seconds:g} s "
        "(min-max); each run on a fresh database"
    )
    print_table(
        [
            "arms",
            "writers",
            PATH_NAMES["observe"],
            PATH_NAMES["observe_many"],
            "ORM read-modify-write (reference)",
            "per call / ref",
            "batched / ref",
        ],
        rows,
    )
    print()

    rows = []
    for arms in ARM_COUNTS:
        for writers in WRITERS:
            for path in PATHS:
                outs = runs[(arms, writers, path)]
                exceptions: Counter[str] = Counter()
                retries: Counter[str] = Counter()
                for o in outs:
                    exceptions.update(o.exceptions)
                    retries.update(o.retries)
                if path == "orm":
                    verify = "n/a"
                    lost = sum(o.lost or 0 for o in outs)
                    expected = sum(o.committed for o in outs) * arms
                    lost_text = f"{lost:,} of {expected:,} ({lost / max(1, expected):.0%})"
                    failed = fmt_count(exceptions)
                    raised = "n/a"
                else:
                    verify = "ok" if all(o.verify_ok and o.changes_ok for o in outs) else "FAILED"
                    lost_text = "n/a"
                    failed = "n/a"
                    raised = fmt_count(exceptions)
                rows.append(
                    [
                        f"{arms}",
                        f"{writers}",
                        PATH_NAMES[path],
                        f"{sum(o.sent for o in outs):,}",
                        f"{sum(o.stored for o in outs):,}",
                        verify,
                        raised,
                        fmt_count(retries) if path != "orm" else "n/a",
                        lost_text,
                        failed,
                        "yes" if any(o.ran_out for o in outs) else "",
                    ]
                )
    print("integrity, summed over the runs above:")
    print_table(
        [
            "arms",
            "writers",
            "path",
            "traces sent",
            "stored / committed",
            "verify",
            "exceptions",
            "retried transactions",
            "lost increments",
            "failed transactions",
            "ran out",
        ],
        rows,
        left=3,
    )
    errors = {o.first_error for outs in runs.values() for o in outs if o.first_error}
    for message in sorted(errors)[:5]:
        print(f"  first error seen: {message}")
    print()
    return results


# --- PostgreSQL observe in one round trip ----------------------------------------------------

ROUND_TRIP_ARMS = 20
ROUND_TRIP_PATHS = ("observe", "store", "orm", "commit_insert", "commit_update")
ROUND_TRIP_NAMES = {
    "observe": "LearningService.observe (per call)",
    "store": "SqlStore.record_runs (per call, records built before timing)",
    "orm": "ORM read-modify-write (reference)",
    "commit_insert": "ceiling: INSERT of one row per transaction",
    "commit_update": "ceiling: UPDATE of one shared row per transaction",
}


@dataclass
class RoundTripResults:
    runs: dict[tuple[int, str], list[RunOutcome]]

    def rate(self, writers: int, path: str) -> float:
        return statistics.median(o.rate for o in self.runs[(writers, path)])

    def clean(self, writers: int, path: str) -> bool:
        return all(
            not o.exceptions and not o.retries and o.verify_ok and o.stored == o.sent
            for o in self.runs[(writers, path)]
        )


def measure_round_trip(pool: WriterPool, pg_base: str, plan: Plan, seed: int) -> RoundTripResults:
    """Per-call observe on PostgreSQL at 20 arms, 1 and 4 writers, beside the ORM reference
    and two ceilings of this server measured by the same processes: a bare INSERT per
    transaction (a round trip and a durable commit), and an UPDATE of one shared row per
    transaction (every writer on the same row, as every observe updates the same posterior
    rows: the row lock is held until the commit is flushed)."""
    runs: dict[tuple[int, str], list[RunOutcome]] = {}
    configs = [(w, p) for w in WRITERS for p in ROUND_TRIP_PATHS]
    for r in range(plan.round_trip_runs):
        shift = r % len(configs)
        for writers, path in configs[shift:] + configs[:shift]:
            outcome = throughput_run(
                pool, "postgresql", pg_base, path, ROUND_TRIP_ARMS, writers, seed, plan.seconds
            )
            runs.setdefault((writers, path), []).append(outcome)
            print(
                f"  round trip {r + 1}/{plan.round_trip_runs}: {writers} writer(s), "
                f"{ROUND_TRIP_NAMES[path]}: {outcome.rate:,.0f}/s",
                file=sys.stderr,
                flush=True,
            )
    results = RoundTripResults(runs)
    orm = results.rate(4, "orm")
    ceiling = results.rate(4, "commit_update")
    rows = []
    for path in ROUND_TRIP_PATHS:
        outs = [o for w in WRITERS for o in runs[(w, path)]]
        exceptions: Counter[str] = Counter()
        retries: Counter[str] = Counter()
        for o in outs:
            exceptions.update(o.exceptions)
            retries.update(o.retries)
        if path == "orm":
            lost = sum(o.lost or 0 for o in outs)
            check = f"{lost:,} increments lost"
        elif path in CEILINGS:
            check = "rows = commits" if all(o.verify_ok for o in outs) else "ROWS DIFFER"
        else:
            ok = all(o.verify_ok and o.changes_ok and o.stored == o.sent for o in outs)
            check = "verify ok, stored = sent" if ok else "FAILED"
        rows.append(
            [
                ROUND_TRIP_NAMES[path],
                fmt_rate([o.rate for o in runs[(1, path)]]),
                fmt_rate([o.rate for o in runs[(4, path)]]),
                f"{results.rate(4, path) / orm:.2f}x",
                f"{results.rate(4, path) / ceiling:.2f}",
                check,
                fmt_count(exceptions + retries),
            ]
        )
    print(
        f"PostgreSQL observe in one round trip: {ROUND_TRIP_ARMS} arms, one call per run, "
        f"runs (or transactions)/s, median of {plan.round_trip_runs} run(s) of "
        f"{plan.seconds:g} s (min-max); each run on a fresh schema"
    )
    print_table(
        [
            "path",
            "1 writer",
            "4 writers",
            "4 writers / ORM",
            "4 writers / shared-row ceiling",
            "checked",
            "errors, retries",
        ],
        rows,
    )
    print()
    return results


@dataclass
class CpuCost:
    """One writer's cost per run: wall time, its own CPU time and its PostgreSQL backends'."""

    wall: float
    writer: float
    server: float | None

    @property
    def total(self) -> float | None:
        return None if self.server is None else self.writer + self.server


def backend_cpu(engine: sa.Engine, application: str) -> float | None:
    """CPU seconds used so far by the PostgreSQL backends serving `application` (read from
    /proc: the server runs on this machine), or None when they cannot be read."""
    with engine.connect() as conn:
        pids = conn.execute(
            sa.text("SELECT pid FROM pg_stat_activity WHERE application_name = :a"),
            {"a": application},
        ).scalars()
        total = 0.0
        for pid in pids:
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                return None
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def _cpu_cost(path: str, pg_base: str, reports: list[RunReport], calls: int) -> CpuCost:
    """One writer in this process on a fresh schema: 100 runs to warm up, then `calls`."""
    config = bench_config()
    with fresh_database("postgresql", pg_base) as url:
        application = f"bench-cpu-{uuid.uuid4().hex[:12]}"
        url = f"{url}&application_name={application}"
        closing: list[Callable[[], object]] = []
        call: Callable[[int], object]
        if path in CEILINGS:
            import psycopg

            prepare_ceilings(url)
            conn = psycopg.connect(
                sa.make_url(url).set(drivername="postgresql").render_as_string(False),
                autocommit=True,
            )
            closing.append(conn.close)
            sql = CEILINGS[path]
            insert = path == "commit_insert"

            def call(i: int) -> object:
                return conn.execute(sql, (0, i) if insert else None, prepare=True)

        else:
            store = SqlStore(url)
            closing.append(store.close)
            service = LearningService(store, config)
            learner = service.learner_id
            records = [
                record_from_report(
                    r, rewards_for_run(r, config), config.phase,
                    observation_guard(r, config, ignore_phase=True),
                )
                for r in reports
            ]  # fmt: skip
            if path == "observe":

                def call(i: int) -> object:
                    return service.observe(reports[i])

            else:

                def call(i: int) -> object:
                    return store.record_runs(learner, [records[i]])

        admin = sa.create_engine(pg_base, poolclass=sa.pool.NullPool)
        try:
            for i in range(100):
                call(i)
            gc.collect()
            server_before = backend_cpu(admin, application)
            cpu_before = time.process_time()
            start = time.perf_counter()
            for i in range(100, 100 + calls):
                call(i)
            wall = time.perf_counter() - start
            writer = time.process_time() - cpu_before
            server_after = backend_cpu(admin, application)
        finally:
            admin.dispose()
            for close in closing:
                close()
    server = (
        None
        if server_before is None or server_after is None
        else (server_after - server_before) / calls
    )
    return CpuCost(wall / calls, writer / calls, server)


def measure_cpu(pg_base: str, plan: Plan, seed: int) -> dict[str, CpuCost]:
    """What one run costs on each side when a single writer runs alone: the writer's CPU
    (time.process_time) and the CPU of the PostgreSQL backends serving it; their sum bounds
    what the machine's CPUs can do at best with every writer on them."""
    workload = make_workload(ROUND_TRIP_ARMS, seed=seed)
    reports = build_reports(workload, plan.cpu_calls + 100, "cpu-", (seed, 77))
    costs = {
        path: _cpu_cost(path, pg_base, reports, plan.cpu_calls)
        for path in ("observe", "store", "commit_insert", "commit_update")
    }
    cpus = os.cpu_count() or 1
    rows = []
    for path, cost in costs.items():
        total = cost.total
        rows.append(
            [
                ROUND_TRIP_NAMES[path],
                fmt_time(cost.wall),
                fmt_time(cost.writer),
                "n/a" if cost.server is None else fmt_time(cost.server),
                "n/a" if total is None else fmt_time(total),
                "n/a" if total is None else f"{cpus / total:,.0f}",
            ]
        )
    print(
        f"CPU per run, one writer alone ({ROUND_TRIP_ARMS} arms, {plan.cpu_calls:,} runs): the "
        "writer's CPU (time.process_time) and its PostgreSQL backends' (/proc); load average "
        f"{' '.join(f'{x:.1f}' for x in os.getloadavg())} at the end"
    )
    print_table(
        [
            "path",
            "wall per run",
            "writer CPU",
            "PostgreSQL CPU",
            "CPU per run",
            f"runs/s if all {cpus} CPUs did only this",
        ],
        rows,
    )
    print()
    return costs


# --- 3: select latency --------------------------------------------------------------------


def time_calls(fn: Callable[[], object], calls: int) -> list[float]:
    clock = time.perf_counter
    out = []
    for _ in range(calls):
        start = clock()
        fn()
        out.append(clock() - start)
    return out


@dataclass
class Latency:
    median: float
    p99: float
    calls: int


def measure_latency(
    fns: dict[str, tuple[Callable[[], object], int]], rounds: int
) -> dict[str, Latency]:
    """Median of per-round medians and p99 over all calls; the functions take turns."""
    names = list(fns)
    for name in names:  # warm-up
        fn, calls = fns[name]
        for _ in range(min(3, calls)):
            fn()
    medians: dict[str, list[float]] = {n: [] for n in names}
    every: dict[str, list[float]] = {n: [] for n in names}
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            fn, calls = fns[name]
            gc.collect()
            gc.disable()
            try:
                times = time_calls(fn, calls)
            finally:
                gc.enable()
            medians[name].append(statistics.median(times))
            every[name].extend(times)
    return {
        n: Latency(statistics.median(medians[n]), float(np.percentile(every[n], 99)), len(every[n]))
        for n in names
    }


def measure_select(backend: str, pg_base: str, plan: Plan, seed: int) -> Latency:
    workload = make_workload(SELECT_ARMS, seed=seed)
    arm_set = ArmSet(workload.arms)
    config = bench_config(
        baseline_rate=0.0, min_pulls=5, token_budget=round(0.3 * arm_set.total_cost)
    )
    with fresh_database(backend, pg_base) as url:
        store = SqlStore(url)
        writer = LearningService(store, config, rng=seed)
        writer.observe_many(build_reports(workload, SELECT_TRACES, "sel-", (seed, 99)))
        # A service that has not seen these writes: its posteriors come from the database.
        service = LearningService(store, config, rng=seed)
        stored = {aid: rec.posterior for aid, rec in store.load_arms(service.learner_id).items()}
        first = service.select(arm_set)
        expected = select_arms(arm_set, arm_set.align(stored), config, seed)
        if first.selected != expected.selected:
            raise SystemExit("service select differs from select_arms on the stored posteriors")
        fresh_check = LearningService(store, config, rng=seed, cache_ttl=0.0)

        # Another replica's write must show up within cache_ttl.
        pulls_before = max(v.posterior.pulls for v in service.posteriors())
        writer.observe(build_reports(workload, 1, "sel-late-", (seed, 98))[0])
        time.sleep(service.cache_ttl + 0.05)
        replica_ok = max(v.posterior.pulls for v in service.posteriors()) == pulls_before + 1

        rng = np.random.default_rng([seed, 7])
        arrays = arm_set.align(stored)
        learner = service.learner_id

        def floor() -> object:
            return select_arms(arm_set, arrays, config, rng).selected

        def through_service() -> object:
            return service.select(arm_set).selected

        def version_each_call() -> object:
            return fresh_check.select(arm_set).selected

        def load_arms() -> object:
            return store.load_arms(learner)

        def uncached() -> object:
            loaded = store.load_arms(learner)
            aligned = arm_set.align({a: rec.posterior for a, rec in loaded.items()})
            return select_arms(arm_set, aligned, config, rng).selected

        def new_service() -> object:
            return LearningService(store, config, rng=seed).select(arm_set).selected

        fns = {
            "floor": (floor, plan.select_calls),
            "service": (through_service, plan.select_calls),
            "ttl0": (version_each_call, plan.select_calls),
            "load": (load_arms, plan.slow_calls),
            "uncached": (uncached, plan.slow_calls),
        }
        lat = measure_latency(fns, plan.rounds)
        # A new service opens its learner before its first select; time only the first select.
        firsts = []
        for _ in range(plan.slow_calls):
            fresh = LearningService(store, config, rng=seed)
            start = time.perf_counter()
            fresh.select(arm_set)
            firsts.append(time.perf_counter() - start)
        lat["first"] = Latency(
            statistics.median(firsts), float(np.percentile(firsts, 99)), len(firsts)
        )
        # Another replica records a reward (untimed); the next select finds the version moved
        # and every posterior has to be read again (how long the select waits for that read
        # depends on how the service refreshes).
        stale = LearningService(store, config, rng=seed, cache_ttl=0.0)
        stale.select(arm_set)
        ids = [arm.id for arm in workload.arms]
        refreshed = []
        for i in range(plan.slow_calls):
            store.record_rewards(
                learner,
                [RewardChange(ids[i % len(ids)], 1.0)],
                actor="bench",
                reason=None,
                trace_id=None,
                at=now_ms(),
            )
            start = time.perf_counter()
            stale.select(arm_set)
            refreshed.append(time.perf_counter() - start)
        lat["stale"] = Latency(
            statistics.median(refreshed), float(np.percentile(refreshed, 99)), len(refreshed)
        )
        store.close()

    floor_med = lat["floor"].median
    labels = {
        "floor": "select_arms on aligned arrays (no storage)",
        "service": "LearningService.select, ArmSet built once (cache_ttl 0.5 s)",
        "ttl0": "LearningService.select, cache_ttl 0 (a refresh is due every call)",
        "first": "first select of a new LearningService (reads the 1,000 rows)",
        "stale": "select right after another replica wrote (cache_ttl 0: reload due)",
        "load": "store.load_arms, 1,000 rows (cold read alone)",
        "uncached": "load_arms + align + select_arms every call (no cache)",
    }
    rows = [
        [
            labels[name],
            fmt_time(lat[name].median),
            fmt_time(lat[name].p99),
            f"{lat[name].median / floor_med:.2f}x",
            f"{lat[name].calls:,}",
        ]
        for name in ("floor", "service", "ttl0", "stale", "first", "load", "uncached")
    ]
    print(
        f"select latency at {SELECT_ARMS:,} arms (active, baseline_rate 0, budget 30% of tokens, "
        f"{SELECT_TRACES} stored traces so every arm has {SELECT_TRACES} pulls):"
    )
    print_table(["path", "median", "p99", "vs select_arms", "calls"], rows)
    print(
        "  checked: the first select of a fresh service picks exactly what select_arms picks "
        "from the stored posteriors (same seed); another replica's write was "
        + ("seen" if replica_ok else "NOT seen")
        + f" after cache_ttl ({service.cache_ttl:g} s)"
    )
    print()
    return lat["service"]


# --- 4: status latency --------------------------------------------------------------------

SCAN = """
SELECT COUNT(*), COALESCE(SUM(usage_total), 0), MIN(timestamp), MAX(timestamp),
       SUM(CASE WHEN is_baseline THEN 1 ELSE 0 END),
       SUM(CASE WHEN is_baseline THEN usage_total ELSE 0 END)
FROM traces WHERE learner_id = :learner
"""


def load_traces(url: str, have: int, target: int, seed: int) -> float:
    """Observe traces have..target-1 (5 arms each) in batches; returns the seconds taken."""
    workload = make_workload(STATUS_ARMS, seed=seed)
    ids = [arm.id for arm in workload.arms]
    rng = np.random.default_rng([seed, have])
    store = SqlStore(url)
    service = LearningService(store, bench_config())
    start = time.perf_counter()
    for first in range(have, target, LOAD_BATCH):
        last = min(target, first + LOAD_BATCH)
        batch = []
        for i in range(first, last):
            _, used = workload.draw_usage(i, rng)
            batch.append(workload.report(f"load-{i}", ids, used, False))
        service.observe_many(batch)
        if (last // LOAD_BATCH) % 100 == 0:
            print(
                f"  loaded {last:,} traces ({time.perf_counter() - start:.0f} s)",
                file=sys.stderr,
                flush=True,
            )
    took = time.perf_counter() - start
    if url.startswith("sqlite"):
        with store.engine.connect() as conn:
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    store.close()
    return took


def stored_traces(url: str) -> int | None:
    """Traces in a kept SQLite file, or None when it cannot be used."""
    try:
        store = SqlStore(url, auto_create=False)
    except SchemaError:
        return None
    try:
        service = LearningService(store, bench_config())
        return service.summary().trace_count
    finally:
        store.close()


def sqlite_file(size: int, seed: int, rebuild: bool) -> tuple[Path, str]:
    """A kept SQLite file with `size` traces: reused, else grown from a smaller kept one."""
    SQLITE_CACHE.mkdir(parents=True, exist_ok=True)

    def path_for(n: int) -> Path:
        return SQLITE_CACHE / f"status-r{HEAD_REVISION}-s{seed}-{n}.sqlite"

    path = path_for(size)
    notes = path.with_suffix(".json")
    if path.exists() and not rebuild:
        if stored_traces(f"sqlite:///{path}") == size:
            earlier = json.loads(notes.read_text()).get("note", "") if notes.exists() else ""
            return path, "kept from an earlier run" + (f" ({earlier})" if earlier else "")
        path.unlink()
    smaller = sorted(
        (int(p.stem.rsplit("-", 1)[1]), p)
        for p in SQLITE_CACHE.glob(f"status-r{HEAD_REVISION}-s{seed}-*.sqlite")
        if int(p.stem.rsplit("-", 1)[1]) < size
    )
    work = path.with_suffix(".building")
    for extra in (work, Path(f"{work}-wal"), Path(f"{work}-shm")):
        extra.unlink(missing_ok=True)
    have = 0
    if smaller and not rebuild:
        have, source = smaller[-1]
        if stored_traces(f"sqlite:///{source}") == have:
            shutil.copyfile(source, work)
            if Path(f"{source}-wal").exists():
                shutil.copyfile(f"{source}-wal", f"{work}-wal")
        else:
            have = 0
    took = load_traces(f"sqlite:///{work}", have, size, seed)
    work.rename(path)
    for extra in (Path(f"{work}-wal"), Path(f"{work}-shm")):
        extra.unlink(missing_ok=True)
    grown = f" onto the kept {have:,}-trace file" if have else ""
    note = f"loaded {size - have:,}{grown} in {took:.0f} s"
    notes.write_text(json.dumps({"note": note}))
    return path, note


@dataclass
class StatusRow:
    size: int
    note: str
    status: Latency
    scan: Latency


def status_latency(url: str, size: int, plan: Plan) -> tuple[Latency, Latency]:
    store = SqlStore(url)
    service = LearningService(store, bench_config())
    got = service.status()
    learner = service.learner_id
    with store.engine.connect() as conn:
        scanned = conn.execute(sa.text(SCAN), {"learner": learner}).one()
    if got.summary.trace_count != size or scanned[0] != size:
        raise SystemExit(
            f"expected {size:,} traces; status says {got.summary.trace_count:,}, "
            f"the table holds {scanned[0]:,}"
        )
    if got.summary.total_tokens != int(scanned[1]):
        raise SystemExit("status total tokens differ from the traces table")

    def status() -> object:
        return service.status()

    def scan() -> object:
        with store.engine.connect() as conn:
            return conn.execute(sa.text(SCAN), {"learner": learner}).one()

    lat = measure_latency(
        {"status": (status, plan.status_calls), "scan": (scan, plan.scan_calls)}, plan.rounds
    )
    store.close()
    return lat["status"], lat["scan"]


def measure_status(
    backend: str, pg_base: str, plan: Plan, seed: int, sizes: Sequence[int], rebuild: bool
) -> list[StatusRow]:
    rows: list[StatusRow] = []
    if backend == "sqlite":
        for size in sizes:
            path, note = sqlite_file(size, seed, rebuild)
            print(f"  status file {path}: {note}", file=sys.stderr, flush=True)
            status, scan = status_latency(f"sqlite:///{path}", size, plan)
            rows.append(StatusRow(size, note, status, scan))
    else:
        with fresh_database(backend, pg_base) as url:
            have = 0
            for size in sizes:
                took = load_traces(url, have, size, seed)
                note = f"loaded {size - have:,} in {took:.0f} s"
                have = size
                status, scan = status_latency(url, size, plan)
                rows.append(StatusRow(size, note, status, scan))
    base = rows[0].status.median
    table = [
        [
            f"{r.size:,}",
            fmt_time(r.status.median),
            fmt_time(r.status.p99),
            f"{r.status.median / base:.2f}x",
            fmt_time(r.scan.median),
            f"{r.scan.median / r.status.median:.1f}x",
            r.note,
        ]
        for r in rows
    ]
    print(
        f"status latency ({STATUS_ARMS} arms per trace, loaded with observe_many in batches of "
        f"{LOAD_BATCH:,}):"
    )
    print_table(
        [
            "stored traces",
            "status median",
            "status p99",
            f"vs {rows[0].size:,}",
            "COUNT/SUM scan (reference)",
            "scan / status",
            "loading",
        ],
        table,
    )
    print(
        f"  status checked equal to the scan (trace count, total tokens); each table "
        f"{'file' if backend == 'sqlite' else 'schema'} holds only these traces"
    )
    print()
    return rows


# --- report -------------------------------------------------------------------------------


def fmt_time(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:,.1f} µs"
    if seconds < 1.0:
        return f"{seconds * 1e3:,.2f} ms"
    return f"{seconds:,.2f} s"


def met(ok: bool) -> str:
    return "met" if ok else "NOT met"


@dataclass
class BackendResults:
    name: str
    throughput: ThroughputResults
    select: Latency
    status: list[StatusRow]


def print_targets(
    results: list[BackendResults], million: bool, round_trip: RoundTripResults | None
) -> None:
    print("targets:")
    if round_trip is not None:
        rate = round_trip.rate(4, "observe")
        clean = round_trip.clean(4, "observe")
        print(
            f"  PostgreSQL >= {PG_TARGET:,.0f} runs/s per call with 4 writers at "
            f"{ROUND_TRIP_ARMS} arms, nothing lost: {rate:,.0f} "
            f"(ORM reference {round_trip.rate(4, 'orm'):,.0f}, one shared row per transaction "
            f"{round_trip.rate(4, 'commit_update'):,.0f}), "
            f"{'no retries or errors' if clean else 'retries or errors seen'} "
            f"-> {met(rate >= PG_TARGET and clean)}"
        )
    for res in results:
        t = res.throughput
        if res.name == "SQLite":
            for path in ("observe", "observe_many"):
                rate = t.rate(20, 1, path)
                print(
                    f"  SQLite >= {SQLITE_TARGET:,.0f} traces/s at 20 arms, 1 writer, "
                    f"{PATH_NAMES[path]}: {rate:,.0f} -> {met(rate >= SQLITE_TARGET)}"
                )
        else:
            for arms in ARM_COUNTS:
                for path in ("observe", "observe_many"):
                    rate = t.rate(arms, 4, path)
                    clean = t.clean(arms, 4, path)
                    print(
                        f"  PostgreSQL >= {PG_TARGET:,.0f} traces/s with 4 writers and no "
                        f"deadlocks, {arms} arms, {PATH_NAMES[path]}: {rate:,.0f}, "
                        f"{'no deadlocks or retries' if clean else 'retries or errors seen'} "
                        f"-> {met(rate >= PG_TARGET and clean)}"
                    )
        sel = res.select
        print(
            f"  {res.name}: select through the service <= 1 ms at {SELECT_ARMS:,} arms: median "
            f"{fmt_time(sel.median)}, p99 {fmt_time(sel.p99)} -> {met(sel.median <= SELECT_TARGET)}"
        )
        small, big = res.status[0], res.status[-1]
        ratio = big.status.median / small.status.median
        ok = ratio <= STATUS_RATIO_TARGET and big.status.median < STATUS_TARGET
        label = f"{big.size:,}" if million else f"{big.size:,} (1M skipped: run with --million)"
        print(
            f"  {res.name}: status at {label} traces within {STATUS_RATIO_TARGET:g}x of "
            f"{small.size:,} and under 50 ms: {fmt_time(big.status.median)} vs "
            f"{fmt_time(small.status.median)} ({ratio:.2f}x) -> "
            + (met(ok) if million else f"{met(ok)} at {big.size:,}; 1M not measured")
        )


def server_version(url: str) -> str:
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as conn:
            return str(conn.exec_driver_sql("SHOW server_version").scalar())
    finally:
        engine.dispose()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one short run per configuration")
    parser.add_argument("--skip-postgres", action="store_true", help="SQLite only")
    parser.add_argument("--million", action="store_true", help="status at 1M traces (minutes)")
    parser.add_argument("--rebuild", action="store_true", help="reload the kept SQLite files")
    parser.add_argument("--seed", type=int, default=0, help="workload seed")
    parser.add_argument(
        "--round-trip",
        action="store_true",
        help="only the PostgreSQL per-call observe section, beside the ORM and the ceilings",
    )
    args = parser.parse_args(argv)
    plan = QUICK if args.quick else FULL
    pg_base = os.environ.get(PG_ENV) or PG_DEFAULT
    sizes = (10_000, 100_000, 1_000_000) if args.million else (10_000, 100_000)
    started = time.perf_counter()

    import sqlite3

    backends = [] if args.round_trip else [("SQLite", "sqlite")]
    versions = f"SQLite {sqlite3.sqlite_version}"
    if args.round_trip and args.skip_postgres:
        raise SystemExit("--round-trip measures PostgreSQL: leave out --skip-postgres")
    if not args.skip_postgres:
        try:
            versions += f", PostgreSQL {server_version(pg_base)}"
        except Exception as exc:
            raise SystemExit(
                f"cannot reach PostgreSQL at {pg_base} ({type(exc).__name__}); set {PG_ENV} "
                "or pass --skip-postgres"
            ) from None
        if not args.round_trip:
            backends.append(("PostgreSQL", "postgresql"))
    print(
        f"storage benchmark: Python {platform.python_version()}, SQLAlchemy {sa.__version__}, "
        f"{versions}; {os.cpu_count()} CPUs; seed {args.seed}" + (", quick" if args.quick else "")
    )
    print(
        "active phase; reports from research.simulation with every arm included and working turns "
        "(each trace rewards every arm); writers are spawned processes released by one Event"
    )
    print()

    pool = WriterPool(max(WRITERS))
    results: list[BackendResults] = []
    round_trip: RoundTripResults | None = None
    try:
        if args.round_trip:
            print("== PostgreSQL: a new schema per run ==")
            print()
            round_trip = measure_round_trip(pool, pg_base, plan, args.seed)
            measure_cpu(pg_base, plan, args.seed)
        for name, backend in backends:
            where = "a temporary file (WAL)" if backend == "sqlite" else "a new schema per run"
            print(f"== {name}: {where} ==")
            print()
            throughput = measure_throughput(pool, backend, pg_base, plan, args.seed)
            if backend == "postgresql":
                round_trip = measure_round_trip(pool, pg_base, plan, args.seed)
                measure_cpu(pg_base, plan, args.seed)
            select = measure_select(backend, pg_base, plan, args.seed)
            status = measure_status(backend, pg_base, plan, args.seed, sizes, args.rebuild)
            if not args.million:
                print("  the 1,000,000-trace row was skipped (run with --million)")
                print()
            results.append(BackendResults(name, throughput, select, status))
    finally:
        pool.close()
    print_targets(results, args.million, round_trip)
    if any(r.name == "SQLite" for r in results):
        print(f"(SQLite status files are kept in {SQLITE_CACHE} and reused; --rebuild reloads)")
    print(f"(run took {time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
