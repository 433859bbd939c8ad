"""How long does `learning-bot status` take on a 10k-trace SQLite database, start-up included?

Builds the database once (10,000 simulated traces, 30 arms), then times whole processes:
`learning-bot status` beside `python -c pass` (the interpreter's own start-up) and
`python -c "import sqlalchemy"` (the storage library's import), in the same run.

    .venv/bin/python bench/cli.py [--runs 15]
"""

from __future__ import annotations

import sys

sys.path[:] = [p for p in sys.path if not p.rstrip("/").endswith("bench")]

import argparse  # noqa: E402
import os  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

EXE = str(Path(sys.executable).with_name("learning-bot"))


def wall(cmd: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--traces", type=int, default=10_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = {
            **os.environ,
            "LEARNING_BOT_DATABASE_URL": f"sqlite:///{tmp}/cli.sqlite",
            "LEARNING_BOT_SPOOL_DIR": f"{tmp}/spool",
        }
        t0 = time.perf_counter()
        subprocess.run(
            [EXE, "simulate", "--traces", str(args.traces), "--arms", "30"],
            env=env,
            stdout=subprocess.DEVNULL,
            check=True,
        )
        print(f"built a {args.traces:,}-trace database in {time.perf_counter() - t0:.1f} s")
        commands = {
            "learning-bot status": [EXE, "status"],
            "python -c pass": [sys.executable, "-c", "pass"],
            "python -c 'import sqlalchemy'": [sys.executable, "-c", "import sqlalchemy"],
        }
        times: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.runs):  # interleaved, so machine noise hits all alike
            for name, cmd in commands.items():
                times[name].append(wall(cmd, env))
    status = statistics.median(times["learning-bot status"])
    floor = statistics.median(times["python -c pass"])
    print()
    print("| command | median wall time | ratio to python -c pass |")
    print("|---|---|---|")
    for name, values in times.items():
        med = statistics.median(values)
        print(f"| `{name}` | {med * 1000:.0f} ms | {med / floor:.1f}x |")
    print()
    print(
        "target: learning-bot status <= 0.5 s on a 10k-trace SQLite database: "
        + ("met" if status <= 0.5 else "NOT met")
    )


if __name__ == "__main__":
    main()
