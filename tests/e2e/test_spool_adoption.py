"""A replica killed while its runs wait in the spool: a live replica sharing the spool directory
adopts them and writes each once (two `learning-bot serve` processes on one PostgreSQL, the
doomed one through a forwarder switched off to cut it from the database)."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import time
from pathlib import Path

import httpx
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool

from tests.adapters.http.test_storage_down import Proxy
from tests.e2e.launch import LEARNING_BOT, environment, free_port, served

BASE = "/__openclaw__/api/learning"
ARMS = [{"armId": f"tool:t:T{i}", "tokenCost": 50} for i in range(4)]


def wait_for(check: object, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        time.sleep(0.05)


def test_a_killed_replicas_spool_is_replayed_once_by_a_live_one(
    postgres_url: str, tmp_path: Path
) -> None:
    spool = tmp_path / "spool"
    shared = {
        "LEARNING_BOT_SPOOL_DIR": str(spool),
        "LEARNING_BOT_SPOOL_ADOPT_SECONDS": "0.2",
        "LEARNING_BOT_PHASE": "active",
    }
    (tmp_path / "b").mkdir()
    (tmp_path / "a").mkdir()
    live_env = environment(tmp_path / "b", {**shared, "LEARNING_BOT_DATABASE_URL": postgres_url})
    # The doomed replica reaches the database through a forwarder that the test switches off
    # (its network path lost): it records a run, then spools every run.
    target = make_url(postgres_url)
    proxy = Proxy((target.host or "127.0.0.1", target.port or 5432))
    proxy.up = True
    through = target.set(host="127.0.0.1", port=proxy.port)
    doomed_env = environment(
        tmp_path / "a",
        {**shared, "LEARNING_BOT_DATABASE_URL": through.render_as_string(hide_password=False)},
    )
    port = free_port()
    doomed = subprocess.Popen(  # started first: both start at once
        [LEARNING_BOT, "serve", "--port", str(port)],
        env=doomed_env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        with contextlib.closing(proxy), served(live_env, stdout=subprocess.DEVNULL) as live:
            with httpx.Client(base_url=f"http://127.0.0.1:{port}{BASE}", timeout=30) as a:

                def answers() -> bool:
                    try:
                        return a.get(f"http://127.0.0.1:{port}/livez").status_code == 200
                    except httpx.TransportError:
                        return False

                wait_for(answers)
                first = {"traceId": "k-up", "arms": ARMS, "toolCalls": [{"name": "T1"}]}
                assert a.post("/observe", json=first).json()["recorded"] is True
                proxy.down()
                for i in range(20):
                    body = {"traceId": f"k{i}", "arms": ARMS, "toolCalls": [{"name": "T1"}]}
                    observed = a.post("/observe", json=body)
                    assert observed.status_code == 200, observed.text
                    assert observed.json()["spooled"] is True
            assert len(list(spool.glob("p*/*.jsonl"))) >= 1
            doomed.send_signal(signal.SIGKILL)
            doomed.wait(60)
            with httpx.Client(base_url=live.base, timeout=30) as b:
                wait_for(lambda: b.get("/summary").json().get("traceCount") == 21)
                wait_for(lambda: not any(spool.glob("p*/*.jsonl")))
                assert not (spool / "dead-letter.jsonl").exists()
    finally:
        if doomed.poll() is None:
            doomed.kill()
            doomed.wait()
    engine = create_engine(postgres_url, poolclass=NullPool)
    with engine.connect() as conn:
        traces = conn.execute(text("SELECT count(*), count(DISTINCT trace_id) FROM traces"))
        assert tuple(traces.one()) == (21, 21)
        pulls = conn.execute(text("SELECT sum(pulls) FROM posteriors")).scalar()
        assert pulls == 21 * len(ARMS)  # each run's posterior changes once
    engine.dispose()
