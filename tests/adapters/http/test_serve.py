"""`learning-bot serve`: the surfaces it runs, how it starts, and how fast it stops."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from learning_bot.adapters.http.server import serve
from learning_bot.app import build_app
from learning_bot.settings import Settings
from learning_bot.surfaces import configured_surfaces
from tests.e2e.launch import free_port, served
from tests.processes import inherited

EXE = str(Path(sys.executable).with_name("learning-bot"))


class ChatSurface:
    """A surface that connects out (no routes) and runs until stopped."""

    name = "chat"
    routes = ()

    def __init__(self, run: Any, stop: Any) -> None:
        self._run = run
        self._stop = stop

    async def run(self) -> None:
        await self._run()

    async def stop(self) -> None:
        await self._stop()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_serve_starts_answers_and_stops_quickly(tmp_path: Path, sig: signal.Signals) -> None:
    env = inherited(
        {
            "LEARNING_BOT_DATABASE_URL": f"sqlite:///{tmp_path}/serve.sqlite",
            "LEARNING_BOT_SPOOL_DIR": str(tmp_path / "spool"),
        }
    )
    env.pop("DISCORD_TOKEN", None)
    env.pop("SLACK_BOT_TOKEN", None)
    with served(env) as server:
        proc, base = server.proc, server.base
        assert httpx.get(base + "/summary").json()["traceCount"] == 0
        assert "<title>learning-bot dashboard</title>" in httpx.get(base + "/dashboard").text
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=120)  # how soon: bench/cli.py times start and stop
    assert proc.returncode == 0, out
    assert "live surfaces: http" in out
    assert "Discord: off (set DISCORD_TOKEN to enable)" in out
    assert "stopped" in out
    assert "Traceback" not in out


def test_serve_refuses_a_public_address_without_a_token(tmp_path: Path) -> None:
    env = inherited({"LEARNING_BOT_DATABASE_URL": f"sqlite:///{tmp_path}/x.sqlite"})
    env.pop("LEARNING_BOT_API_TOKEN", None)
    result = subprocess.run(
        [EXE, "serve", "--host", "0.0.0.0", "--port", str(free_port())],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "without LEARNING_BOT_API_TOKEN" in result.stderr
    first, *hint = result.stderr.splitlines()
    assert first.startswith("learning-bot: ") and len(hint) <= 1


async def test_surfaces_run_beside_http_and_stop_with_it(tmp_path: Path) -> None:
    app = build_app(Settings(database_url=f"sqlite:///{tmp_path}/s.sqlite"), spool=False)
    started = asyncio.Event()
    stopped = asyncio.Event()

    async def run() -> None:
        started.set()
        await asyncio.Event().wait()  # a chat client runs until told to stop

    async def stop_surface() -> None:
        stopped.set()

    ready, stop = asyncio.Event(), asyncio.Event()
    port = free_port()
    lines: list[str] = []
    task = asyncio.create_task(
        serve(
            app.bus,
            port=port,
            surfaces=[ChatSurface(run, stop_surface)],
            announce=lines.append,
            ready=ready,
            stop=stop,
        )
    )
    await asyncio.wait_for(ready.wait(), 120)
    await asyncio.wait_for(started.wait(), 120)
    async with httpx.AsyncClient() as client:
        r = await client.get(f"http://127.0.0.1:{port}/__openclaw__/api/learning/healthz")
        assert r.status_code == 200
    stop.set()
    await asyncio.wait_for(task, 120)
    assert stopped.is_set()
    assert "learning-bot: live surfaces: http, chat" in lines
    app.close()


def test_discord_is_built_when_its_token_is_set(tmp_path: Path) -> None:
    app = build_app(Settings(database_url=f"sqlite:///{tmp_path}/d.sqlite"), spool=False)
    surfaces, notes = configured_surfaces(app, {"DISCORD_TOKEN": "x" * 60})
    # MCP is always on; the alert scheduler runs beside any chat surface
    assert [s.name for s in surfaces] == ["discord", "alerts", "mcp"]
    assert any(n.startswith("Discord: live") for n in notes)
    surfaces, notes = configured_surfaces(app, {})
    assert [s.name for s in surfaces] == ["mcp"]
    assert "Discord: off (set DISCORD_TOKEN to enable)" in notes
    app.close()


def test_slack_is_mounted_when_its_tokens_are_set(tmp_path: Path) -> None:
    app = build_app(Settings(database_url=f"sqlite:///{tmp_path}/sl.sqlite"), spool=False)
    env = {
        "SLACK_BOT_TOKEN": "xoxb-" + "1" * 40,
        "SLACK_SIGNING_SECRET": "s" * 32,
        "SLACK_API_URL": "http://127.0.0.1:9/api/",
    }
    surfaces, notes = configured_surfaces(app, env)
    slack = [s for s in surfaces if s.name == "slack"]
    assert slack
    assert any(getattr(r, "path", "") == "/slack/events" for r in slack[0].routes)
    assert "Slack: live (HTTP, events at POST /slack/events)" in notes
    app.close()


def test_several_workers_share_the_port_and_stop_together(tmp_path: Path) -> None:
    env = inherited(
        {
            "LEARNING_BOT_DATABASE_URL": f"sqlite:///{tmp_path}/w.sqlite",
            "LEARNING_BOT_SPOOL_DIR": str(tmp_path / "spool"),
        }
    )
    with served(env, "--workers", "2") as server:
        proc, port, base = server.proc, server.port, server.base
        report = {
            "traceId": "",
            "arms": [{"armId": "tool:fs:Read", "tokenCost": 10}],
            "toolCalls": [{"name": "Read"}],
        }
        with httpx.Client(base_url=base) as client:
            for i in range(40):  # new connections each time: the kernel spreads them
                r = httpx.post(base + "/observe", json={**report, "traceId": f"w{i}"})
                assert r.status_code == 200
            assert client.get("/summary").json()["traceCount"] == 40
        health = f"http://127.0.0.1:{port}/v1/health"
        # every worker serves OpenClaw's REST backend (and /mcp), not only the first
        assert {httpx.get(health).status_code for _ in range(30)} == {200}
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=120)  # how soon: bench/cli.py times start and stop
    assert proc.returncode == 0, out
    assert "2 worker processes serve port" in out
    assert out.count("live surfaces: http") == 1
    assert "Traceback" not in out


def test_serve_backs_up_and_upgrades_an_older_sqlite_file(tmp_path: Path) -> None:
    """After an update, `make run` keeps working on the user's database: the file as it was
    is copied beside it, then migrated; one-shot reads still only ask for `db upgrade`."""
    import sqlite3

    from alembic import command
    from sqlalchemy import create_engine

    from learning_bot.storage.database import _alembic_config

    path = tmp_path / "old.sqlite"
    engine = create_engine(f"sqlite:///{path}")
    with engine.begin() as conn:
        command.upgrade(_alembic_config(conn), "0004")
        conn.exec_driver_sql(
            "INSERT INTO learners (name, phase, stats_epoch, status_from_epoch, created_at) "
            "VALUES ('default', 'passive', 0, 0, 1)"
        )
    engine.dispose()
    env = inherited({"LEARNING_BOT_DATABASE_URL": f"sqlite:///{path}"})
    env["LEARNING_BOT_SPOOL_DIR"] = str(tmp_path / "spool")
    status = subprocess.run([EXE, "status"], env=env, capture_output=True, text=True, timeout=60)
    assert status.returncode == 1 and "learning-bot db upgrade" in status.stderr
    with served(env) as server:
        proc = server.proc
        summary = httpx.get(server.base + "/summary")
        assert summary.status_code == 200 and summary.json()["traceCount"] == 0
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, out
    backup = tmp_path / "old.sqlite.rev0004.bak"
    with sqlite3.connect(backup) as conn:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchone() == ("0004",)
        assert conn.execute("SELECT name FROM learners").fetchall() == [("default",)]
    with sqlite3.connect(path) as conn:
        head = conn.execute("SELECT version_num FROM alembic_version").fetchone()[0]
    from learning_bot.storage.revision import HEAD_REVISION

    assert head == HEAD_REVISION
