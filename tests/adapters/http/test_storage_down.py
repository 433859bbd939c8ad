"""Storage down: the server starts anyway, a learner first seen during the outage gets the
include-everything fallback and the spool, and everything reaches storage once it is back."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

from learning_bot.cli import main

from .conftest import Live, start_server, stop_server

ARM = {"armId": "tool:fs:Read", "tokenCost": 10}


def obs(trace_id: str) -> dict[str, Any]:
    return {"traceId": trace_id, "arms": [ARM], "toolCalls": [{"name": "Read"}]}


class Proxy:
    """A TCP forwarder to a real PostgreSQL that can be switched off: while down it refuses
    new connections and cuts the open ones, as a stopped server does."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.up = False
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.open: list[socket.socket] = []
        self.lock = threading.Lock()
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if not self.up:
                client.close()
                continue
            upstream = socket.create_connection(self.target)
            with self.lock:
                self.open += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(a: socket.socket, b: socket.socket) -> None:
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        finally:
            for s in (a, b):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def down(self) -> None:
        self.up = False
        with self.lock:
            for s in self.open:
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
            self.open.clear()

    def close(self) -> None:
        self.closed = True
        self.down()
        self.listener.close()


@pytest.fixture
def proxied(postgres_url: str) -> Iterator[tuple[Proxy, str]]:
    parts = urlsplit(postgres_url)
    proxy = Proxy((parts.hostname or "127.0.0.1", parts.port or 5432))
    user = f"{parts.username}@" if parts.username else ""
    url = urlunsplit(parts._replace(netloc=f"{user}127.0.0.1:{proxy.port}"))
    yield proxy, url
    proxy.close()


def wait_until(check: Any, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        time.sleep(0.1)


def test_serve_starts_while_postgresql_is_down_and_catches_up(
    proxied: tuple[Proxy, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    proxy, url = proxied
    monkeypatch.setenv("LEARNING_BOT_SPOOL_DIR", str(tmp_path / "spool"))
    live: Live = start_server(url, token=None)  # the database is down: it starts anyway
    try:
        with live.client(None) as c:
            health = c.get("/healthz")
            assert health.status_code == 503 and health.json()["ok"] is False
            assert c.get("/summary").status_code == 503
            for learner in ("default", "fresh"):
                chosen = c.post(f"/select?learner={learner}", json={"arms": [ARM]})
                assert chosen.status_code == 200, chosen.text
                assert chosen.json()["selected"] == ["tool:fs:Read"]
                assert "unavailable" in chosen.json()["fallback"]
                observed = c.post(f"/observe?learner={learner}", json=obs(f"{learner}-1"))
                assert observed.status_code == 200, observed.text
                assert observed.json()["spooled"] is True
            proxy.up = True
            wait_until(lambda: c.get("/healthz").status_code == 200)
            wait_until(lambda: c.get("/summary?learner=fresh").json().get("traceCount") == 1)
            assert c.get("/summary").json()["traceCount"] == 1
            # A learner first seen during the outage was created by its write, not its reads.
            assert c.get("/summary?learner=never").status_code == 404
    finally:
        stop_server(live)
    capsys.readouterr()
    assert main(["--database-url", url, "db", "verify"]) == 0, capsys.readouterr().out


def test_a_new_learner_while_the_sqlite_file_is_gone_is_spooled_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("LEARNING_BOT_SPOOL_DIR", str(tmp_path / "spool"))
    path = tmp_path / "served.sqlite"
    url = f"sqlite:///{path}"
    live = start_server(url, token=None)
    try:
        with live.client(None) as c:
            assert c.post("/observe", json=obs("before")).json()["recorded"]
            path.rename(tmp_path / "aside.sqlite")
            health = c.get("/healthz")
            assert health.status_code == 503 and "removed" in health.json()["database"]
            during = c.post("/observe?learner=newcomer", json=obs("n-1"))
            assert during.status_code == 200 and during.json()["spooled"] is True
            chosen = c.post("/select?learner=newcomer", json={"arms": [ARM]})
            assert chosen.status_code == 200 and chosen.json()["fallback"]
            (tmp_path / "aside.sqlite").rename(path)
            wait_until(lambda: c.get("/healthz").status_code == 200)
            wait_until(lambda: c.get("/summary?learner=newcomer").status_code == 200)
            wait_until(lambda: c.get("/summary?learner=newcomer").json()["traceCount"] == 1)
    finally:
        stop_server(live)
    capsys.readouterr()
    assert main(["--database-url", url, "db", "verify"]) == 0, capsys.readouterr().out


def test_a_full_spool_is_503_with_a_one_line_reason_logged_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import logging

    import uvicorn

    from learning_bot.adapters.http import HttpSettings, create_app
    from learning_bot.app import build_app
    from learning_bot.settings import Settings

    monkeypatch.setenv("LEARNING_BOT_SPOOL_DIR", str(tmp_path / "spool"))
    path = tmp_path / "served.sqlite"
    app = build_app(Settings(database_url=f"sqlite:///{path}", spool_max_mb=0.004))
    config = uvicorn.Config(
        create_app(app.bus, HttpSettings()), port=0, log_level="warning", lifespan="off"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    caplog.set_level(logging.WARNING, "learning_bot.spool")
    try:
        import httpx

        with httpx.Client(base_url=f"http://127.0.0.1:{port}/__openclaw__/api/learning") as c:
            assert c.post("/observe", json=obs("before")).json()["recorded"]
            path.rename(tmp_path / "aside.sqlite")
            answers = [c.post("/observe", json=obs(f"r{i}")) for i in range(40)]
            refused = [r for r in answers if r.status_code == 503]
            assert refused and all(r.status_code in (200, 503) for r in answers)
            reason = refused[-1].json()["reason"]
            assert "spool is full" in reason and "\n" not in reason
            health = c.get("/healthz")
            assert health.status_code == 503
    finally:
        server.should_exit = True
        thread.join(timeout=120)
        app.close()
    full = [r for r in caplog.records if "spool is full" in r.getMessage()]
    assert len(full) == 1, [r.getMessage() for r in full]
