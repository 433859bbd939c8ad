"""Values no backend stores (SPEC section 12: a lone surrogate or NUL in a string or a key, an
integer past 64 bits, a float past a double) are refused at the boundary with a 400 naming the
field, in every field of every body: the learning API's routes, the `/v1` routes and the MCP
tools, all served by one real ASGI application over a real database. A seeded fuzz of 600
mutated bodies finds no 5xx."""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from learning_bot.adapters.http import create_app
from learning_bot.adapters.http.settings import http_settings
from learning_bot.app import App, build_app
from learning_bot.engine.errors import NotFound
from learning_bot.settings import Settings
from learning_bot.surfaces import SURFACES

BASE = "/__openclaw__/api/learning"
ARM = {"armId": "tool:fs:Read", "tokenCost": 10, "label": "Read"}
REPORT = {
    "traceId": "t-1",
    "sessionKey": "agent:main:slack:C1",
    "channel": "slack",
    "provider": "anthropic",
    "model": "claude",
    "arms": [ARM, {"armId": "skill:github:main", "tokenCost": 5}],
    "toolCalls": [{"name": "Read", "meta": {"path": "a.txt"}}],
    "assistantTexts": ["done"],
    "usage": {"input": 10, "output": 5, "total": 15},
    "durationMs": 20,
    "context": {"session_key": "s", "tags": ["x", {"k": "v"}]},
}
CANDIDATE = {"id": "tool:fs:Read", "metadata": {"label": "Read"}, "token_cost": 10}

# Each route with a body, and a valid body for it: every field of it is a place to poison.
BODIES: dict[str, dict[str, Any]] = {
    f"{BASE}/select": {"arms": [ARM], "context": {"channel": "c"}, "sessionKey": "k"},
    f"{BASE}/observe": REPORT,
    f"{BASE}/observe#batch": {"reports": [REPORT]},
    f"{BASE}/reward": {"arm_id": "tool:fs:Read", "reward": 1, "reason": "r", "actor": "a"},
    f"{BASE}/reset": {"arm_ids": ["tool:fs:Read"]},
    f"{BASE}/phase": {"phase": "passive", "confirm": True},
    f"{BASE}/command": {"text": "status Read", "actor": "a", "conversation": "c"},
    "/v1/learning/select": {
        "learner": "gw",
        "candidates": [CANDIDATE],
        "context": {"session_key": "s", "channel": "c"},
        "k": 0,
        "token_budget": 0,
        "seed_arms": ["tool:fs:Read"],
    },
    "/v1/learning/observe": {
        "learner": "gw",
        "arm_id": "tool:fs:Read",
        "outcome": "accepted",
        "context": {"session_key": "s"},
    },
    "/v1/learning/reset": {"learner": "gw", "arm_ids": ["tool:fs:Read"], "context": {}},
    "/v1/learning/sessions/start": {"learner": "gw", "session_name": "s"},
    "/v1/learning/sessions/end": {"session_id": "lb1.abc"},
    "mcp:qortex_learning_select": {"learner": "gw", "candidates": [CANDIDATE], "context": {}},
    "mcp:qortex_learning_observe": {"learner": "gw", "arm_id": "tool:fs:Read", "outcome": "x"},
    "mcp:qortex_learning_posteriors": {"learner": "gw", "arm_ids": ["tool:fs:Read"]},
    "mcp:learning_reward": {"arm": "Read", "value": "good", "reason": "r"},
    "mcp:learning_reset": {"arms": ["Read"], "confirm": False},
}

Path_ = tuple[str | int, ...]


def places(value: Any, path: Path_ = ()) -> Iterator[Path_]:
    """Every place of a JSON value: each object member and array item, at every depth."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield (*path, key)
            yield from places(item, (*path, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield (*path, i)
            yield from places(item, (*path, i))


def objects(value: Any, path: Path_ = ()) -> Iterator[Path_]:
    """The places of every object (where a poisoned key can go), the body itself first."""
    if isinstance(value, dict):
        yield path
        for key, item in value.items():
            yield from objects(item, (*path, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from objects(item, (*path, i))


def dotted(path: Path_) -> str:
    """`arms[0].armId`, as refusals name a field."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


