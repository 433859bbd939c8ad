"""learning_bot.client: its models against the OpenAPI document, and what it does when the
server answers badly or not at all (a scripted transport stands for the server; the examples'
test runs the client against a real one)."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import fields
from typing import Any

import httpx
import pytest

from learning_bot.adapters.http.openapi import SCHEMAS
from learning_bot.client import (
    ArmSpec,
    AsyncLearningClient,
    LearningClient,
    LearningClientError,
    ObserveResult,
    PhaseResult,
    Reply,
    RewardRequest,
    RewardResult,
    RunReport,
    Selection,
    SelectRequest,
    Summary,
    ToolCall,
    Usage,
    json_names,
    report_for,
)

MODELS: list[tuple[type[Any], str]] = [
    (ArmSpec, "ArmInput"),
    (SelectRequest, "SelectRequest"),
    (Selection, "Selection"),
    (ToolCall, "ToolCall"),
    (Usage, "Usage"),
    (RunReport, "RunReport"),
    (ObserveResult, "ObserveResult"),
    (RewardRequest, "RewardRequest"),
    (RewardResult, "RewardResult"),
    (Summary, "Summary"),
    (Reply, "Reply"),
    (PhaseResult, "PhaseResult"),
]
CLIENT_ONLY = {f.name for f in fields(Selection) if f.metadata.get("client")}
"""Selection's fields that the client adds (what the select sent), not in the answer."""
AHEAD_OF_THE_SCHEMA = {"Selection": {"deferred"}}
"""Fields the client reads when a server sends them, before the document lists them."""


@pytest.mark.parametrize(("model", "schema"), MODELS, ids=[s for _, s in MODELS])
def test_model_fields_are_the_schema_properties(model: type[Any], schema: str) -> None:
    names = {
        js for py, js in json_names(model).items() if not (model is Selection and py in CLIENT_ONLY)
    }
    properties = set(SCHEMAS[schema]["properties"])
    assert properties <= names, f"{schema}: the client lacks {sorted(properties - names)}"
    extra = names - properties
    assert extra <= AHEAD_OF_THE_SCHEMA.get(schema, set()), f"{schema}: unknown {sorted(extra)}"


def test_request_bodies_send_only_schema_properties() -> None:
    arms = [ArmSpec("tool:fs:Read", 120, "Read", "x"), ArmSpec("tool:web:Search", 900)]
    select = SelectRequest(tuple(arms), {"channel": "C1"}, "s-1").to_json()
    assert set(select) <= set(SCHEMAS["SelectRequest"]["properties"])
    assert select["sessionKey"] == "s-1" and select["arms"][0] == {
        "armId": "tool:fs:Read",
        "tokenCost": 120,
        "label": "Read",
        "content": "x",
    }
    selection = Selection(
        selected=("tool:fs:Read",), excluded=("tool:web:Search",), arms=tuple(arms)
    )
    report = report_for(
        selection,
        tool_calls=["Read", {"name": "Bash", "meta": {"cmd": "ls"}}],
        texts=["done"],
        usage=Usage(10, 5, 80),
        trace_id="t-1",
        channel="C1",
    ).to_json()
    assert set(report) <= set(SCHEMAS["RunReport"]["properties"])
    assert {a["armId"]: a["included"] for a in report["arms"]} == {
        "tool:fs:Read": True,
        "tool:web:Search": False,
    }
    # Read is the one offered arm of that name: the call names it; Bash is no offered arm
    assert report["toolCalls"] == [
        {"name": "Read", "arm": "tool:fs:Read"},
        {"name": "Bash", "meta": {"cmd": "ls"}},
    ]
    assert set(report["toolCalls"][0]) <= set(SCHEMAS["ToolCall"]["properties"])
    assert report["usage"] == {
        "input": 10,
        "output": 5,
        "cacheRead": 80,
        "cacheWrite": 0,
        "total": 95,
    }
    reward = RewardRequest("Read", "rejected", 0.0, "wrong file").to_json()
    assert set(reward) <= set(SCHEMAS["RewardRequest"]["properties"])


