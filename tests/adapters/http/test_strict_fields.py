"""Strict request bodies: on every route that takes one (the learning API's and the `/v1`
routes OpenClaw's gateway calls), a field the route does not know is a 400 naming it (with
the closest known field), at any depth, and nothing is recorded; the payloads the original
clients send (OpenClaw's run traces and arms, the gateway's tool arguments) still pass."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from learning_bot.adapters.http import HttpSettings, create_app
from learning_bot.adapters.http.body import BODY_FIELDS, STRICT_FIELDS_VERSION, TOLERATED
from learning_bot.app import App, build_app
from learning_bot.engine import LearningConfig, Phase
from learning_bot.settings import Settings
from learning_bot.surfaces import SURFACES
from tests.adapters.mcp import openclaw_calls as oc

BASE = "/__openclaw__/api/learning"
ARMS = [{"armId": "tool:fs:Read", "tokenCost": 120}, {"armId": "tool:web:WebSearch"}]


def report(trace_id: str, **extra: Any) -> dict[str, Any]:
    return {"traceId": trace_id, "arms": ARMS, "toolCalls": [{"name": "Read"}], **extra}


@pytest.fixture
def app(tmp_path: Path) -> Iterator[App]:
    config = LearningConfig(phase=Phase.ACTIVE)
    settings = Settings(database_url=f"sqlite:///{tmp_path}/strict.sqlite", config=config)
    made = build_app(settings, spool=False)
    yield made
    made.close()


@pytest.fixture
def client(app: App) -> Iterator[TestClient]:
    (mcp,) = [entry for entry in SURFACES if entry.name == "MCP"]
    routes = mcp.build(app, {}).routes
    asgi = create_app(app.bus, HttpSettings(), extra_routes=routes)
    with TestClient(asgi, base_url="http://127.0.0.1:8787") as c:
        yield c


# route, a body with one misspelt field, the field's path, the field it should have been
MISSPELT: list[tuple[str, dict[str, Any], str, str | None]] = [
    (f"{BASE}/select", {"arms": ARMS, "sesionKey": "s1"}, "sesionKey", "sessionKey"),
    (
        f"{BASE}/select",
        {"arms": [{"armId": "tool:fs:Read", "tokenCots": 3}]},
        "arms[0].tokenCots",
        "tokenCost",
    ),
    (
        f"{BASE}/observe",
        report("t1", arms=[{"armId": "tool:fs:Read", "includd": True}]),
        "arms[0].includd",
        "included",
    ),
    (f"{BASE}/observe", report("t2", usage={"inptu": 3}), "usage.inptu", "input"),
    (f"{BASE}/observe", report("t3", isBaselin=True), "isBaselin", "isBaseline"),
    (
        f"{BASE}/observe",
        {"reports": [report("t4", toolCalls=[{"nmae": "Read"}])]},
        "reports[0].toolCalls[0].nmae",
        "name",
    ),
    (f"{BASE}/observe", {"reports": [report("t5")], "extra": 1}, "extra", None),
    (f"{BASE}/reward", {"arm_id": "tool:fs:Read", "rewrd": 0.5}, "rewrd", "reward"),
    (f"{BASE}/reset", {"arm_id": ["tool:fs:Read"]}, "arm_id", "arm_ids"),
    (f"{BASE}/reset/undo", {"undo": True}, "undo", None),
    (f"{BASE}/phase", {"phase": "passive", "confirmed": True}, "confirmed", "confirm"),
    (f"{BASE}/command", {"txt": "status"}, "txt", "text"),
    (
        "/v1/learning/select",
        {**oc.select().arguments, "token_budgt": 10},
        "token_budget",
        "token_budget",
    ),
    (
        "/v1/learning/select",
        {**oc.select().arguments, "candidates": [{"id": "tool:fs:Read", "tokencost": 1}]},
        "candidates[0].tokencost",
        "token_cost",
    ),
    (
        "/v1/learning/observe",
        {**oc.observe("tool:fs:Read", True).arguments, "rewad": 1},
        "rewad",
        "reward",
    ),
    ("/v1/learning/reset", {"learner": oc.LEARNER, "armids": None}, "armids", "arm_ids"),
    ("/v1/learning/sessions/start", {"learner": oc.LEARNER, "session": "k"}, "session", None),
    ("/v1/learning/sessions/end", {"sessionid": "x"}, "sessionid", "session_id"),
]


def test_every_route_with_a_body_is_tested() -> None:
    routes = {path.removeprefix(f"{BASE}/").removeprefix("/v1/learning/") for path, *_ in MISSPELT}
    assert {name.removeprefix("v1/") for name in BODY_FIELDS} <= routes


@pytest.mark.parametrize(("path", "body", "field", "meant"), MISSPELT)
def test_a_misspelt_field_is_refused_by_name(
    client: TestClient, path: str, body: dict[str, Any], field: str, meant: str | None
) -> None:
    if field == "token_budget":  # the misspelling is the one in the body
        field = "token_budgt"
    answer = client.post(path, json=body)
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error.startswith(f'unknown field "{field}"'), error
    if meant is not None:
        assert error.endswith(f'did you mean "{meant}"?'), error
    summary = client.get(f"{BASE}/summary")
    assert summary.status_code == 404 or summary.json()["traceCount"] == 0  # nothing recorded


def test_the_learner_belongs_in_the_query(client: TestClient) -> None:
    answer = client.post(f"{BASE}/observe", json={**report("q1"), "learner": "other"})
    assert answer.status_code == 400 and "?learner=" in answer.json()["error"]
    ended = client.post("/v1/learning/sessions/end", json={"session_id": "x", "learner": "y"})
    assert ended.status_code == 400 and "?learner=" not in ended.json()["error"]


def test_the_original_clients_payloads_pass(client: TestClient) -> None:
    # OpenClaw's RunTrace, as its learning layer records it (arm outcomes carry `referenced`;
    # its Arm carries type and category).
    trace = {
        "traceId": "oc-1",
        "runId": "run-1",
        "sessionId": "sess-1",
        "sessionKey": "agent:main:slack:C1",
        "timestamp": 1_707_091_200_000,
        "provider": "anthropic",
        "model": "claude-sonnet-4",
        "channel": "slack",
        "isBaseline": False,
        "context": {"sessionKey": "agent:main:slack:C1", "promptLength": 10},
        "arms": [
            {"armId": "tool:fs:Read", "included": True, "referenced": True, "tokenCost": 245},
            {
                "armId": "tool:exec:Bash",
                "type": "tool",
                "category": "exec",
                "label": "Bash",
                "tokenCost": 300,
                "included": False,
                "referenced": False,
            },
        ],
        "usage": {"input": 3200, "output": 1400, "cacheRead": 0, "total": 4600},
        "durationMs": 2800,
        "systemPromptChars": 12400,
        "aborted": False,
        "error": None,
    }
    observed = client.post(f"{BASE}/observe", json=trace)
    assert observed.status_code == 200 and observed.json()["recorded"], observed.text
    assert client.post(f"{BASE}/reset", json={"arm_ids": ["tool:fs:Read"]}).status_code == 200
    assert client.post(f"{BASE}/reset", json={"confirm": True}).status_code == 200
    rewarded = client.post(
        f"{BASE}/reward",
        json={"arm_id": "tool:fs:Read", "outcome": "accepted", "reward": 1.0, "reason": "ok"},
    )
    assert rewarded.status_code == 200, rewarded.text
    # The gateway's /v1 turn: every tool argument it sends, nulls and zeros included.
    started = client.post("/v1/learning/sessions/start", json=oc.session_start().arguments)
    assert started.status_code == 200, started.text
    selected = client.post("/v1/learning/select", json=oc.select().arguments)
    assert selected.status_code == 200, selected.text
    for arm in oc.arm_ids(selected.json()["selected_arms"]):
        call = oc.observe(arm, arm == "tool:fs:Read")
        assert client.post("/v1/learning/observe", json=call.arguments).status_code == 200
    ended = client.post(
        "/v1/learning/sessions/end", json={"session_id": started.json()["session_id"]}
    )
    assert ended.status_code == 200, ended.text
    assert client.post("/v1/learning/reset", json=oc.reset().arguments).status_code == 200


def test_the_exceptions_are_versioned_and_documented() -> None:
    from learning_bot.adapters.http.openapi import openapi_document

    readme = (Path(__file__).parents[3] / "README.md").read_text("utf-8")
    assert STRICT_FIELDS_VERSION == 1
    strict = openapi_document()["info"]["x-strict-fields"]
    assert strict["version"] == STRICT_FIELDS_VERSION
    assert {k: set(v) for k, v in strict["tolerated"].items()} == TOLERATED
    assert f"strict fields, version {STRICT_FIELDS_VERSION}" in readme
    for route, names in TOLERATED.items():
        for name in names:
            assert f"`{name}`" in readme, (route, name)


@pytest.mark.parametrize(
    ("schema", "fields"),
    [("ArmInput", "ARM"), ("SelectRequest", "select"), ("RunReport", "REPORT")],
)
def test_every_documented_field_is_accepted(schema: str, fields: str) -> None:
    """A field the OpenAPI document names is never refused as unknown (the two lists cannot
    drift apart when a feature adds a field)."""
    from learning_bot.adapters.http import body
    from learning_bot.adapters.http.openapi import openapi_document

    documented = set(openapi_document()["components"]["schemas"][schema]["properties"])
    checked = getattr(body, fields, None) or body.BODY_FIELDS[fields]
    assert isinstance(checked, body.Fields)
    assert documented <= set(checked.known), documented - set(checked.known)
