"""How long does `learning-bot status` take on a 100k-trace SQLite database, start-up included?

Builds the database once (100,000 traces over 30 arms, in the active phase: each run is
selected by the service, its usage drawn from `engine.simulation`, and the runs written with
`observe_many` in batches of 1,000), then times whole processes, taking turns:

- `learning-bot status` (the local read of the SQLite file, through the command bus on the
  standard library's sqlite3 rather than SQLAlchemy: learning_bot.app.build_read_app),
- `learning-bot --url http://127.0.0.1:PORT status` (reading a `learning-bot serve` started
  on the same database),
- `python -c pass` (the interpreter's own start-up: the reference),
- `python -c "import sqlalchemy"` (the storage library's import, for scale).

Targets: `status` at most 3x `python -c pass`; `status --url` no slower than `status`.

    .venv/bin/python bench/cli.py [--runs 31] [--traces 100000] [--keep DIR]
"""

from __future__ import annotations

import sys

sys.path[:] = [p for p in sys.path if not p.rstrip("/").endswith("bench")]

import argparse  # noqa: E402
import os  # noqa: E402
import socket  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import urllib.request  # noqa: E402
from pathlib import Path  # noqa: E402

EXE = str(Path(sys.executable).with_name("learning-bot"))
ARMS = 30
BATCH = 1_000


def build_database(url: str, traces: int, seed: int = 0) -> None:
    """`traces` runs through the service's batch write path (observe_many)."""
    import numpy as np

    from learning_bot.engine.config import LearningConfig, Phase
    from learning_bot.engine.inventory import ArmSet
    from learning_bot.engine.posterior import now_ms
    from learning_bot.engine.service import LearningService
    from learning_bot.engine.simulation import make_workload
    from learning_bot.storage import SqlStore

    store = SqlStore(url)
    try:
        service = LearningService(store, LearningConfig(phase=Phase.ACTIVE))
        workload = make_workload(ARMS, seed=seed)
        arm_set = ArmSet(workload.arms)
        rng = np.random.default_rng(seed)
        start = now_ms() - traces * 1_000
        for first in range(0, traces, BATCH):
            batch = []
            for step in range(first, min(traces, first + BATCH)):
                selection = service.select(arm_set)
                conversational, used = workload.draw_usage(step, rng)
                batch.append(
                    workload.report(
                        f"bench-{step}",
                        selection.selected,
                        used,
                        conversational,
                        is_baseline=selection.is_baseline,
                        conversation="bench:general",
                        timestamp=start + step * 1_000,
                    )
                )
            service.observe_many(batch)
        with store.engine.connect() as conn:
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        store.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_for(url: str, server: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"learning-bot serve exited with {server.returncode}")
        try:
            with urllib.request.urlopen(f"{url}/__openclaw__/api/learning/healthz", timeout=2):
                return
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"learning-bot serve did not answer at {url}")


def wall(cmd: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=31, help="runs of each command (default 31)")
    parser.add_argument("--traces", type=int, default=100_000)
    parser.add_argument(
        "--keep", metavar="DIR", help="build the database in DIR and reuse it when it is there"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(args.keep or tmp)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"cli-{args.traces}.sqlite"
        url = f"sqlite:///{path}"
        # Bytecode is written and reused as after an install (PYTHONDONTWRITEBYTECODE would
        # make every process compile the project's sources again).
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env |= {"LEARNING_BOT_DATABASE_URL": url, "LEARNING_BOT_SPOOL_DIR": f"{folder}/spool"}
        if not path.exists():
            t0 = time.perf_counter()
            build_database(url, args.traces)
            took = time.perf_counter() - t0
            print(f"built a {args.traces:,}-trace database in {took:.1f} s", flush=True)
        port = free_port()
        server_url = f"http://127.0.0.1:{port}"
        server = subprocess.Popen(
            [EXE, "serve", "--port", str(port)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            wait_for(server_url, server)
            commands = {
                "learning-bot status": [EXE, "status"],
                "learning-bot --url ... status": [EXE, "--url", server_url, "status"],
                "python -c pass": [sys.executable, "-c", "pass"],
                "python -c 'import sqlalchemy'": [sys.executable, "-c", "import sqlalchemy"],
            }
            local = subprocess.run(commands["learning-bot status"], env=env, capture_output=True)
            remote = subprocess.run(
                commands["learning-bot --url ... status"], env=env, capture_output=True
            )
            if local.returncode or remote.returncode or local.stdout != remote.stdout:
                raise SystemExit(
                    "status and status --url differ:\n"
                    + local.stdout.decode()
                    + local.stderr.decode()
                    + remote.stdout.decode()
                    + remote.stderr.decode()
                )
            times: dict[str, list[float]] = {name: [] for name in commands}
            for _ in range(args.runs):  # interleaved, so machine noise hits all alike
                for name, cmd in commands.items():
                    times[name].append(wall(cmd, env))
        finally:
            server.terminate()
            server.wait(timeout=30)
    floor = statistics.median(times["python -c pass"])
    status = statistics.median(times["learning-bot status"])
    over_url = statistics.median(times["learning-bot --url ... status"])
    print()
    print(f"{args.traces:,} traces, {ARMS} arms, {args.runs} runs of each command, taking turns")
    print()
    print("| command | median wall time | ratio to python -c pass |")
    print("|---|---|---|")
    for name, values in times.items():
        med = statistics.median(values)
        print(f"| `{name}` | {med * 1000:.1f} ms | {med / floor:.2f}x |")
    print()
    print(
        f"target: learning-bot status <= 3x python -c pass: {status / floor:.2f}x, "
        + ("met" if status <= 3 * floor else "NOT met")
    )
    print(
        f"target: status --url no slower than status: {over_url / status:.2f}x, "
        + ("met" if over_url <= status else "NOT met")
    )


if __name__ == "__main__":
    main()