def at(body: Any, path: Path_) -> Any:
    for part in path:
        body = body[part]
    return body


def poisoned(body: dict[str, Any], path: Path_, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(body)
    at(out, path[:-1])[path[-1]] = value
    return out


SURROGATE = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)
TEXT = st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"), max_size=8)
BAD_TEXT = st.one_of(
    st.tuples(TEXT, SURROGATE, TEXT).map("".join),
    st.tuples(TEXT, st.just("\x00"), TEXT).map("".join),
)
BAD_INT = st.integers(min_value=2**63, max_value=10**40) | st.integers(
    min_value=-(10**40), max_value=-(2**63) - 1
)


@dataclass
class Served:
    client: TestClient
    app: App

    def post(self, route: str, body: dict[str, Any]) -> tuple[int, str]:
        """POST `body` (as JSON with non-ASCII escaped, so a lone surrogate travels as
        `\\ud800`, as a JavaScript client sends it) to `route`, or call the MCP tool that
        `route` names: the status and the error text (for a tool, 400 for a tool error)."""
        raw = json.dumps(body)
        if not route.startswith("mcp:"):
            answer = self.client.post(
                route.split("#")[0],
                content=raw.encode(),
                headers={"content-type": "application/json"},
            )
            error = answer.json().get("error", "") if answer.status_code >= 400 else ""
            return answer.status_code, str(error)
        call = (
            '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", '
            f'"params": {{"name": "{route[4:]}", "arguments": {raw}}}}}'
        )
        answer = self.client.post(
            "/mcp",
            content=call.encode(),
            headers={
                "content-type": "application/json",
                "accept": "application/json, text/event-stream",
            },
        )
        if answer.status_code != 200:
            return answer.status_code, answer.text
        data = answer.json()
        if "error" in data:  # a JSON-RPC error: the SDK refused the message itself
            return 400, str(data["error"].get("message", ""))
        result = data["result"]
        text = "".join(block.get("text", "") for block in result["content"])
        return (400 if result.get("isError") else 200), text


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    path: Path = tmp_path_factory.mktemp("unstorable") / "learning.sqlite"
    app = build_app(Settings(database_url=f"sqlite:///{path}", cache_ttl=0.0), spool=False)
    mcp = next(e for e in SURFACES if e.name == "MCP").build(app, {})
    asgi = create_app(app.bus, http_settings({}), extra_routes=mcp.routes)
    with TestClient(asgi, base_url="http://127.0.0.1", raise_server_exceptions=False) as client:
        running = client.portal.start_task_soon(mcp.run)

        async def ready() -> None:
            with anyio.fail_after(60):
                await mcp.ready.wait()  # type: ignore[attr-defined]

        client.portal.call(ready)
        try:
            yield Served(client, app)
        finally:
            client.portal.call(mcp.stop)
            running.result(timeout=60)
            app.close()


def traces_and_pulls(app: App) -> tuple[int, int]:
    """Runs recorded and pulls counted over the learners the bodies name."""
    total = pulls = 0
    for learner in ("default", "gw"):
        try:
            service = app.service(learner)
        except NotFound:
            continue
        total += service.traces(1, 0)[1]
        pulls += sum(v.posterior.pulls for v in service.posteriors())
    return total, pulls


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_an_unstorable_value_in_any_field_is_a_400_naming_it(
    served: Served, data: st.DataObject
) -> None:
    route = data.draw(st.sampled_from(sorted(BODIES)), label="route")
    body = BODIES[route]
    if data.draw(st.booleans(), label="in a key"):
        where = data.draw(st.sampled_from(list(objects(body))), label="object")
        key = data.draw(BAD_TEXT, label="key")
        sent = copy.deepcopy(body)
        at(sent, where)[key] = 1
        field = dotted(where) or "the body"
    else:
        where = data.draw(st.sampled_from(list(places(body))), label="place")
        value = data.draw(st.one_of(BAD_TEXT, BAD_INT), label="value")
        sent = poisoned(body, where, value)
        field = dotted(where)
    before = traces_and_pulls(served.app)
    status, error = served.post(route, sent)
    assert status == 400, (route, sent, status, error)
    if route.startswith("mcp:") and "Parse error" in error:
        # The SDK's JSON-RPC parser refuses a message holding a lone surrogate whole (400,
        # code -32700) before any tool sees it.
        assert "-32700" in error, error
        assert traces_and_pulls(served.app) == before
        return
    assert field in error, (route, field, error)
    assert traces_and_pulls(served.app) == before, "a refused call records nothing"


