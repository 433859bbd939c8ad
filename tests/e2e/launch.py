"""The documented ways of running learning-bot, one command line each, and a process started
from one of them: its own HOME, XDG directories and SQLite file, its output captured in files,
stopped by a signal and killed (with its process group) if it outlives the test. `served` is
the same for a test that only needs `learning-bot serve` up: started, and waited for until its
health check answers."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from tests.processes import inherited, without_faketime

REPO = Path(__file__).resolve().parents[2]
PYTHON = sys.executable
"""The project's interpreter: .venv/bin/python under `make test`."""


def _script(name: str) -> str:
    """A console script installed beside the interpreter (.venv/bin/learning-bot)."""
    beside = Path(PYTHON).with_name(name)
    if beside.exists():
        return str(beside)
    return shutil.which(name) or str(beside)


LEARNING_BOT = _script("learning-bot")

# One command line per documented way of running it (docs/); "{port}" becomes a free port.
SERVE = (LEARNING_BOT, "serve", "--host", "127.0.0.1", "--port", "{port}")
SLACK_HTTP = (LEARNING_BOT, "slack", "--host", "127.0.0.1", "--port", "{port}")
SLACK_SOCKET_MODE = (LEARNING_BOT, "slack")
DISCORD_RUN = (LEARNING_BOT, "discord", "run")

OWN_PREFIXES = ("LEARNING_BOT_", "SLACK_", "DISCORD_")
"""Variables of the caller's environment that never reach a process under test."""


_handed_out: set[int] = set()

PORTS_FROM = 20_000
PORTS_PER_PROCESS = 2_000
"""Test processes (pytest-xdist workers) hand out ports from ranges of their own below the
kernel's ephemeral range (32768 and up), so two processes never get the same port, and no
outgoing connection is given one between its hand-out and its server's bind."""


def _port_range() -> range:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    index = int(worker) if worker.isdigit() else 0
    start = PORTS_FROM + (index % 6) * PORTS_PER_PROCESS
    return range(start, start + PORTS_PER_PROCESS)


def free_port() -> int:
    """A loopback port nothing listens on, from this test process's own range, never the same
    twice in one test run (processes started side by side bind theirs a moment after they
    get it). The range is looked through from a point set by the process id: two test runs
    on one machine (each with its gw0) do not hand out the same ports first."""
    ports = _port_range()
    first = os.getpid() % len(ports)
    for port in [*ports[first:], *ports[:first]]:
        if port in _handed_out:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    raise RuntimeError("no free loopback port left in this test process's range")


def environment(root: Path, settings: Mapping[str, str]) -> dict[str, str]:
    """The caller's environment without any learning-bot, Slack or Discord setting (nor
    libfaketime: tests/processes.py), with HOME and the XDG directories under `root`, a SQLite
    file there, and `settings` on top."""
    env = {k: v for k, v in inherited().items() if not k.startswith(OWN_PREFIXES)}
    home = root / "home"
    dirs = {
        "HOME": home,
        "XDG_DATA_HOME": home / ".local" / "share",
        "XDG_STATE_HOME": home / ".local" / "state",
        "XDG_CONFIG_HOME": home / ".config",
        "XDG_CACHE_HOME": home / ".cache",
    }
    for path in dirs.values():
        path.mkdir(parents=True, exist_ok=True)
    env.update({name: str(path) for name, path in dirs.items()})
    env["LEARNING_BOT_DATABASE_URL"] = f"sqlite:///{root / 'learning.sqlite'}"
    env["PYTHONUNBUFFERED"] = "1"
    env["NO_COLOR"] = "1"
    env.update(settings)
    return env


def describe_exit(code: int) -> str:
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"signal {signal.Signals(-code).name}"
    return f"status {code}"


