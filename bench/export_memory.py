"""Is the peak memory of exports and of `GET traces` independent of how wide the traces are?

Builds a database of 240 traces of 10,000 arms each (2.4 million arm outcomes; SQLite by
default, or `--database-url`), then measures whole processes:

- `learning-bot export` in each format that reads traces (`--format jsonl`, `json`, `csv
  --table traces`, `csv --table arms`), its peak resident memory (ru_maxrss of the child),
  against `export --format csv --table posteriors` (the same process with everything but the
  traces: the idle reference);
- `learning-bot serve`: its resident memory once warm (idle), then its peak (VmHWM, reset
  through /proc/PID/clear_refs) while one client, then `--clients` clients at once (the
  default stream limit), read `GET traces?limit=1000` to the end;
- the reference reading: a process that reads the traces 1,000 at a time with their arms
  (how exports and `GET traces` read before) and writes JSON lines.

Target: every figure at most 150 MB above its idle process.

    PYTHONPATH=. .venv/bin/python bench/export_memory.py [--traces 240] [--arms 10000]
        [--clients 8] [--database-url URL] [--keep DIR]
"""

from __future__ import annotations

import sys

sys.path[:] = [p for p in sys.path if not p.rstrip("/").endswith("bench")]

import argparse  # noqa: E402
import os  # noqa: E402
import socket  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
import urllib.request  # noqa: E402
from pathlib import Path  # noqa: E402

EXE = str(Path(sys.executable).with_name("learning-bot"))
TARGET_MB = 150.0
BASE = "/__openclaw__/api/learning"

REFERENCE = """
import json, sys
from sqlalchemy import select
from learning_bot.bot.shapes import trace_json
from learning_bot.storage import SqlStore
from learning_bot.storage.database import reading
from learning_bot.storage.reads import traces_with_arms
from learning_bot.storage.schema import traces, learners
store = SqlStore(sys.argv[1])
out = sys.stdout
with reading(store.engine) as conn:
    learner = conn.execute(select(learners.c.id).where(learners.c.name == "default")).scalar_one()
after = 0
while True:
    with reading(store.engine) as conn:
        rows = conn.execute(select(traces).where(traces.c.learner_id == learner,
            traces.c.id > after).order_by(traces.c.id).limit(1000)).all()
        if not rows:
            break
        page = traces_with_arms(conn, rows)
    after = rows[-1].id
    for trace in page:
        out.write(json.dumps(trace_json(trace)) + "\\n")
"""


def build_database(url: str, traces: int, arms: int) -> None:
    """`traces` runs of `arms` arms each (every one included, two of them used)."""
    from learning_bot.engine import (
        Arm,
        LearningConfig,
        Phase,
        ReportedArm,
        RunReport,
        ToolCall,
        Usage,
    )
    from learning_bot.engine.posterior import now_ms
    from learning_bot.engine.service import LearningService
    from learning_bot.storage import SqlStore

    store = SqlStore(url)
    try:
        service = LearningService(store, LearningConfig(phase=Phase.ACTIVE))
        offered = tuple(
            ReportedArm(Arm(f"tool:bench:Tool{i:05d}", 100 + i % 50)) for i in range(arms)
        )
        start = now_ms() - traces * 1_000
        for first in range(0, traces, 10):
            service.observe_many(
                [
                    RunReport(
                        trace_id=f"wide-{n}",
                        arms=offered,
                        tool_calls=(ToolCall(f"Tool{n % arms:05d}"), ToolCall("Tool00001")),
                        usage=Usage(5_000, 300),
                        channel="bench",
                        timestamp=start + n * 1_000,
                    )
                    for n in range(first, min(traces, first + 10))
                ]
            )
        if store.dialect == "sqlite":
            with store.engine.connect() as conn:
                conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        store.close()


def peak_mb(cmd: list[str], env: dict[str, str]) -> tuple[float, int]:
    """Peak resident memory (MB) of the command run to its end, and the bytes it wrote."""
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode:
            raise SystemExit(f"{cmd} failed: {proc.stderr.read().decode() if proc.stderr else ''}")
        size = out.seek(0, os.SEEK_END)
    return usage.ru_maxrss / 1024, size


