"""qortex 0.8.1's own MCP server as a reference peer for the learning tools.

`run_qortex(steps)` makes sure a test-only virtualenv with qortex exists (built once, cached by
version and pins under ~/.cache/learning-bot-test/, or $LEARNING_BOT_TEST_CACHE), starts
`qortex mcp-serve` over stdio with a fresh home directory (qortex keeps its state in
~/.qortex), sends the steps through the official `mcp` client and returns the replies. When
qortex cannot be installed or started it returns no replies and the reason, so a comparison
test can skip with it.

Settings:
- LEARNING_BOT_QORTEX_PYTHON: an interpreter that already has qortex 0.8.1 (no venv is built).
- LEARNING_BOT_QORTEX=off: never build or start the peer.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from mcp import ClientSession, StdioServerParameters

from tests import processes
from tests.processes import inherited

from .openclaw_calls import Step, ToolReply, run_steps, session_caller, stdio_session

QORTEX_VERSION = "0.8.1"
# qortex's own requirements are unpinned; these are the versions the peer was verified with,
# so the reference does not drift when a dependency releases.
PINS = (
    f"qortex=={QORTEX_VERSION}",
    "qortex-learning==0.1.0",
    "qortex-observe==0.1.0",
    "qortex-online==0.1.0",
    "qortex-ingest==0.1.0",
    "fastmcp==4.1.2",
    "mcp==2.3.0",
)
INSTALL_TIMEOUT = 600.0
# A failed install is not retried for this long (an offline machine would otherwise pay the
# pip timeout in every test run).
FAILURE_TTL = 600.0
# Keeps the server from reaching the network (update check), drawing a banner, or loading
# vector and graph backends the learning tools do not use.
PEER_ENV = {
    "FASTMCP_CHECK_FOR_UPDATES": "off",
    "FASTMCP_SHOW_SERVER_BANNER": "false",
    "QORTEX_VEC": "memory",
    "QORTEX_GRAPH": "memory",
    "QORTEX_OTEL_ENABLED": "false",
    "HF_HUB_OFFLINE": "1",
}


@dataclass(frozen=True)
class PeerRun:
    """The replies of a completed run, or None and the reason the peer was unavailable."""

    replies: list[ToolReply] | None
    reason: str = ""


def cache_root() -> Path:
    configured = os.environ.get("LEARNING_BOT_TEST_CACHE")
    if configured:
        return Path(configured).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "learning-bot-test"


def venv_dir() -> Path:
    key = hashlib.sha256("\n".join((sys.version, *PINS)).encode()).hexdigest()[:10]
    return cache_root() / f"qortex-{QORTEX_VERSION}-{key}"


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _run(cmd: list[str], timeout: float) -> tuple[bool, str]:
    try:
        done = subprocess.run(
            cmd, capture_output=True, text=True, env=inherited(), timeout=timeout, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"{' '.join(cmd[:4])}...: {exc}"
    tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
    return done.returncode == 0, " / ".join(tail)


def _installed_version(python: Path) -> str | None:
    ok, out = _run_out(
        [str(python), "-c", "import importlib.metadata as m; print(m.version('qortex'))"]
    )
    return out.strip() or None if ok else None


def _run_out(cmd: list[str]) -> tuple[bool, str]:
    try:
        done = subprocess.run(
            cmd, capture_output=True, text=True, env=inherited(), timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return False, ""
    return done.returncode == 0, done.stdout


def ensure_qortex() -> tuple[Path | None, str]:
    """The `qortex` program of a virtualenv with qortex 0.8.1, building the venv on first use;
    or None and the reason it cannot be had."""
    if os.environ.get("LEARNING_BOT_QORTEX", "").lower() in {"off", "0", "no", "false"}:
        return None, "the qortex peer is turned off (LEARNING_BOT_QORTEX=off)"
    given = os.environ.get("LEARNING_BOT_QORTEX_PYTHON")
    if given:
        python = Path(given)
        program = python.parent / "qortex"
        version = _installed_version(python)
        if version != QORTEX_VERSION or not program.exists():
            return None, f"LEARNING_BOT_QORTEX_PYTHON={given} has no qortex {QORTEX_VERSION}"
        return program, ""

    target = venv_dir()
    program = target / "bin" / "qortex"
    done_marker = target / ".complete"
    failed_marker = target.with_name(target.name + ".failed")
    if done_marker.exists() and program.exists():
        return program, ""
    with _locked(target.with_name(target.name + ".lock")):
        if done_marker.exists() and program.exists():
            return program, ""
        if failed_marker.exists():
            # a file's time is the machine's date, also under faketime (tests/processes.py)
            age = processes.now_ms() / 1000 - failed_marker.stat().st_mtime
            if age < FAILURE_TTL:
                return None, failed_marker.read_text()
        shutil.rmtree(target, ignore_errors=True)
        started = time.monotonic()
        ok, detail = _run([sys.executable, "-m", "venv", str(target)], 120)
        if ok:
            pip = [str(target / "bin" / "python"), "-m", "pip", "--disable-pip-version-check"]
            ok, detail = _run(
                [*pip, "install", "--quiet", "--retries", "1", "--timeout", "20", *PINS],
                INSTALL_TIMEOUT,
            )
        if not ok or not program.exists():
            reason = f"cannot install qortex {QORTEX_VERSION} in a test venv: {detail}"
            failed_marker.write_text(reason)
            shutil.rmtree(target, ignore_errors=True)
            return None, reason
        failed_marker.unlink(missing_ok=True)
        done_marker.write_text(f"built in {time.monotonic() - started:.1f}s\n")
    return program, ""


def peer_parameters(program: Path, home: Path) -> StdioServerParameters:
    """How to start qortex's MCP server: the gateway's default command (`qortex mcp-serve`),
    with a private home so its learners start empty."""
    return StdioServerParameters(
        command=str(program), args=["mcp-serve"], env={"HOME": str(home), **PEER_ENV}
    )


@contextlib.asynccontextmanager
async def qortex_session(home: Path | None = None) -> AsyncIterator[ClientSession | str]:
    """Yields an initialised client session to a fresh qortex server, or the reason there is
    none. The server's stderr is kept in the home directory and quoted when it fails to start."""
    program, reason = ensure_qortex()
    if program is None:
        yield reason
        return
    async with contextlib.AsyncExitStack() as stack:
        if home is None:
            home = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="qortex-peer-")))
        errlog = stack.enter_context((home / "server.stderr").open("w+"))
        try:
            session = await stack.enter_async_context(
                stdio_session(peer_parameters(program, home), errlog)
            )
        except Exception as exc:
            errlog.flush()
            errlog.seek(0)
            tail = " / ".join(errlog.read().strip().splitlines()[-3:])
            yield f"qortex {QORTEX_VERSION} MCP server did not start: {exc!r} {tail}".strip()
            return
        yield session


async def run_qortex(steps: Sequence[Step], home: Path | None = None) -> PeerRun:
    """Runs the steps against a fresh qortex MCP server."""
    async with qortex_session(home) as session:
        if isinstance(session, str):
            return PeerRun(None, session)
        return PeerRun(await run_steps(session_caller(session), steps))
