"""Single requests that used to stop learning: each reproduction is answered clearly and leaves
storage whole (SQLite and PostgreSQL), and `db verify` passes after each."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from learning_bot.adapters.http import HttpSettings, create_app
from learning_bot.adapters.http.server import header_timeout_protocol
from learning_bot.cli import main

from .conftest import BASE, Live, start_server, stop_server

ARM = {"armId": "tool:fs:Read", "tokenCost": 10}


def obs(trace_id: str, **extra: Any) -> dict[str, Any]:
    return {"traceId": trace_id, "arms": [ARM], "toolCalls": [{"name": "Read"}], **extra}


@pytest.fixture
def served(
    database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Live, str]]:
    """A server in the default setup (no token), its spool under tmp_path."""
    monkeypatch.setenv("LEARNING_BOT_SPOOL_DIR", str(tmp_path / "spool"))
    live = start_server(database_url, token=None)
    yield live, database_url
    stop_server(live)


def jpost(c: httpx.Client, route: str, body: Any) -> httpx.Response:
    """POST `body` as JSON with non-ASCII escaped, so that lone surrogates travel as `\\ud800`
    the way a JavaScript client sends them."""
    return c.post(route, content=json.dumps(body), headers={"content-type": "application/json"})


def verify_passes(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    code = main(["--database-url", url, "db", "verify"])
    out = capsys.readouterr().out
    assert code == 0, out


def spooled_files() -> list[Path]:
    return list(Path(os.environ["LEARNING_BOT_SPOOL_DIR"]).glob("p*/*.jsonl"))


# (extra fields of an observe body, the field the refusal names)
REFUSED_OBSERVE: list[tuple[dict[str, Any], str]] = [
    ({"usage": {"total": 2**63}}, "usage.total"),
    ({"usage": {"input": 2**63}}, "usage.input"),
    ({"usage": {"total": 5 * 10**18}}, "usage.total"),
    ({"durationMs": 2**64}, "duration"),
    ({"timestamp": 2**63}, "timestamp"),
    ({"timestamp": 1e300}, "timestamp"),
    ({"arms": [{"armId": "tool:fs:Read", "tokenCost": 1e308}]}, "tokenCost"),
    ({"arms": [{"armId": "tool:fs:Read", "tokenCost": 10**30}]}, "tokenCost"),
    ({"arms": [{"armId": "tool:fs:Read", "tokenCost": 10, "label": "x\ud800"}]}, "label"),
    ({"arms": [{"armId": "tool:fs:R\ud800", "tokenCost": 10}]}, "arms[0].armId"),
    ({"traceId": "t-\ud800"}, "trace"),
    ({"error": "boom\x00"}, "error"),
    ({"error": "boom\ud800"}, "error"),
    ({"toolCalls": [{"name": "Read\x00"}]}, "toolCalls[0].name"),
    ({"context": {"x": 2**70}}, "context"),
    ({"context": {"k\x00": 1}}, "context"),
    ({"context": {"x": "\ud800"}}, "context"),
]


def test_values_storage_would_refuse_are_400_naming_the_field(
    served: tuple[Live, str], capsys: pytest.CaptureFixture[str]
) -> None:
    live, url = served
    with live.client(None) as c:
        for i, (extra, field) in enumerate(REFUSED_OBSERVE):
            r = jpost(c, "/observe", obs(f"bad-{i}", **extra))
            assert r.status_code == 400, (extra, r.text)
            assert field in r.json()["error"], (extra, r.text)
        # Infinity cannot even be written as JSON: the body is refused whole.
        r = c.post(
            "/observe",
            content=json.dumps(obs("inf")).replace('"Read"}]', '"Read"}], "context": {"x": 1e999}'),
            headers={"content-type": "application/json"},
        )
        assert r.status_code == 400 and "1e999" in r.json()["error"]
        r = c.post("/select", json={"arms": [{"armId": "tool:fs:Read", "tokenCost": 2**63}]})
        assert r.status_code == 400 and "tokenCost" in r.json()["error"]
        r = c.post("/select", json={"arms": [ARM], "context": {"x": 2**70}})
        assert r.status_code == 400 and "context" in r.json()["error"]
        r = jpost(c, "/select", {"arms": [ARM], "context": {"x": "\ud800"}})
        assert r.status_code == 400 and "context" in r.json()["error"]
        assert c.post("/observe", json=obs("good")).json()["recorded"]
        traces = c.get("/traces").json()
        summary = c.get("/summary")
    assert [t["traceId"] for t in traces["traces"]] == ["good"]
    assert summary.status_code == 200 and summary.json()["traceCount"] == 1
    assert not spooled_files()
    verify_passes(url, capsys)


def test_a_forged_cross_site_reset_or_phase_is_refused(
    served: tuple[Live, str], capsys: pytest.CaptureFixture[str]
) -> None:
    live, url = served
    with live.client(None) as c:
        assert c.post("/observe", json=obs("seed")).json()["recorded"]
        before = c.get("/posteriors").json()
        assert before[0]["pulls"] == 1
        forged = {"content-type": "text/plain", "origin": "https://evil.example"}
        for route, body in (("/reset", {"confirm": True}), ("/phase", {"phase": "passive"})):
            r = c.post(route, content=json.dumps(body).encode(), headers=forged)
            assert r.status_code == 403, r.text
            assert "cross-site" in r.json()["error"]
        # A same-origin text/plain post is refused as well: only JSON bodies are read.
        r = c.post("/reset", content=b"{}", headers={"content-type": "text/plain"})
        assert r.status_code == 415
        r = c.post(
            "/reset", json={}, headers={"referer": "https://evil.example/page", "origin": ""}
        )
        assert r.status_code == 403
        assert c.get("/posteriors").json() == before
        assert c.get("/config").json()["phase"] == "active"
        # The dashboard's own requests (same origin, JSON) still work.
        own = {"origin": live.url}
        r = c.post("/phase", json={"phase": "passive", "confirm": True}, headers=own)
        assert r.status_code == 200 and r.json()["changed"]
    verify_passes(url, capsys)


def test_a_configured_cors_origin_may_write(sqlite_url: str) -> None:
    from learning_bot.app import build_app
    from learning_bot.settings import Settings

    app = build_app(Settings(database_url=sqlite_url))
    asgi = create_app(app.bus, HttpSettings(cors_origins=("https://tools.example",)))
    config = uvicorn.Config(asgi, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}{BASE}") as c:
            allowed = {"origin": "https://tools.example"}
            r = c.post("/observe", json=obs("cors"), headers=allowed)
            assert r.status_code == 200 and r.json()["recorded"]
            r = c.post("/observe", json=obs("evil"), headers={"origin": "https://evil.example"})
            assert r.status_code == 403
            assert c.get("/summary").json()["traceCount"] == 1
    finally:
        server.should_exit = True
        thread.join(timeout=120)
        app.close()


def test_reads_create_no_learner(
    served: tuple[Live, str], capsys: pytest.CaptureFixture[str]
) -> None:
    live, url = served
    with live.client(None) as c:
        assert c.post("/observe?learner=typed", json=obs("one")).status_code == 200
        loaded = len(live.app.services.loaded())
        for route in ("/summary", "/posteriors", "/traces", "/config", "/healthz", "/timeseries"):
            r = c.get(route, params={"learner": "typo"})
            assert r.status_code == 404, (route, r.text)
            message = r.json()["error"]
            assert "unknown learner 'typo' (known: " in message and "typed" in message
            assert "did you mean 'typed'?" in message
        for bad in ("a\x00b", "a\r\nb", "x" * 65, "sp ace"):
            r = c.get("/summary", params={"learner": bad})
            assert r.status_code == 400 and "learner name" in r.json()["error"]
            r = c.post("/observe", params={"learner": bad}, json=obs("n"))
            assert r.status_code == 400
        r = c.post("/command?learner=typo", json={"text": "status"})
        assert r.json()["kind"] == "error" and "unknown learner 'typo'" in r.json()["summary"]
    assert len(live.app.services.loaded()) == loaded
    assert "typo" not in live.app.store.learner_names()  # type: ignore[attr-defined]
    verify_passes(url, capsys)


def test_the_cli_neither_creates_a_learner_by_reading(
    sqlite_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--database-url", sqlite_url, "status"]) == 0
    capsys.readouterr()
    assert main(["--database-url", sqlite_url, "--learner", "typo", "status"]) != 0
    out = capsys.readouterr()
    assert "unknown learner 'typo'" in out.out + out.err
    assert main(["--database-url", sqlite_url, "--learner", "typo", "export"]) != 0
    out = capsys.readouterr()
    assert "unknown learner 'typo'" in out.out + out.err
    assert main(["--database-url", sqlite_url, "learner", "create", "team-b"]) == 0
    assert "Created learner 'team-b'" in capsys.readouterr().out
    assert main(["--database-url", sqlite_url, "learner", "create", "team-b"]) == 0
    assert "already exists" in capsys.readouterr().out
    assert main(["--database-url", sqlite_url, "learner", "create", "bad name"]) == 2
    capsys.readouterr()
    assert main(["--database-url", sqlite_url, "--learner", "team-b", "status"]) == 0
    from learning_bot.storage import SqlStore

    store = SqlStore(sqlite_url)
    assert store.learner_names() == ["default", "team-b"]
    store.close()


def test_a_slow_request_head_is_dropped_and_a_slow_body_is_408(sqlite_url: str) -> None:
    from learning_bot.app import build_app
    from learning_bot.settings import Settings

    app = build_app(Settings(database_url=sqlite_url))
    asgi = create_app(app.bus, HttpSettings(body_timeout_seconds=0.5))
    config = uvicorn.Config(
        asgi,
        host="127.0.0.1",
        port=0,
        log_level="warning",
        lifespan="off",
        http=header_timeout_protocol(0.5),
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as slow:
            slow.sendall(b"GET " + BASE.encode() + b"/healthz HTTP/1.1\r\nHost: x\r\n")
            slow.settimeout(10)
            assert slow.recv(100) == b""  # closed by the server, not by us
        with socket.create_connection(("127.0.0.1", port), timeout=10) as slow:
            slow.sendall(
                b"POST " + BASE.encode() + b"/observe HTTP/1.1\r\nHost: x\r\n"
                b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"
            )
            slow.settimeout(10)
            answer = slow.recv(4096)
            assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
        with httpx.Client(base_url=f"http://127.0.0.1:{port}{BASE}") as c:
            assert c.get("/healthz").status_code == 200
    finally:
        server.should_exit = True
        thread.join(timeout=120)
        app.close()


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.floats()
    | st.integers()
    | st.integers(min_value=2**62, max_value=2**80)
    | st.text(max_size=20)
    | st.sampled_from(["\x00", "a\ud800", "\r\n", "tool:fs:Read"]),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=5)
    ),
    max_leaves=25,
)
ARMISH = st.fixed_dictionaries(
    {"armId": st.sampled_from(["tool:fs:Read", "tool:fs:Write", "memory:m:x"])},
    optional={"tokenCost": JSON, "label": JSON, "included": JSON},
)
OBSERVE = st.fixed_dictionaries(
    {"traceId": st.text(max_size=12) | JSON, "arms": st.lists(ARMISH, max_size=3) | JSON},
    optional={
        "toolCalls": st.lists(st.fixed_dictionaries({"name": JSON}), max_size=2) | JSON,
        "usage": st.dictionaries(st.sampled_from(["input", "output", "total"]), JSON) | JSON,
        "durationMs": JSON,
        "timestamp": JSON,
        "context": JSON,
        "error": JSON,
        "assistantTexts": JSON,
    },
)
SELECT = st.fixed_dictionaries(
    {"arms": st.lists(ARMISH, max_size=3) | JSON}, optional={"context": JSON}
)
DEEP = st.integers(min_value=30, max_value=3000).map(lambda n: "[" * n + "]" * n)


def _raw(payload: Any) -> bytes:
    if isinstance(payload, str) and payload.startswith("["):
        return payload.encode()
    return json.dumps(payload, allow_nan=True).encode("utf-8", "surrogatepass")


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    live = start_server(f"sqlite:///{tmp_path_factory.mktemp('fuzz') / 'f.sqlite'}", token=None)
    yield live
    stop_server(live)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    route=st.sampled_from(["/observe", "/select"]),
    payload=st.one_of(OBSERVE, SELECT, JSON, DEEP),
)
def test_arbitrary_bodies_never_break_the_learner(fuzzed: Live, route: str, payload: Any) -> None:
    with fuzzed.client(None) as c:
        r = c.post(route, content=_raw(payload), headers={"content-type": "application/json"})
        assert r.status_code < 500, r.text[:300]
        assert r.headers["content-type"].startswith("application/json")
        # Whatever was stored reads back, and the learner still answers.
        for read in ("/summary", "/posteriors", "/traces", "/timeseries"):
            assert c.get(read).status_code == 200, read
        status = c.post("/command", json={"text": "status"})
        assert status.status_code == 200 and status.json()["kind"] != "error"


def test_without_a_token_writes_must_be_addressed_to_loopback(sqlite_url: str) -> None:
    """A DNS-rebound name (Origin and Host both the attacker's) cannot write either."""
    from starlette.testclient import TestClient

    from learning_bot.adapters.http.settings import LOOPBACK_NAMES
    from learning_bot.app import build_app
    from learning_bot.settings import Settings

    app = build_app(Settings(database_url=sqlite_url))
    asgi = create_app(app.bus, HttpSettings(allowed_hosts=LOOPBACK_NAMES))
    try:
        with TestClient(asgi, base_url="http://rebound.example:8787") as c:
            r = c.post(
                BASE + "/observe", json=obs("x"), headers={"origin": "http://rebound.example:8787"}
            )
            assert r.status_code == 403 and "rebound.example" in r.json()["error"]
        with TestClient(asgi, base_url="http://127.0.0.1:8787") as c:
            r = c.post(
                BASE + "/observe", json=obs("x"), headers={"origin": "http://127.0.0.1:8787"}
            )
            assert r.status_code == 200 and r.json()["recorded"]
            r = c.post(BASE + "/observe", json=obs("y"), headers={"host": "[::1]:8787"})
            assert r.status_code == 200
    finally:
        app.close()
