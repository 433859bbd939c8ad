"""Every route of the HTTP API against a real server: fields, bounds, errors, auth, limits."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
import jsonschema
import pytest

from learning_bot.adapters.http.openapi import openapi_document

from .conftest import Live, start_server, stop_server

SPEC = openapi_document()


def _json_schema(node: Any) -> Any:
    """OpenAPI 3.0 schema -> JSON Schema (`nullable: true` becomes a null type)."""
    if isinstance(node, list):
        return [_json_schema(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: _json_schema(v) for k, v in node.items() if k != "nullable"}
    if node.get("nullable") and "type" in node:
        out["type"] = [node["type"], "null"]
    return out


def conforms(name: str, data: Any) -> None:
    schema = {
        "$ref": f"#/components/schemas/{name}",
        "components": _json_schema(SPEC["components"]),
    }
    jsonschema.validate(data, schema, cls=jsonschema.Draft4Validator)


def arm(arm_id: str, cost: int = 100, **extra: Any) -> dict[str, Any]:
    return {"armId": arm_id, "tokenCost": cost, **extra}


ARMS = [
    arm("tool:fs:Read", 120),
    arm("tool:web:WebSearch", 400),
    arm("skill:coding:main", 200),
    arm("file:workspace:README.md", 300),
    arm("memory:project:deploy", 50, content="Deploys always go through the staging cluster."),
]


def report(trace_id: str, calls: list[str], **extra: Any) -> dict[str, Any]:
    return {
        "traceId": trace_id,
        "arms": ARMS,
        "toolCalls": [{"name": c} for c in calls],
        "assistantTexts": ["I used the coding skill and README.md"],
        "usage": {"input": 1500, "output": 300},
        "channel": "C-http",
        "provider": "anthropic",
        "model": "claude",
        **extra,
    }


@pytest.fixture(scope="module")
def seeded(live: Live) -> Live:
    with live.client() as c:
        for i in range(30):
            r = c.post(
                "/observe",
                json=report(f"h{i}", ["Read"] if i % 2 else ["WebSearch"], isBaseline=i % 5 == 0),
            )
            assert r.status_code == 200, r.text
    return live


def test_read_routes_match_the_spec(seeded: Live) -> None:
    with seeded.client(None) as c:
        summary = c.get("/summary").json()
        conforms("Summary", summary)
        assert summary["traceCount"] == 30 and summary["armCount"] == 5
        assert summary["baseline"]["baselineRuns"] == 6
        config = c.get("/config").json()
        conforms("Config", config)
        assert config["phase"] == "active" and config["tokenBudget"] == 1000
        assert (config["policy"], config["halfLife"]) == ("pooled-forgetting-per-token", 50.0)
        posteriors = c.get("/posteriors").json()
        for p in posteriors:
            conforms("Posterior", p)
        means = [p["mean"] for p in posteriors]
        assert means == sorted(means, reverse=True)
        page = c.get("/traces", params={"limit": 5}).json()
        conforms("TracePage", page)
        assert page["total"] == 30 and len(page["traces"]) == 5
        assert page["traces"][0]["traceId"] == "h29"
        arms = {a["armId"]: a for a in page["traces"][0]["arms"]}
        assert arms["tool:fs:Read"]["referenced"] and arms["tool:fs:Read"]["tokenCost"] == 120
        for metric in ("tokens", "convergence"):
            for window in ("1h", "1d"):
                series = c.get("/timeseries", params={"metric": metric, "window": window}).json()
                conforms("Timeseries", series)
                assert series["buckets"]
        health = c.get("/healthz").json()
        assert health["ok"] is True
        html = c.get("/dashboard")
        assert html.status_code == 200 and "text/html" in html.headers["content-type"]
        assert not re.search(r"(src|href)\s*=\s*[\"']?(https?:)?//", html.text)
        assert "@import" not in html.text and "cdn" not in html.text.lower()


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"limit": 0}, "limit must be"),
        ({"limit": 1001}, "limit must be"),
        ({"limit": "x"}, "limit must be"),
        ({"offset": -1}, "offset must be"),
    ],
)
def test_pagination_bounds(seeded: Live, params: dict[str, Any], message: str) -> None:
    with seeded.client(None) as c:
        r = c.get("/traces", params=params)
        assert r.status_code == 400 and message in r.json()["error"]
    with seeded.client(None) as c:
        assert len(c.get("/traces", params={"limit": 1000}).json()["traces"]) == 30
        assert c.get("/traces", params={"offset": 29}).json()["traces"][0]["traceId"] == "h0"
        assert c.get("/traces", params={"offset": 500}).json()["traces"] == []


def test_unknown_route_and_wrong_method(live: Live) -> None:
    with live.client() as c:
        r = c.get("/nope")
        assert r.status_code == 404 and r.json() == {"error": "Unknown learning API route"}
        r = c.delete("/summary")
        assert r.status_code == 405 and "error" in r.json()
        assert c.get("/reset").status_code == 405
        assert c.post("/summary").status_code == 405


@pytest.mark.parametrize("path", ["/select", "/observe", "/reward", "/reset", "/phase", "/command"])
@pytest.mark.parametrize("token", [None, "wrong-token-0123456789", "Bearer"])
def test_mutations_need_the_token(live: Live, path: str, token: str | None) -> None:
    with live.client(token) as c:
        r = c.post(path, json={})
        assert r.status_code == 401
        assert "bearer token" in r.json()["error"]
        assert r.headers["www-authenticate"] == "Bearer"


def test_select_and_observe(live: Live) -> None:
    with live.client() as c:
        r = c.post("/select", json={"arms": ARMS})
        assert r.status_code == 200
        conforms("Selection", r.json())
        assert "tool:fs:Read" in r.json()["selected"]
        r = c.post("/observe", json=report("sel-1", ["Read"]))
        conforms("ObserveResult", r.json())
        assert r.json()["recorded"] is True
        again = c.post("/observe", json=report("sel-1", ["Read"])).json()
        assert again["duplicate"] is True and "already recorded" in again["message"]
        batch = c.post("/observe", json={"reports": [report("b1", ["Read"]), report("b2", [])]})
        conforms("ObserveBatchResult", batch.json())
        assert [x["skipped"] for x in batch.json()["results"]] == [None, "conversational"]


def test_a_repeated_inventory_is_answered_from_what_this_request_says(live: Live) -> None:
    """The server keeps the inventories it has read; a request with the same ids and other
    costs, labels or value kinds is read for what it says."""
    with live.client() as c:
        for _ in range(3):
            answer = c.post("/select", json={"arms": ARMS}).json()
            assert "tool:fs:Read" in answer["selected"] and answer["usedTokens"] < 5000
        dear = [{**a, "tokenCost": 5000} if a["armId"] == "tool:fs:Read" else a for a in ARMS]
        answer = c.post("/select", json={"arms": dear}).json()
        assert "tool:fs:Read" in answer["selected"]  # a seed: always in, whatever it costs
        assert answer["usedTokens"] >= 5000 and answer["overBudget"] is True
        flagged = [{**a, "tokenCost": True} if a["armId"] == "tool:fs:Read" else a for a in ARMS]
        ones = [{**a, "tokenCost": 1} if a["armId"] == "tool:fs:Read" else a for a in ARMS]
        assert c.post("/select", json={"arms": ones}).status_code == 200
        r = c.post("/select", json={"arms": flagged})
        assert r.status_code == 400 and "arms[0].tokenCost" in r.json()["error"]
        r = c.post("/select", json={"arms": [*ARMS[:1], {**ARMS[1], "label": "\u0000"}]})
        assert r.status_code == 400 and "label" in r.json()["error"]


def test_repeated_arm_ids_are_refused_after_the_context_is_checked(live: Live) -> None:
    with live.client() as c:
        twice = [ARMS[0], ARMS[0]]
        r = c.post("/select", json={"arms": twice, "context": "x"})
        assert r.status_code == 400 and r.json()["error"] == "context must be an object"
        r = c.post("/select", json={"arms": twice})
        assert r.status_code == 400 and "arm ids must be unique" in r.json()["error"]


@pytest.mark.parametrize(
    ("path", "body", "message"),
    [
        ("/select", {}, "arms (array) is required"),
        ("/select", {"arms": []}, "arms (non-empty array) is required"),
        ("/select", {"arms": [{"armId": "nope", "tokenCost": 1}]}, "arms[0]"),
        ("/select", {"arms": [{"armId": "tool:a:b", "tokenCost": -1}]}, "tokenCost"),
        ("/select", {"arms": [{"armId": "tool:a:b", "tokenCost": "x"}]}, "tokenCost"),
        ("/select", [1, 2], "JSON object"),
        ("/observe", {}, "traceId (string) is required"),
        ("/observe", {"traceId": "t", "arms": []}, "arms (non-empty array) is required"),
        ("/observe", {"traceId": "t", "arms": [{"armId": "x:y:z"}]}, "unknown arm type 'x'"),
        ("/observe", {"traceId": "t", "arms": ARMS, "usage": {"input": -1}}, "input"),
        ("/observe", {"traceId": "t" * 300, "arms": ARMS}, "trace_id"),
        ("/observe", {"reports": "x"}, "reports must be a non-empty array"),
        ("/reward", {}, "arm_id (string) is required"),
        ("/reward", {"arm_id": "tool:fs:Read", "reward": 2}, "reward must be a number in [0, 1]"),
        ("/reward", {"arm_id": "tool:fs:Read", "outcome": "maybe"}, "outcome must be"),
        ("/reset", {"arm_ids": "all"}, "arm_ids must be"),
        ("/reset", {"arm_ids": ["x"] * 1001}, "at most 1000"),
        ("/phase", {"phase": "turbo"}, "phase must be passive or active"),
        ("/phase", {}, "phase must be passive or active"),
    ],
)
def test_bad_bodies_name_the_field(live: Live, path: str, body: Any, message: str) -> None:
    with live.client() as c:
        r = c.post(path, json=body)
        assert r.status_code == 400, r.text
        assert message in r.json()["error"]


def test_invalid_json_and_nan(live: Live) -> None:
    with live.client() as c:
        r = c.post("/observe", content=b"{not json", headers={"content-type": "application/json"})
        assert r.status_code == 400 and "not valid JSON" in r.json()["error"]
        r = c.post("/reward", content=b'{"arm_id": "tool:fs:Read", "reward": NaN}')
        assert r.status_code == 400
        deep = "[" * 100_000 + "]" * 100_000
        r = c.post("/observe", content=deep.encode())
        assert r.status_code in (400, 413)


def test_body_over_the_limit_is_refused(live: Live) -> None:
    with live.client() as c:
        big = report("big", ["Read"], assistantTexts=["x" * 400_000])
        r = c.post("/observe", json=big)
        assert r.status_code == 413 and "larger than" in r.json()["error"]

        def chunks() -> Any:
            yield b'{"traceId": "stream", "arms": ['
            for _ in range(40):
                yield b" " * 10_000
            yield b"]}"

        r = c.post("/observe", content=chunks())
        assert r.status_code == 413


def test_reward_reset_and_phase(live: Live) -> None:
    with live.client() as c:
        c.post("/observe", json=report("rr-1", ["Read"]))
        r = c.post("/reward", json={"arm_id": "WebSearch", "reason": "good find"})
        assert r.status_code == 200
        conforms("RewardResult", r.json())
        rewarded = next(p for p in c.get("/posteriors").json() if p["armId"] == r.json()["arm_id"])
        assert r.json() == {
            "ok": True,
            "arm_id": "tool:web:WebSearch",
            "alpha": rewarded["alpha"],
            "beta": rewarded["beta"],
            "mean": rewarded["mean"],
            "pulls": rewarded["pulls"],
            "reward": 1.0,
            "lagged": True,
        }
        assert c.post("/reward", json={"arm_id": "Nope"}).status_code == 404
        before = c.get("/posteriors").json()
        everything = c.post("/reset", json={})  # the original clients confirm on their side
        assert everything.status_code == 200, everything.text
        assert everything.json()["reset_count"] == 5
        assert all(p["pulls"] == 0 for p in c.get("/posteriors").json())
        undone = c.post("/reset/undo", json={})
        assert undone.status_code == 200 and undone.json()["undone"] is True
        assert c.get("/posteriors").json() == before
        assert (
            c.post("/reset", json={"arm_ids": ["tool:none:X"], "confirm": True}).status_code == 404
        )
        done = c.post("/reset", json={"arm_ids": ["Read"], "confirm": True})
        assert done.status_code == 200, done.text
        conforms("ResetResult", done.json())
        assert done.json() == {"learner": "default", "reset_count": 1, "arm_ids": ["tool:fs:Read"]}
        undo = c.post("/command", json={"text": "reset undo confirm", "actor": "ops"})
        assert undo.status_code == 200 and undo.json()["kind"] == "ok"
        assert c.get("/posteriors").json() == before
        assert c.post("/phase", json={"phase": "passive"}).status_code == 409
        changed = c.post("/phase", json={"phase": "passive", "confirm": True})
        assert changed.json()["phase"] == "passive" and changed.json()["changed"] is True
        assert c.get("/config").json()["phase"] == "passive"
        c.post("/phase", json={"phase": "active", "confirm": True})


def test_command_route_returns_the_bus_reply(live: Live) -> None:
    with live.client() as c:
        r = c.post("/command", json={"text": "status top 2", "actor": "cli"})
        conforms("Reply", r.json())
        assert r.json()["kind"] == "info" and len(r.json()["data"]["top"]) == 2
        bad = c.post("/command", json={"text": "frobnicate"}).json()
        assert bad["kind"] == "error" and "unknown command" in bad["summary"]


def test_learner_parameter_isolates_namespaces(live: Live) -> None:
    with live.client() as c:
        c.post("/observe", params={"learner": "team-b"}, json=report("iso-1", ["Read"]))
        assert c.get("/summary", params={"learner": "team-b"}).json()["traceCount"] == 1
        ids = [t["traceId"] for t in c.get("/traces", params={"limit": 1000}).json()["traces"]]
        assert "iso-1" not in ids


def test_open_server_without_token_and_postgres(database_url: str) -> None:
    server = start_server(database_url, token=None)
    try:
        with httpx.Client(base_url=server.api, timeout=30) as c:
            r = c.post("/observe", json=report("open-1", ["Read"]))
            assert r.status_code == 200
            assert c.get("/summary").json()["traceCount"] == 1
    finally:
        stop_server(server)


def test_cors_is_off_by_default(live: Live) -> None:
    with live.client() as c:
        r = c.options(
            "/summary",
            headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "GET"},
        )
        assert "access-control-allow-origin" not in r.headers


def test_openapi_document_lists_every_route(live: Live) -> None:
    with live.client(None) as c:
        spec = c.get("/openapi.json").json()
    assert spec == json.loads(json.dumps(SPEC))
    paths = {p.rsplit("/", 1)[-1] for p in spec["paths"]}
    assert paths == {
        "summary",
        "metrics",
        "undo",
        "config",
        "posteriors",
        "{armId}",
        "traces",
        "timeseries",
        "healthz",
        "learners",
        "select",
        "observe",
        "reward",
        "reset",
        "phase",
        "settings",
        "command",
    }


def test_reset_and_phase_over_http_leave_no_confirmation_rows(live: Live) -> None:
    """An API client confirms on its own side: the server stores no pending confirmation
    for it (and so has none to cancel)."""
    from sqlalchemy import text

    with live.client() as c:
        c.post("/observe", json=report("nc-1", ["Read"]))
        assert c.post("/phase", json={"phase": "passive"}).status_code == 409
        assert c.post("/reset", json={"arm_ids": ["Read"]}).status_code == 200
        assert c.post("/reset/undo", json={}).status_code == 200
    assert live.app.engine is not None
    with live.app.engine.connect() as conn:
        assert conn.execute(text("SELECT COUNT(*) FROM confirmations")).scalar() == 0


def test_a_terminal_talking_to_the_server_gets_terminal_wording(live: Live) -> None:
    with live.client() as c:
        chat = c.post("/command", json={"text": "phase"}).json()
        terminal = c.post("/command", json={"text": "phase", "wording": "terminal"}).json()
        bad = c.post("/command", json={"text": "phase", "wording": "fancy"})
    assert "/learning phase" in str(chat["blocks"])
    assert "learning-bot phase" in str(terminal["blocks"])
    assert "/learning" not in str(terminal["blocks"])
    assert bad.status_code == 400 and "wording" in bad.json()["error"]


def test_select_takes_a_request_context_and_answers_deferred_tools(live: Live) -> None:
    arms = [
        arm("tool:ctx:get_weather", 100, description="The weather forecast for a city"),
        arm("tool:ctx:send_email", 100, description="Send an email message"),
        arm("tool:ctx:read_file", 100, description="Read a file"),
        arm("skill:ctx:main", 100),
    ]
    with live.client() as c:
        body = {"arms": arms, "context": {"message": "will it rain in Lyon", "channel": "c1"}}
        answer = c.post("/select", json=body).json()
        conforms("Selection", answer)
        tools = {a["armId"] for a in arms if a["armId"].startswith("tool:")}
        assert set(answer["deferred"]) == tools - set(answer["selected"])
        too_long = {"arms": arms, "context": {"message": "x" * 16_001}}
        refused = c.post("/select", json=too_long)
        assert refused.status_code == 400 and "context.message" in refused.text
        bad = c.post("/select", json={"arms": [{**arms[0], "description": 5}]})
        assert bad.status_code == 400 and "description" in bad.text
