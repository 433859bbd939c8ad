"""`learning-bot replay` on a long log: time and peak memory as a user runs it.

Writes synthetic Anthropic Messages logs (tests/replay/logs.py: conversations 20 at a time,
each request's messages extending its conversation's previous request, 10 tools) of 10,000 and
100,000 lines in a temporary directory, then runs the real executable on each in a subprocess
and reports the wall time, lines per second and the child's peak resident memory
(getrusage's ru_maxrss): memory that does not grow with the file says reading streams.

    .venv/bin/python -m bench.replay [--lines N ...] [--seed N]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.replay.logs import write_log

EXE = str(Path(sys.executable).with_name("learning-bot"))


def measure(path: Path, home: Path) -> tuple[float, int, str]:
    """Seconds, peak RSS in KiB of the child, and its first output line."""
    env = {
        **os.environ,
        "HOME": str(home),
        "XDG_DATA_HOME": str(home / "data"),
        "LEARNING_BOT_TOKEN_BUDGET": "400",
    }
    start = time.perf_counter()
    child = subprocess.Popen(
        [EXE, "replay", str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - start
    assert child.stdout is not None
    out = child.stdout.read().decode()
    if status != 0:
        raise SystemExit(f"replay failed: {child.stderr.read().decode() if child.stderr else ''}")
    return seconds, usage.ru_maxrss, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, action="append", help="log lengths (repeatable)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    sizes = args.lines or [10_000, 100_000]
    print(f"{'lines':>9} {'MB':>7} {'seconds':>8} {'lines/s':>8} {'peak RSS MiB':>13}")
    with tempfile.TemporaryDirectory() as tmp:
        for lines in sizes:
            path = Path(tmp) / f"agent-{lines}.jsonl"
            write_log(path, lines, seed=args.seed)
            seconds, rss_kib, out = measure(path, Path(tmp) / "home")
            size = path.stat().st_size / 1e6
            print(
                f"{lines:>9,} {size:>7.0f} {seconds:>8.1f} {lines / seconds:>8,.0f} "
                f"{rss_kib / 1024:>13.0f}"
            )
            print("   " + out.splitlines()[0])
            path.unlink()


if __name__ == "__main__":
    main()