def status_mb(pid: int, field: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise SystemExit(f"no {field} for process {pid}")


def reset_peak(pid: int) -> None:
    """Make VmHWM start again from the current resident memory (Linux 4.0+)."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def read_all(url: str) -> tuple[int, bytes]:
    """GET `url` to the end; its size and its last bytes."""
    size = 0
    last = b""
    with urllib.request.urlopen(url, timeout=600) as r:
        while chunk := r.read(1 << 20):
            size += len(chunk)
            last = (last + chunk)[-64:]
    return size, last


def serve_figures(env: dict[str, str], clients: int, traces: int) -> list[tuple[str, float, float]]:
    port = free_port()
    server = subprocess.Popen(
        [EXE, "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}{BASE}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{base}/healthz", timeout=2):
                    break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit("learning-bot serve did not come up") from None
                time.sleep(0.2)
        for path in ("/summary", "/posteriors", "/traces?limit=1"):  # warm: imports, caches
            read_all(base + path)
        time.sleep(0.5)
        idle = status_mb(server.pid, "VmRSS")
        rows = []
        for n in (1, clients):
            reset_peak(server.pid)
            results: list[tuple[int, bytes]] = []

            def client(results: list[tuple[int, bytes]] = results) -> None:
                results.append(read_all(f"{base}/traces?limit=1000"))

            threads = [threading.Thread(target=client) for _ in range(n)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            if len(results) != n or any(
                not last.endswith(b'"total":%d}' % traces) for _, last in results
            ):
                raise SystemExit(f"GET traces answered wrongly: {[r[1] for r in results]}")
            peak = status_mb(server.pid, "VmHWM")
            rows.append(
                (
                    f"`GET traces?limit=1000`, {n} client(s) at once "
                    f"({results[0][0] / 1e6:.0f} MB each)",
                    idle,
                    peak,
                )
            )
        return rows
    finally:
        server.terminate()
        server.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--traces", type=int, default=240)
    parser.add_argument("--arms", type=int, default=10_000)
    parser.add_argument("--clients", type=int, default=8, help="concurrent GET traces (default 8)")
    parser.add_argument(
        "--database-url", help="an empty PostgreSQL database, say (default: SQLite)"
    )
    parser.add_argument("--keep", metavar="DIR", help="build the SQLite file in DIR, reuse it")
    parser.add_argument("--no-reference", action="store_true", help="skip the reference reading")
    parser.add_argument("--only", choices=("export", "serve"), help="measure only these")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(args.keep or tmp)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"wide-{args.traces}x{args.arms}.sqlite"
        url = args.database_url or f"sqlite:///{path}"
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env |= {"LEARNING_BOT_DATABASE_URL": url, "LEARNING_BOT_SPOOL_DIR": f"{folder}/spool"}
        if args.database_url or not path.exists():
            t0 = time.perf_counter()
            build_database(url, args.traces, args.arms)
            print(
                f"built {args.traces} traces of {args.arms:,} arms "
                f"in {time.perf_counter() - t0:.0f} s",
                flush=True,
            )
        rows: list[tuple[str, float, float]] = []
        idle, _ = peak_mb([EXE, "export", "--format", "csv", "--table", "posteriors"], env)
        exports = (
            ()
            if args.only == "serve"
            else (
                ("export --format jsonl", ["--format", "jsonl"]),
                ("export --format json", ["--format", "json"]),
                ("export --format csv --table traces", ["--format", "csv", "--table", "traces"]),
                ("export --format csv --table arms", ["--format", "csv", "--table", "arms"]),
            )
        )
        for label, extra in exports:
            peak, size = peak_mb([EXE, "export", *extra], env)
            rows.append((f"`learning-bot {label}` ({size / 1e6:.0f} MB written)", idle, peak))
        if not args.no_reference and args.only != "serve":
            peak, size = peak_mb([sys.executable, "-c", REFERENCE, url], env)
            rows.append(
                (
                    f"reference: read 1,000 traces at a time, as before ({size / 1e6:.0f} MB)",
                    idle,
                    peak,
                )
            )
        if args.only != "export":
            rows.extend(serve_figures(env, args.clients, args.traces))
    print()
    print(f"{args.traces} traces of {args.arms:,} arms; peak resident memory of whole processes")
    print()
    print("| process | idle (MB) | peak (MB) | above idle (MB) | target <= 150 MB |")
    print("|---|---|---|---|---|")
    for label, base, peak in rows:
        above = peak - base
        met = "met" if above <= TARGET_MB else "NOT met"
        if label.startswith("reference"):
            met = "(reference)"
        print(f"| {label} | {base:.0f} | {peak:.0f} | {above:.0f} | {met} |")
    print()
    print(
        "idle: `learning-bot export --format csv --table posteriors` (start-up, storage and the "
        "posteriors, no traces) for the exports; the warm server for GET traces"
    )


if __name__ == "__main__":
    main()
