"""Every route of `learning-bot serve` that writes and is not signed by a chat platform (the
learning API, `/v1`, `/mcp`) refuses cross-site and DNS-rebinding requests, with and without
a token configured, and still serves the legitimate loopback ones: one guard for them all."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from tests.e2e.launch import SERVE, environment, free_port

pytestmark = pytest.mark.slow

TOKEN = "test-token-0123456789abcdef"
BASE = "/__openclaw__/api/learning"
LEARNER = "default"
ARMS = [
    {"armId": "tool:fs:Read", "tokenCost": 120},
    {"armId": "tool:exec:Bash", "tokenCost": 200},
]
CANDIDATES = [{"id": a["armId"], "metadata": {}, "token_cost": a["tokenCost"]} for a in ARMS]


def report(trace_id: str) -> dict[str, Any]:
    return {"traceId": trace_id, "arms": ARMS, "toolCalls": [{"name": "Read"}]}


def mcp_call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }


MCP_INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"},
    },
}

WRITES: list[tuple[str, dict[str, Any]]] = [
    (f"{BASE}/select", {"arms": ARMS}),
    (f"{BASE}/observe", report("attack")),
    (f"{BASE}/reward", {"arm_id": "tool:fs:Read", "outcome": "rejected"}),
    (f"{BASE}/reset", {}),
    (f"{BASE}/reset/undo", {}),
    (f"{BASE}/phase", {"phase": "passive", "confirm": True}),
    (f"{BASE}/settings", {"settings": {"halfLife": 1}}),
    (f"{BASE}/command", {"text": "reset"}),
    ("/v1/learning/select", {"learner": LEARNER, "candidates": CANDIDATES}),
    ("/v1/learning/observe", {"learner": LEARNER, "arm_id": "tool:fs:Read", "outcome": "rejected"}),
    ("/v1/learning/reset", {"learner": LEARNER}),
    ("/v1/learning/sessions/start", {"learner": LEARNER, "session_name": "s"}),
    ("/v1/learning/sessions/end", {"session_id": "x"}),
    ("/mcp", mcp_call("qortex_learning_reset", {"learner": LEARNER})),
    ("/mcp", mcp_call("learning_phase", {"phase": "passive", "confirm": True})),
    ("/mcp", mcp_call("learning_config", {"settings": {"halfLife": 1}})),
]
"""Every writing route, each with the body that would do the most harm."""


@dataclass
class Served:
    port: int
    token: str | None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def bearer(self, token: str | None = None) -> dict[str, str]:
        given = token or self.token
        return {"Authorization": f"Bearer {given}"} if given else {}


@pytest.fixture(scope="module", params=[None, TOKEN], ids=["no token", "token"])
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    token: str | None = request.param
    root = tmp_path_factory.mktemp("guard")
    settings = {"LEARNING_BOT_PHASE": "active", "LEARNING_BOT_SPOOL_DIR": str(root / "spool")}
    if token:
        settings["LEARNING_BOT_API_TOKEN"] = token
    port = free_port()
    argv = [part.replace("{port}", str(port)) for part in SERVE]
    with (root / "out.txt").open("w") as out:
        proc = subprocess.Popen(
            argv, env=environment(root, settings), stdout=out, stderr=subprocess.STDOUT
        )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/v1/health").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline or proc.poll() is not None:
                pytest.fail("serve did not answer\n" + (root / "out.txt").read_text())
            time.sleep(0.05)
        yield Served(port, token)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=120) == 0, (root / "out.txt").read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def post(
    served: Served, path: str, body: dict[str, Any], headers: dict[str, str], *, raw: bool = False
) -> httpx.Response:
    """A POST with exactly these headers (Host included, when given) besides the client's."""
    sent = {"Accept": "application/json, text/event-stream", **headers}
    if not raw:
        sent.setdefault("Content-Type", "application/json")
    return httpx.post(served.url + path, content=json.dumps(body).encode(), headers=sent)


def state(served: Served) -> Any:
    """Everything an attack could change: posteriors, phase, traces, both views."""
    with httpx.Client(base_url=served.url) as c:
        return (
            c.get(f"{BASE}/posteriors").json(),
            c.get(f"{BASE}/config").json()["phase"],
            c.get(f"{BASE}/traces").json()["total"],
            c.get(f"/v1/learning/{LEARNER}/posteriors").json(),
        )


def attacks(served: Served) -> list[tuple[str, dict[str, str], int]]:
    """(what, headers, the status it must get). A page on another site can neither read nor
    send the token; a rebound name is the attacker's host resolving to 127.0.0.1."""
    port, with_token = served.port, served.bearer()
    rebound = 401 if served.token else 403
    found = [
        ("cross-site", {"Origin": "https://evil.example", **with_token}, 403),
        ("cross-site, no token", {"Origin": "https://evil.example"}, 403),
        (
            "cross-site form",
            {"Origin": "https://evil.example", "Content-Type": "text/plain", **with_token},
            403,
        ),
        ("cross-site, Referer only", {"Referer": "https://evil.example/x", **with_token}, 403),
        (
            "DNS rebinding",
            {"Host": f"evil.example:{port}", "Origin": f"http://evil.example:{port}"},
            rebound,
        ),
        ("DNS rebinding, no Origin", {"Host": f"evil.example:{port}"}, rebound),
        ("a form without an Origin", {"Content-Type": "text/plain", **with_token}, 415),
    ]
    if served.token:
        found += [
            ("no token", {}, 401),
            ("a wrong token", served.bearer("wrong-token-0123456789abc"), 401),
        ]
    return found


def test_every_writing_route_refuses_cross_site_and_rebound_requests(served: Served) -> None:
    seeded = post(served, f"{BASE}/observe", report("seed"), served.bearer())
    assert seeded.status_code == 200 and seeded.json()["recorded"], seeded.text
    before = state(served)
    assert before[0] and before[1] == "active"
    for what, headers, status in attacks(served):
        for path, body in WRITES:
            r = post(served, path, body, headers, raw="Content-Type" in headers)
            assert r.status_code == status, f"{what} {path}: {r.status_code} {r.text[:200]}"
            assert "error" in r.json(), f"{what} {path}: {r.text[:200]}"
    assert state(served) == before


def test_the_legitimate_loopback_requests_still_write(served: Served) -> None:
    own = served.bearer()
    for path, body in WRITES:
        for headers in (own, {**own, "Origin": served.url}, {**own, "Host": "localhost"}):
            r = post(served, path, body, headers)
            assert r.status_code not in (401, 403, 415), f"{path} {headers}: {r.text[:200]}"
            assert r.status_code < 500, f"{path}: {r.text[:200]}"
    r = post(served, f"{BASE}/observe", report("own"), own)
    assert r.status_code == 200 and r.json()["recorded"]
    r = post(served, "/mcp", MCP_INITIALIZE, own)
    assert r.status_code == 200 and r.json()["result"]["serverInfo"]["name"] == "learning-bot"
    r = post(served, "/v1/learning/sessions/start", {"learner": LEARNER, "session_name": "t"}, own)
    assert r.status_code == 200 and r.json()["session_id"]
    assert state(served)[1] == "passive"  # the phase change, written by the last request of it