def test_every_base_body_is_accepted_or_refused_for_its_meaning(served: Served) -> None:
    """The bodies poisoned above are sound: none answers 400 for a stored-value reason."""
    for route, body in BODIES.items():
        status, error = served.post(route, body)
        assert status < 500, (route, error)
        assert not any(word in error for word in ("surrogate", "NUL", "64 bits")), (route, error)


# -- seeded fuzz ---------------------------------------------------------------------------------

HOSTILE_SCALARS: list[Any] = [
    None,
    True,
    0,
    -1,
    2**31,
    2**63 - 1,
    2**63,
    -(2**63) - 1,
    10**30,
    1e308,
    -0.0,
    0.5,
    "",
    " ",
    "\udbff",
    "\udc00x",
    "a\x00b",
    "\x00",
    "\ud83d\ude00",
    "\u202e",
    "x" * 600,
    "tool:fs:Read",
    "tool::",
    "skill:x:main",
    "active",
    "reset all confirm",
    "<@U1>",
    "../../etc/passwd",
    "1e999",
]


def mutate(value: Any, rng: random.Random, depth: int = 0) -> Any:
    """One random change somewhere in `value` (a type swap, a hostile scalar, a hostile key,
    a dropped member, a deep nest)."""
    roll = rng.random()
    if isinstance(value, dict) and value and roll < 0.7:
        key = rng.choice(list(value))
        out = dict(value)
        choice = rng.random()
        if choice < 0.6:
            out[key] = mutate(value[key], rng, depth + 1)
        elif choice < 0.75:
            del out[key]
        elif choice < 0.9:
            out[rng.choice(["\udbff", "k\x00", key + "x", "reports", "arms"])] = rng.choice(
                HOSTILE_SCALARS
            )
        else:
            out[key] = [[[[out[key]]]]]
        return out
    if isinstance(value, list) and value and roll < 0.7:
        out_list = list(value)
        i = rng.randrange(len(out_list))
        choice = rng.random()
        if choice < 0.6:
            out_list[i] = mutate(out_list[i], rng, depth + 1)
        elif choice < 0.8:
            out_list.append(copy.deepcopy(out_list[i]))
        else:
            out_list.clear()
        return out_list
    if roll < 0.8:
        return rng.choice(HOSTILE_SCALARS)
    return rng.choice([{}, [], {"a": rng.choice(HOSTILE_SCALARS)}, [rng.choice(HOSTILE_SCALARS)]])


def test_a_seeded_fuzz_of_600_bodies_answers_no_5xx(served: Served) -> None:
    rng = random.Random(20261207)
    routes = sorted(BODIES)
    answered: dict[int, int] = {}
    failures: list[tuple[str, str, int, str]] = []
    for _ in range(600):
        route = rng.choice(routes)
        body: Any = BODIES[route]
        for _ in range(rng.randint(1, 4)):
            body = mutate(body, rng)
        if not isinstance(body, dict):
            body = {"value": body}
        status, error = served.post(route, body)
        answered[status] = answered.get(status, 0) + 1
        if status >= 500:
            failures.append((route, json.dumps(body)[:300], status, error[:200]))
    assert not failures, failures[:5]
    assert sum(answered.values()) == 600
    assert answered.get(400, 0) > 100, answered  # most mutations are refused, naming a field