def test_tool_arm_costs_the_definition_as_compact_json() -> None:
    schema = {"name": "Read", "input_schema": {"type": "object"}}
    arm = ArmSpec.tool("Read", schema, "fs")
    compact = json.dumps(schema, separators=(",", ":"))
    assert (arm.arm_id, arm.label, arm.name) == ("tool:fs:Read", "Read", "Read")
    assert arm.token_cost == -(-len(compact) // 4)


def test_a_deferred_arm_the_model_called_is_reported_loaded_not_included() -> None:
    arms = tuple(ArmSpec(f"tool:x:{n}", 10) for n in ("A", "B", "C"))
    selection = Selection(
        selected=("tool:x:A",),
        excluded=("tool:x:B", "tool:x:C"),
        deferred=("tool:x:B", "tool:x:C"),
        arms=arms,
        session_key="s",
    )
    report = report_for(selection, tool_calls=["B"])
    assert [(a.included, a.loaded) for a in report.arms] == [
        (True, False),
        (False, True),
        (False, False),
    ]
    body = report.to_json()
    assert [a.get("loaded") for a in body["arms"]] == [None, True, None]
    assert set(body["arms"][1]) <= set(SCHEMAS["ArmInput"]["properties"])
    assert report.session_key == "s"
    assert [a.arm_id for a in selection.deferred_arms()] == ["tool:x:B", "tool:x:C"]
    # an excluded arm that was not deferred cannot have been loaded, whatever was called
    plain = Selection(selected=("tool:x:A",), excluded=("tool:x:B", "tool:x:C"), arms=arms)
    assert not any(a.loaded for a in report_for(plain, tool_calls=["B"]).arms)


def test_the_observe_carries_the_selects_session_key_and_context() -> None:
    arms = (ArmSpec("tool:fs:Read", 10),)
    context = {"message": "read the k8s manifest", "channel": "C1"}
    selection = Selection(selected=("tool:fs:Read",), arms=arms, session_key="s", context=context)
    report = report_for(selection, tool_calls=["Read"])
    assert report.session_key == "s" and report.context == context
    more = report_for(selection, tool_calls=["Read"], context={"loaded": []})
    assert more.context == {**context, "loaded": []}
    assert report.to_json()["context"] == context


def test_calls_name_their_arm_when_the_client_can_tell_which() -> None:
    arms = (
        ArmSpec("tool:billing:calculate", 10),
        ArmSpec("tool:travel:calculate", 10),
        ArmSpec("tool:fs:Read", 10),
        ArmSpec("tool:web:Search", 10),
    )
    selection = Selection(
        selected=("tool:billing:calculate", "tool:travel:calculate", "tool:fs:Read"),
        excluded=("tool:web:Search",),
        arms=arms,
    )
    calls = report_for(
        selection,
        tool_calls=[
            "Read",  # one offered arm of that name
            "calculate",  # two: left to the server, which credits neither
            {"name": "calculate", "arm": "tool:travel:calculate"},  # named by the caller
            "billing:calculate",  # category:name
            "tool:fs:Read",  # a full arm id
            "Search",  # not offered: sent as it is
        ],
    ).tool_calls
    assert [(c.name, c.arm) for c in calls] == [
        ("Read", "tool:fs:Read"),
        ("calculate", None),
        ("calculate", "tool:travel:calculate"),
        ("calculate", "tool:billing:calculate"),
        ("Read", "tool:fs:Read"),
        ("Search", None),
    ]


# -- a scripted server ---------------------------------------------------------------------------

SELECTION = {
    "selected": ["tool:web:Search", "tool:fs:Read"],
    "excluded": [],
    "isBaseline": False,
    "tokenBudget": 8000,
    "usedTokens": 1020,
    "overBudget": False,
    "fallback": None,
    "guidance": None,
}
ARMS = [ArmSpec("tool:fs:Read", 120, "Read"), ArmSpec("tool:web:Search", 900, "Search")]


class Script:
    """Answers each request with the next of `answers` (a status and a body, or an exception
    to raise), keeping the requests."""

    def __init__(self, *answers: tuple[int, Any] | Exception) -> None:
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        status, body = answer
        return httpx.Response(status, json=body)


def client(script: Script, **kwargs: Any) -> LearningClient:
    return LearningClient(
        "http://learning.test", transport=httpx.MockTransport(script), backoff=0.001, **kwargs
    )


def test_select_retries_a_503_and_a_lost_connection() -> None:
    script = Script(
        (503, {"error": "storage is unavailable"}),
        httpx.ConnectError("refused"),
        (200, SELECTION),
    )
    selection = client(script).select(ARMS, session_key="s-1", context={"channel": "C1"})
    assert len(script.requests) == 3
    assert selection.selected == ("tool:web:Search", "tool:fs:Read")
    assert selection.fallback is None and selection.session_key == "s-1"
    assert [a.arm_id for a in selection.kept()] == ["tool:web:Search", "tool:fs:Read"]
    sent = json.loads(script.requests[-1].content)
    assert sent["sessionKey"] == "s-1" and sent["context"] == {"channel": "C1"}
    assert script.requests[-1].url.path == "/__openclaw__/api/learning/select"


def test_select_falls_back_to_every_arm_when_the_server_stays_away(
    caplog: pytest.LogCaptureFixture,
) -> None:
    script = Script(*[(503, {"error": "storage is unavailable"})] * 3)
    with caplog.at_level(logging.WARNING, "learning_bot.client"):
        selection = client(script, retries=2).select(ARMS, session_key="s-1")
    assert len(script.requests) == 3
    assert selection.selected == ("tool:fs:Read", "tool:web:Search")  # every arm, as given
    assert selection.excluded == () and selection.guidance is None
    assert selection.used_tokens == 1020
    assert selection.fallback is not None and "storage is unavailable" in selection.fallback
    assert "fell back" in caplog.text


def test_a_refused_select_is_not_retried_and_falls_back() -> None:
    script = Script((400, {"error": "arms[0].armId: unknown type 'tol'"}))
    selection = client(script).select([ArmSpec("tol:fs:Read", 1)])
    assert len(script.requests) == 1
    assert selection.fallback is not None and "unknown type 'tol'" in selection.fallback
    assert selection.selected == ("tol:fs:Read",)


def test_observe_that_cannot_be_delivered_is_logged_not_raised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    script = Script(*[httpx.ConnectError("refused")] * 4)
    selection = Selection.from_json(SELECTION, ARMS, "s-1")
    with caplog.at_level(logging.ERROR, "learning_bot.client"):
        result = client(script).observe(selection, tool_calls=["Read"], trace_id="t-9")
    assert result is None
    assert len(script.requests) == 4  # the first try and three retries
    assert "t-9 was not recorded" in caplog.text


def test_observe_answers_what_was_recorded() -> None:
    answer = {
        "traceId": "t-1",
        "recorded": True,
        "duplicate": False,
        "skipped": None,
        "rewards": {"tool:fs:Read": 1.0, "tool:web:Search": 0.0},
        "referenced": {"tool:fs:Read": True, "tool:web:Search": False},
        "spooled": False,
        "message": "recorded",
    }
    script = Script((200, answer))
    selection = Selection.from_json(SELECTION, ARMS, "s-1")
    result = client(script).observe(selection, tool_calls=["Read"], texts=["ok"], trace_id="t-1")
    assert result is not None and result.recorded and result.rewards["tool:fs:Read"] == 1.0
    sent = json.loads(script.requests[0].content)
    assert sent["sessionKey"] == "s-1" and sent["assistantTexts"] == ["ok"]


def test_operator_calls_raise_the_servers_error() -> None:
    script = Script((404, {"error": "no arm matches 'Nope'"}))
    with pytest.raises(LearningClientError, match="no arm matches") as caught:
        client(script).reward("Nope")
    assert caught.value.status == 404


def test_the_token_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEARNING_BOT_API_TOKEN", "s3cret")
    script = Script((200, SELECTION), (200, SELECTION))
    client(script).select(ARMS)
    client(script, token="given", learner="team-a").select(ARMS)
    assert script.requests[0].headers["Authorization"] == "Bearer s3cret"
    assert script.requests[1].headers["Authorization"] == "Bearer given"
    assert script.requests[1].url.params["learner"] == "team-a"


async def test_the_async_client_retries_and_falls_back_the_same_way() -> None:
    script = Script(
        (503, {"error": "storage is unavailable"}),
        (200, SELECTION),
        *[httpx.ReadTimeout("slow")] * 2,
        *[(503, {"error": "storage is unavailable"})] * 2,
    )
    make: Callable[..., AsyncLearningClient] = lambda **kw: AsyncLearningClient(  # noqa: E731
        "http://learning.test", transport=httpx.MockTransport(script), backoff=0.001, **kw
    )
    async with make() as learning:
        selection = await learning.select(ARMS, session_key="s")
        assert selection.selected == ("tool:web:Search", "tool:fs:Read")
    async with make(retries=1) as learning:
        fallback = await learning.select(ARMS)
        assert fallback.fallback is not None and fallback.selected == (
            "tool:fs:Read",
            "tool:web:Search",
        )
        assert await learning.observe(selection, tool_calls=["Read"]) is None
    assert len(script.requests) == 6


def test_nothing_the_agent_passes_makes_select_or_observe_raise(
    caplog: pytest.LogCaptureFixture,
) -> None:
    script = Script()  # nothing is sent: both fail before a request
    learning = client(script)
    with caplog.at_level(logging.WARNING, "learning_bot.client"):
        selection = learning.select(ARMS, context={"when": object()})  # not JSON
        assert selection.fallback is not None and "not JSON serializable" in selection.fallback
        assert learning.observe(selection, tool_calls=[{"meta": {}}]) is None  # no name
    assert script.requests == []
    assert "could not be built" in caplog.text
