"""Hostile input: a catalogue of at least fifty attacks, each with its expected clear refusal,
and property-based fuzzing of every request body. Nothing may answer 500 or leak a traceback."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .conftest import Live

ARM = {"armId": "tool:fs:Read", "tokenCost": 10}


def body(**extra: Any) -> dict[str, Any]:
    return {"traceId": "h", "arms": [ARM], "toolCalls": [{"name": "Read"}], **extra}


DEEP = "[" * 5000 + "]" * 5000
MB = "x" * 1_100_000

# (route, raw JSON body or object, expected status, words the error must contain)
CATALOGUE: list[tuple[str, Any, int, str]] = [
    ("/observe", body(traceId="<!channel>"), 200, ""),
    ("/observe", body(traceId="@everyone"), 200, ""),
    ("/observe", body(traceId="a\x00b"), 400, "traceId holds a NUL"),
    ("/observe", body(traceId="a\nb"), 400, "control characters"),
    ("/observe", body(traceId="\u202etxt"), 400, "control characters"),
    ("/observe", body(traceId="x" * 257), 400, "longer than 256"),
    ("/observe", body(traceId=""), 400, "traceId"),
    ("/observe", body(traceId=None), 400, "traceId"),
    ("/observe", body(traceId=123), 400, "traceId"),
    (
        "/observe",
        body(arms=[{"armId": "tool:fs:Read'; DROP TABLE traces;--", "tokenCost": 1}]),
        200,
        "",
    ),
    (
        "/observe",
        body(arms=[{"armId": "tool:fs:Read\u0000", "tokenCost": 1}]),
        400,
        "arms[0].armId",
    ),
    ("/observe", body(arms=[{"armId": " tool:fs:Read", "tokenCost": 1}]), 400, "whitespace"),
    ("/observe", body(arms=[{"armId": "TOOL:fs:Read", "tokenCost": 1}]), 400, "unknown arm type"),
    (
        "/observe",
        body(arms=[{"armId": "t\u043e\u043el:fs:Read", "tokenCost": 1}]),
        400,
        "unknown arm type",
    ),
    ("/observe", body(arms=[{"armId": "tool::Read", "tokenCost": 1}]), 400, "category"),
    ("/observe", body(arms=[{"armId": "tool:fs:", "tokenCost": 1}]), 400, "name"),
    (
        "/observe",
        body(arms=[{"armId": "tool:fs:" + "a" * 600, "tokenCost": 1}]),
        400,
        "at most 512",
    ),
    ("/observe", body(arms=[{"armId": "tool:fs:Read", "tokenCost": -5}]), 400, "tokenCost"),
    ("/observe", body(arms=[{"armId": "tool:fs:Read", "tokenCost": 1.5}]), 400, "tokenCost"),
    ("/observe", body(arms=[{"armId": "tool:fs:Read", "tokenCost": 1e400}]), 400, ""),
    ("/observe", body(arms=[ARM, ARM]), 400, "repeated arm id"),
    (
        "/observe",
        body(arms=[{"armId": "tool:fs:Read", "tokenCost": 1, "included": "yes"}]),
        400,
        "included",
    ),
    ("/observe", body(arms=[{"armId": "memory:m:x", "content": 42}]), 400, "content"),
    ("/observe", body(arms="tool:fs:Read"), 400, "arms"),
    ("/observe", body(arms=[None]), 400, "arms[0]"),
    ("/observe", body(toolCalls=[{"name": ""}]), 400, "name"),
    ("/observe", body(toolCalls=[{"name": "Read", "meta": [1, 2]}]), 400, "meta"),
    ("/observe", body(toolCalls=[{"name": "Read", "meta": {"x": "y" * 70_000}}]), 400, "metadata"),
    ("/observe", body(assistantTexts=["ok", 5]), 400, "assistantTexts"),
    ("/observe", body(usage={"input": -1}), 400, "input"),
    ("/observe", body(usage={"input": "NaN"}), 400, "input"),
    ("/observe", body(usage=[1, 2]), 400, "usage"),
    ("/observe", body(durationMs=-3), 400, "duration"),
    ("/observe", body(timestamp=-1), 400, "timestamp"),
    ("/observe", body(isBaseline="true"), 400, "isBaseline"),
    ("/observe", body(aborted=1), 400, "aborted"),
    ("/observe", body(error={"msg": "x"}), 400, "error"),
    ("/observe", body(context=[1]), 400, "context"),
    (
        "/observe",
        '{"traceId": "n", "arms": [{"armId": "tool:fs:Read", "tokenCost": NaN}]}',
        400,
        "not valid JSON",
    ),
    (
        "/observe",
        '{"traceId": "n", "arms": [{"armId": "tool:fs:Read", "tokenCost": Infinity}]}',
        400,
        "not valid JSON",
    ),
    ("/observe", DEEP, 400, ""),
    ("/observe", '{"traceId": "dup", "traceId": "dup2", "arms": []}', 400, "arms"),
    ("/observe", "\ufeff{}", 400, ""),
    ("/observe", "null", 400, ""),
    ("/observe", '"just a string"', 400, ""),
    ("/observe", MB, 413, "larger than"),
    ("/select", {"arms": [{"armId": "../../etc/passwd", "tokenCost": 1}]}, 400, "arm"),
    ("/select", {"arms": [{"armId": "file:workspace:../../etc/passwd", "tokenCost": 1}]}, 200, ""),
    ("/select", {"arms": [{"armId": "tool:fs:Read"}] * 2}, 400, "unique"),
    ("/select", {"arms": [ARM], "context": "x"}, 400, "context"),
    ("/reward", {"arm_id": "tool:fs:Read", "reward": float("nan")}, 400, ""),
    ("/reward", {"arm_id": "tool:fs:Read", "reward": -0.1}, 400, "reward must be"),
    ("/reward", {"arm_id": "tool:fs:Read", "reward": True}, 400, "reward must be"),
    ("/reward", {"arm_id": "<@U123>", "reward": 1}, 404, "unknown arm"),
    ("/reward", {"arm_id": "x" * 600}, 400, "longer than 512"),
    ("/reward", {"arm_id": "tool:fs:Read", "reason": "r" * 600}, 400, "longer than 500"),
    ("/reward", {"arm_id": ["tool:fs:Read"]}, 400, "arm_id (string) is required"),
    ("/reset", {"arm_ids": [], "confirm": True}, 400, "arm_ids"),
    ("/reset", {"arm_ids": [1, 2], "confirm": True}, 400, "arm_ids"),
    ("/reset", {"arm_ids": ["tool:nope:X"], "confirm": True}, 404, "unknown arm"),
    ("/phase", {"phase": "ACTIVE; DROP"}, 400, "phase must be"),
    ("/phase", {"phase": "active", "confirm": "yes"}, 400, "confirm must be"),
    (
        "/command",
        {"text": "reset all confirm" + "\x00" * 10, "actor": "a" * 200},
        400,
        "text holds a NUL",
    ),
    ("/command", {"text": "x" * 2000}, 200, ""),
    ("/command", {"confirm": "../../x"}, 200, ""),
    ("/command", {"text": 5}, 400, "text"),
]


@pytest.mark.parametrize(("route", "payload", "status", "words"), CATALOGUE)
def test_hostile_catalogue(live: Live, route: str, payload: Any, status: int, words: str) -> None:
    with live.client() as c:
        if route != "/reward" or "tool:fs:Read" in json.dumps(payload, default=str):
            c.post("/observe", json=body(traceId="seed-arm"))
        if isinstance(payload, str):
            r = c.post(route, content=payload.encode())
        else:
            r = c.post(route, content=json.dumps(payload, allow_nan=True).encode())
    assert r.status_code == status, r.text[:300]
    assert r.headers["content-type"].startswith("application/json")
    text = r.text
    assert "Traceback" not in text and 'File "' not in text
    if status >= 400:
        assert words in r.json()["error"]
    if route == "/command" and status == 200:
        reply = r.json()
        assert reply["kind"] == "error"


def test_catalogue_is_large_enough() -> None:
    assert len(CATALOGUE) >= 50


JSON = st.recursive(
    st.none() | st.booleans() | st.floats(allow_nan=False) | st.integers() | st.text(max_size=40),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=12), children, max_size=6)
    ),
    max_leaves=30,
)
FIELDS = st.sampled_from(
    [
        "traceId",
        "arms",
        "toolCalls",
        "usage",
        "assistantTexts",
        "armId",
        "tokenCost",
        "arm_id",
        "reward",
        "outcome",
        "phase",
        "confirm",
        "arm_ids",
        "reports",
        "text",
        "context",
    ]
)
SHAPED = st.dictionaries(FIELDS, JSON, max_size=8)


@pytest.mark.parametrize(
    "route", ["/observe", "/select", "/reward", "/reset", "/phase", "/command"]
)
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(payload=st.one_of(JSON, SHAPED))
def test_no_body_makes_the_server_fail(live: Live, route: str, payload: Any) -> None:
    with httpx.Client(
        base_url=live.api, headers={"Authorization": "Bearer test-token-0123456789abcdef"}
    ) as c:
        r = c.post(route, content=json.dumps(payload).encode())
    assert r.status_code < 500, r.text[:300]
    assert r.headers["content-type"].startswith("application/json")
