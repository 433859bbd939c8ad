"""A real uvicorn server on a free port, serving the API over a real database."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import uvicorn

from learning_bot.adapters.http import HttpSettings, create_app
from learning_bot.app import App, build_app
from learning_bot.engine import LearningConfig, Phase
from learning_bot.settings import Settings

TOKEN = "test-token-0123456789abcdef"
BASE = "/__openclaw__/api/learning"


@dataclass
class Live:
    url: str
    app: App
    server: uvicorn.Server
    thread: threading.Thread

    @property
    def api(self) -> str:
        return self.url + BASE

    def client(self, token: str | None = TOKEN) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.api, headers=headers, timeout=30)


def start_server(
    database_url: str,
    *,
    token: str | None = TOKEN,
    max_body: int = 256 * 1024,
    phase: Phase = Phase.ACTIVE,
) -> Live:
    app = build_app(
        Settings(
            database_url=database_url,
            config=LearningConfig(phase=phase, token_budget=1000),
            cache_ttl=0.0,
        )
    )
    asgi = create_app(app.bus, HttpSettings(api_token=token, max_body_bytes=max_body))
    config = uvicorn.Config(asgi, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 120
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the server did not start")
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    return Live(f"http://127.0.0.1:{port}", app, server, thread)


def stop_server(live: Live) -> None:
    live.server.should_exit = True
    live.thread.join(timeout=120)
    live.app.close()


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    path: Path = tmp_path_factory.mktemp("http") / "api.sqlite"
    server = start_server(f"sqlite:///{path}")
    yield server
    stop_server(server)