@dataclass
class Process:
    """A process under test. Its stdout and stderr are files under its directory."""

    argv: list[str]
    proc: asyncio.subprocess.Process
    stdout: Path
    stderr: Path
    started: float

    @classmethod
    async def start(
        cls,
        argv: Sequence[str],
        env: Mapping[str, str],
        root: Path,
        *,
        sigint_ignored: bool = False,
    ) -> Process:
        """Start `argv`; `sigint_ignored`: with SIGINT ignored, as a shell script's background
        job (`learning-bot ... &`) starts it."""
        stdout, stderr = root / "stdout.txt", root / "stderr.txt"
        command = ["sh", "-c", 'trap "" INT; exec "$@"', "sh", *argv] if sigint_ignored else argv
        with stdout.open("wb") as out, stderr.open("wb") as err:
            proc = await asyncio.create_subprocess_exec(
                *command,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                env=without_faketime(env),
                cwd=REPO,
                start_new_session=True,  # its own process group: nothing else gets our signals
            )
        return cls(list(argv), proc, stdout, stderr, time.monotonic())

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode

    def uptime(self) -> float:
        return time.monotonic() - self.started

    def send(self, sig: signal.Signals) -> None:
        self.proc.send_signal(sig)

    async def exit_within(self, seconds: float) -> int | None:
        """The exit status if the process ends within `seconds`, else None."""
        try:
            return await asyncio.wait_for(self.proc.wait(), max(seconds, 0.0))
        except TimeoutError:
            return None

    async def kill(self) -> None:
        """Kill the process and its group if anything of it is still running."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.proc.wait(), 10)

    def output(self, limit: int = 6000) -> str:
        """The command line and the tail of what the process wrote, for failure messages."""

        def tail(path: Path) -> str:
            text = path.read_text(errors="replace") if path.exists() else ""
            return text if len(text) <= limit else "...\n" + text[-limit:]

        state = "running" if self.returncode is None else describe_exit(self.returncode)
        return (
            f"$ {shlex.join(self.argv)}   [{state}, {self.uptime():.1f} s since start]\n"
            f"--- stdout ---\n{tail(self.stdout)}\n--- stderr ---\n{tail(self.stderr)}"
        )

    def stderr_text(self) -> str:
        return self.stderr.read_text(errors="replace") if self.stderr.exists() else ""


API_PATH = "/__openclaw__/api/learning"


@dataclass
class Served:
    """A `learning-bot serve` that answers: its process, and where to reach it."""

    proc: subprocess.Popen[str]
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base(self) -> str:
        """The learning API's base URL."""
        return self.url + API_PATH


@contextlib.contextmanager
def served(
    env: Mapping[str, str],
    *options: str,
    cwd: Path | None = None,
    stdout: int | IO[Any] | None = subprocess.PIPE,
    stderr: int | IO[Any] | None = subprocess.STDOUT,
    timeout: float = 90.0,
) -> Iterator[Served]:
    """`learning-bot serve --port P [options]` under `env`, yielded once GET healthz answers
    2xx; stopped with SIGTERM (killed after 30 s) on leaving, unless the test stopped it.
    Its output goes to `stdout`/`stderr` (Popen's arguments: a pipe to read, a file, DEVNULL)."""
    port = free_port()
    proc = subprocess.Popen(
        [LEARNING_BOT, "serve", "--port", str(port), *options],
        env=without_faketime(env),
        cwd=cwd,
        stdout=stdout,
        stderr=stderr,
        text=True,
    )
    try:
        server = Served(proc, port)
        _wait_for_health(server, timeout)
        yield server
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.communicate(timeout=120)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()


def _wait_for_health(server: Served, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"{server.base}/healthz", timeout=2):
                return
        except OSError:
            if server.proc.poll() is not None or time.monotonic() > deadline:
                stream = server.proc.stdout if server.proc.poll() is not None else None
                out = stream.read() if stream is not None else ""
                raise AssertionError(f"learning-bot serve did not come up: {out}") from None
            time.sleep(0.1)
