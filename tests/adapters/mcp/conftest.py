"""A running `learning-bot serve` (with an API token) for the MCP-over-HTTP and `/v1` tests,
and the stdio command line OpenClaw's gateway spawns."""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from mcp import StdioServerParameters

from tests.e2e.launch import SERVE, Process, environment, free_port

TOKEN = "test-token-0123456789abcdef"


@dataclass
class Served:
    base: str
    database_url: str
    process: Process


def stdio_params(database_url: str, home: Path) -> StdioServerParameters:
    """`<venv python> -m learning_bot mcp --database-url=...` with only HOME set, as the
    gateway spawns it (the SDK adds PATH, SHELL, TERM, USER, LOGNAME)."""
    home.mkdir(parents=True, exist_ok=True)
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "learning_bot", "mcp", f"--database-url={database_url}"],
        env={"HOME": str(home)},
    )


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    async with serving(tmp_path) as server:
        yield server


@asynccontextmanager
async def serving(tmp_path: Path, settings: dict[str, str] | None = None) -> AsyncIterator[Served]:
    """`learning-bot serve` with the API token and `settings` on top of a clean environment,
    yielded once its health check answers; stopped with SIGTERM, which must end it cleanly."""
    port = free_port()
    env = environment(tmp_path, {"LEARNING_BOT_API_TOKEN": TOKEN, **(settings or {})})
    argv = [part.replace("{port}", str(port)) for part in SERVE]
    process = await Process.start(argv, env, tmp_path)
    base = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient() as client:
            for _ in range(1200):  # up to a minute on a busy machine
                if process.returncode is not None:
                    pytest.fail(f"serve exited early\n{process.output()}")
                try:
                    if (await client.get(f"{base}/v1/health")).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                await asyncio.sleep(0.05)
            else:
                pytest.fail(f"serve did not answer\n{process.output()}")
        yield Served(base, env["LEARNING_BOT_DATABASE_URL"], process)
        process.send(signal.SIGTERM)
        code = await process.exit_within(10)
        assert code == 0, process.output()
    finally:
        await process.kill()
