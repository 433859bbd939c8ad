"""`serve --workers 2`: a worker killed is forked again within seconds while the other keeps
answering, the parent lives on until a signal; and a configuration one worker alone could
serve (Slack over HTTP) is refused with the reason."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import httpx

from tests.e2e.launch import LEARNING_BOT, free_port, served
from tests.processes import inherited


def _children(pid: int) -> set[int]:
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text().split()
        found.update(int(p) for p in text)
    return found


def test_a_killed_worker_is_restarted_while_the_other_serves(tmp_path: Path) -> None:
    env = inherited(
        {
            "LEARNING_BOT_DATABASE_URL": f"sqlite:///{tmp_path}/w.sqlite",
            "LEARNING_BOT_SPOOL_DIR": str(tmp_path / "spool"),
        }
    )
    with served(env, "--workers", "2") as server:
        proc, base = server.proc, server.base
        deadline = time.monotonic() + 120
        while len(workers := _children(proc.pid)) < 2:
            assert time.monotonic() < deadline, workers
            time.sleep(0.05)
        victim = min(workers)
        os.kill(victim, signal.SIGKILL)
        killed_at = time.monotonic()
        answered = 0
        while True:
            # meanwhile every request is answered (by the other worker until it is back)
            assert httpx.get(base + "/healthz", timeout=10).status_code == 200
            answered += 1
            now = _children(proc.pid)
            if len(now) == 2 and victim not in now:
                break
            assert time.monotonic() - killed_at < 120, "the worker was not restarted"
            time.sleep(0.05)
        assert proc.poll() is None and answered > 0
        for _ in range(20):  # both serve (new connections each time)
            assert httpx.get(base + "/healthz", timeout=10).status_code == 200
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, out
    assert "worker 0 exited" in out or "worker 1 exited" in out


def test_slack_over_http_with_workers_is_refused(tmp_path: Path) -> None:
    env = inherited(
        {
            "LEARNING_BOT_DATABASE_URL": f"sqlite:///{tmp_path}/w.sqlite",
            "SLACK_BOT_TOKEN": "xoxb-test",
            "SLACK_SIGNING_SECRET": "secret",
        }
    )
    done = subprocess.run(
        [LEARNING_BOT, "serve", "--workers", "2", "--port", str(free_port())],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done
    assert "Slack over HTTP" in done.stderr and "Socket Mode" in done.stderr, done.stderr
