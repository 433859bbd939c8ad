"""The integration examples (examples/*.py), each run against a real `learning-bot serve` and
the framework's fake model: two turns of one session select, call the model with the kept tools
(the same ones in the same order both turns, the guidance in the system prompt), observe, and
the learner shows up in `learning-bot status`. Then three turns of one session through a
scripted model that uses tool search: turn 1 finds the deferred run_sql and calls it, turns 2
and 3 get it the provider's way for a tool the session took on (Anthropic: after the cached
tools, plain; OpenAI: still deferred, loaded in the conversation) and call it directly, the
kept prefix unchanged throughout; GET summary and `learning-bot status` then count the session
as one that took on a tool outside its cached prefix. Last, the demo as a reader runs it from
a fresh clone: `examples/anthropic_tools.py` as a process against tests/e2e/fake_messages_api.py
as another.

One server serves the module, each example in its own learner; its settings make the selection
certain (no baseline runs, no forced exploration, a budget that fits the two small tools and
never `run_sql`), so every assertion is exact.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest

from learning_bot.client import AsyncLearningClient, LearningClient

from .fake_messages_api import MessagesScript
from .launch import LEARNING_BOT, PYTHON, REPO, Served, environment, free_port, served

pytestmark = pytest.mark.e2e

SETTINGS = {
    "LEARNING_BOT_PHASE": "active",
    "LEARNING_BOT_BASELINE_RATE": "0",
    "LEARNING_BOT_MIN_PULLS": "0",
    "LEARNING_BOT_TOKEN_BUDGET": "150",
}
KEPT = {"get_weather", "search_docs"}
QUESTIONS = ("What's the weather in Lyon?", "And in Oslo?")


def load(name: str) -> ModuleType:
    path = REPO / "examples" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"examples_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return environment(tmp_path_factory.mktemp("examples"), SETTINGS)


@pytest.fixture(scope="module")
def server(env: dict[str, str]) -> Iterator[Served]:
    with served(env, "--host", "127.0.0.1", stdout=subprocess.DEVNULL) as server:
        yield server


def check_learned(server: Served, env: dict[str, str], learner: str, category: str) -> None:
    """Two runs recorded in the learner: get_weather (called) rewarded 1 both times,
    search_docs (kept, not called) 0 both times, run_sql (left out) untouched; and
    `learning-bot status` shows the learner's runs."""
    with LearningClient(server.url, learner=learner) as client:
        assert client.summary().trace_count == 2
        assert "2 traces" in client.status().summary
    posteriors = {
        p["armId"]: p
        for p in httpx.get(f"{server.base}/posteriors", params={"learner": learner}).json()
    }
    left_out = posteriors[f"tool:{category}:run_sql"]
    assert left_out["pulls"] == 0
    prior = (left_out["alpha"], left_out["beta"])
    weather = posteriors[f"tool:{category}:get_weather"]
    docs = posteriors[f"tool:{category}:search_docs"]
    # the default policy forgets slowly, so the sums are close to, not exactly, prior + rewards
    close = pytest.approx
    assert weather["pulls"] == docs["pulls"] == 2
    assert (weather["alpha"], weather["beta"]) == close((prior[0] + 2, prior[1]), abs=0.05)
    assert (docs["alpha"], docs["beta"]) == close((prior[0], prior[1] + 2), abs=0.05)
    status = subprocess.run(
        [LEARNING_BOT, "status", "--learner", learner],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert status.returncode == 0, status.stderr
    assert f"{learner} [ACTIVE]" in status.stdout
    assert re.search(r"^Traces\s+2$", status.stdout, re.M), status.stdout
    assert f"tool:{category}:get_weather" in status.stdout
    with LearningClient(server.url, learner=learner) as client:  # an operator's reward, by label
        rewarded = client.reward("run_sql", 0.0, reason="not wanted")
    assert (rewarded.ok, rewarded.arm_id, rewarded.lagged) == (
        True,
        f"tool:{category}:run_sql",
        True,
    )
    assert rewarded.beta == pytest.approx(prior[1] + 1, abs=0.05)


def check_offered(offered: list[list[str]], systems: list[str]) -> None:
    """Every model call of both turns offered the same kept tools in the same order, and the
    system prompt named the tool left out."""
    assert offered and all(names == offered[0] for names in offered), offered
    assert set(offered[0]) == KEPT
    assert all("run_sql" in system for system in systems), systems


# -- Anthropic SDK ------------------------------------------------------------------------------


def messages_api(requests: list[dict[str, Any]]) -> Any:
    """The Messages API: a tool_use of get_weather first, then a text answer once the tool's
    result is in the conversation. Each request body is kept."""

    import httpx2  # the Anthropic SDK's HTTP library

    def handle(request: Any) -> Any:
        body = json.loads(request.content)
        requests.append(body)
        last = body["messages"][-1]["content"]
        answered = isinstance(last, list) and last[0].get("type") == "tool_result"
        content: list[dict[str, Any]] = (
            [{"type": "text", "text": "Sunny and 21 C."}]
            if answered
            else [
                {
                    "type": "tool_use",
                    "id": f"toolu_{len(requests)}",
                    "name": "get_weather",
                    "input": {"city": "Lyon"},
                }
            ]
        )
        return httpx2.Response(
            200,
            json={
                "id": f"msg_{len(requests)}",
                "type": "message",
                "role": "assistant",
                "model": body["model"],
                "content": content,
                "stop_reason": "end_turn" if answered else "tool_use",
                "stop_sequence": None,
                "usage": {
                    "input_tokens": 30,
                    "output_tokens": 12,
                    "cache_read_input_tokens": 90,
                    "cache_creation_input_tokens": 0,
                },
            },
        )

    return httpx2.MockTransport(handle)


async def test_anthropic_example(server: Served, env: dict[str, str]) -> None:
    import anthropic
    import httpx2

    example = load("anthropic_tools")
    requests: list[dict[str, Any]] = []
    claude = anthropic.AsyncAnthropic(
        api_key="test", http_client=httpx2.AsyncClient(transport=messages_api(requests))
    )
    async with AsyncLearningClient(server.url, learner="examples-anthropic") as learning:
        for question in QUESTIONS:
            text = await example.answer(
                question, learning=learning, claude=claude, session_key="s-1"
            )
            assert text == "Sunny and 21 C."
    assert len(requests) == 4  # two turns, each a tool call and an answer
    kept_tools: list[list[str]] = []
    for body in requests:
        tools = body["tools"]
        # The server lists the left-out tool as deferred: the kept tools first, the last of
        # them marking the cached prefix, then the tool search tool and the deferred one.
        kept = [t for t in tools if "defer_loading" not in t and "type" not in t]
        assert [("cache_control" in t) for t in kept] == [False] * (len(kept) - 1) + [True]
        assert tools[: len(kept)] == kept
        assert tools[len(kept)]["type"].startswith("tool_search_tool_bm25")
        assert [(t["name"], t["defer_loading"]) for t in tools[len(kept) + 1 :]] == [
            ("run_sql", True)
        ]
        kept_tools.append([t["name"] for t in kept])
    check_offered(kept_tools, [body["system"] for body in requests])
    check_learned(server, env, "examples-anthropic", "anthropic")


async def test_anthropic_example_sends_deferred_tools_with_tool_search() -> None:
    """A select answer that lists deferred arms (a server with tool search support): they go
    out with defer_loading beside the tool search tool, after the cached kept tools, and one
    the model loaded and called is reported as included."""
    import anthropic
    import httpx2

    example = load("anthropic_tools")
    observed: list[dict[str, Any]] = []

    def learning_api(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/select"):
            return httpx.Response(
                200,
                json={
                    "selected": ["tool:anthropic:search_docs", "tool:anthropic:get_weather"],
                    "excluded": ["tool:anthropic:run_sql"],
                    "deferred": ["tool:anthropic:run_sql"],
                    "isBaseline": False,
                    "tokenBudget": 150,
                    "usedTokens": 92,
                    "overBudget": False,
                    "fallback": None,
                    "guidance": None,
                },
            )
        observed.append(json.loads(request.content))
        return httpx.Response(200, json={"traceId": observed[-1]["traceId"], "recorded": True})

    requests: list[dict[str, Any]] = []

    def model(request: Any) -> Any:
        body = json.loads(request.content)
        requests.append(body)
        return httpx2.Response(
            200,
            json={
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": body["model"],
                "content": [{"type": "text", "text": "42 signups."}],
                "stop_reason": "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": 10, "output_tokens": 3},
            },
        )

    claude = anthropic.AsyncAnthropic(
        api_key="test", http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(model))
    )
    transport = httpx.MockTransport(learning_api)
    async with AsyncLearningClient("http://learning.test", transport=transport) as learning:
        await example.answer("Signups?", learning=learning, claude=claude, session_key="s")
    tools = requests[0]["tools"]
    assert [t["name"] for t in tools] == [
        "search_docs",
        "get_weather",
        "tool_search_tool_bm25",
        "run_sql",
    ]
    assert tools[1]["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" not in tools[0] and "defer_loading" not in tools[1]
    assert tools[2]["type"].startswith("tool_search_tool_bm25")
    assert tools[3]["defer_loading"] is True
    (report,) = observed
    assert report["sessionKey"] == "s" and report["provider"] == "anthropic"
    assert {a["armId"]: a["included"] for a in report["arms"]} == {
        "tool:anthropic:get_weather": True,
        "tool:anthropic:search_docs": True,
        "tool:anthropic:run_sql": False,  # deferred and not called
    }


SEARCH_QUESTIONS = (
    "How many signups last week? Ask SQL.",
    "And by country, in SQL?",
    "And the SQL count of paid invoices?",
)
"""Three turns of one session that need run_sql, the tool the selection leaves out."""


def check_took_on(
    server: Served,
    env: dict[str, str],
    learner: str,
    kept: list[str],
    found: str,
    category: str = "anthropic",
) -> None:
    """GET summary and `learning-bot status` show the one session taking on the found tool,
    and the posteriors the turns taught: `kept` included three times, `found` once."""
    with LearningClient(server.url, learner=learner) as client:
        summary = client.summary()
    assert summary.trace_count == 3
    assert summary.sessions is not None
    assert (summary.sessions["sessions"], summary.sessions["grown"]) == (1, 1), summary.sessions
    status = subprocess.run(
        [LEARNING_BOT, "status", "--learner", learner, "--url", server.url],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert status.returncode == 0, status.stderr
    assert "1 took on tools outside its cached prefix" in status.stdout, status.stdout
    posteriors = {
        p["armId"]: p
        for p in httpx.get(f"{server.base}/posteriors", params={"learner": learner}).json()
    }
    assert [posteriors[f"tool:{category}:{name}"]["pulls"] for name in kept] == [3] * len(kept)
    # loaded through tool search on the first turn, sent as an addition on the next two
    assert posteriors[f"tool:{category}:{found}"]["pulls"] == 3


def check_tool_search_turns(requests: list[dict[str, Any]]) -> list[str]:
    """Three turns, each a tool call and its answer: the first finds run_sql through tool
    search (deferred, beside the tool search tool), the next two send it as an addition after
    the cached tools and call it directly; the cached prefix is the same bytes in every
    request. The kept tools' names, in order."""
    assert len(requests) == 6, [r["messages"][-1] for r in requests]
    tools = [body["tools"] for body in requests]
    ends = [[i for i, t in enumerate(ts) if "cache_control" in t] for ts in tools]
    assert all(len(end) == 1 for end in ends), tools
    end = ends[0][0] + 1
    # as the SDK wrote them, in their key order
    prefixes = {json.dumps(ts[: e[0] + 1]) for ts, e in zip(tools, ends, strict=True)}
    assert len(prefixes) == 1, prefixes  # byte-identical cached prefix in all six requests
    kept = [t["name"] for t in tools[0][:end]]
    assert "run_sql" not in kept
    for first in tools[:2]:  # turn 1: run_sql deferred beside the tool search tool
        assert first[end]["type"].startswith("tool_search_tool_bm25")
        assert [(t["name"], t.get("defer_loading")) for t in first[end + 1 :]] == [
            ("run_sql", True)
        ]
    loaded = requests[1]["messages"][1]["content"]  # the assistant turn sent back
    assert [b["type"] for b in loaded] == [
        "server_tool_use",
        "tool_search_tool_result",
        "tool_use",
    ]
    assert loaded[1]["content"]["tool_references"] == [
        {"type": "tool_reference", "tool_name": "run_sql"}
    ]
    for later in tools[2:]:  # turns 2 and 3: an addition after the cached tools, plain
        assert [t["name"] for t in later[end:]] == ["run_sql"]
        assert "defer_loading" not in later[end] and "cache_control" not in later[end]
        assert all("type" not in t for t in later)  # nothing deferred: no tool search tool
    for body in requests[2::2]:  # and the model calls it directly
        assert body["messages"] == [{"role": "user", "content": body["messages"][0]["content"]}]
    for body in requests[3::2]:
        assert [b["type"] for b in body["messages"][1]["content"]] == ["tool_use"]
        assert body["messages"][1]["content"][0]["name"] == "run_sql"
    return kept


async def test_anthropic_example_takes_on_a_tool_found_through_tool_search(
    server: Served, env: dict[str, str]
) -> None:
    """Three turns of one session through a model that uses tool search: turn 1 loads the
    deferred run_sql and calls it (reported loaded); turns 2 and 3 send it after the cached
    tools, without defer_loading, and call it directly; the cached prefix never changes."""
    import anthropic
    import httpx2

    example = load("anthropic_tools")
    script = MessagesScript()

    def model(request: Any) -> Any:
        return httpx2.Response(200, json=script.respond(json.loads(request.content)))

    claude = anthropic.AsyncAnthropic(
        api_key="test", http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(model))
    )
    learner = "examples-anthropic-search"
    async with AsyncLearningClient(server.url, learner=learner) as learning:
        for question in SEARCH_QUESTIONS:
            text = await example.answer(
                question, learning=learning, claude=claude, session_key="s-search"
            )
            assert text == "count\n42"
    kept = check_tool_search_turns(script.requests)
    assert set(kept) == KEPT
    usage = [answer["usage"] for answer in script.answers]  # the prefix written once, then read
    assert usage[0]["cache_creation_input_tokens"] > 0 and usage[0]["cache_read_input_tokens"] == 0
    assert all(u["cache_read_input_tokens"] > 0 for u in usage[1:])
    assert all(u["cache_creation_input_tokens"] == 0 for u in usage[1:])
    check_took_on(server, env, learner, kept, "run_sql")


def test_the_anthropic_example_run_from_a_fresh_clone(server: Served, env: dict[str, str]) -> None:
    """The demo as a reader runs it: `learning-bot serve` (as `make run` starts it), the
    learner set active, the fake Messages API as a process of its own, then
    `python examples/anthropic_tools.py` for three questions of one session and
    `learning-bot status`, which shows the session took on the tool it found."""
    learner = "examples-cli"
    phase = subprocess.run(
        [LEARNING_BOT, "phase", "active", "--confirm", "--learner", learner, "--url", server.url],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert phase.returncode == 0, phase.stdout + phase.stderr
    port = free_port()
    fake = subprocess.Popen(
        [PYTHON, str(REPO / "tests" / "e2e" / "fake_messages_api.py"), "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    api = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(fake, f"{api}/healthz")
        demo = subprocess.run(
            [
                PYTHON,
                str(REPO / "examples" / "anthropic_tools.py"),
                "--url",
                server.url,
                "--learner",
                learner,
                "--session",
                "s-cli",
                *SEARCH_QUESTIONS,
            ],
            env={**env, "ANTHROPIC_BASE_URL": api, "ANTHROPIC_API_KEY": "test"},
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert demo.returncode == 0, demo.stderr
        assert demo.stdout == "count\n42\n" * 3, demo.stdout
        requests = httpx.get(f"{api}/requests", timeout=30).json()
    finally:
        fake.terminate()
        fake.communicate(timeout=60)
    kept = check_tool_search_turns(requests)
    check_took_on(server, env, learner, kept, "run_sql")


def wait_until_up(proc: subprocess.Popen[str], url: str, timeout: float = 90.0) -> None:
    """Until `url` answers, or the process has exited (its stderr in the failure)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            httpx.get(url, timeout=2).raise_for_status()
            return
        except httpx.HTTPError:
            if proc.poll() is not None:
                raise AssertionError(f"exited {proc.returncode}: {proc.communicate()[1]}") from None
            if time.monotonic() > deadline:
                raise
        time.sleep(0.1)


# -- OpenAI Agents SDK ----------------------------------------------------------------------------


async def test_openai_agents_example(server: Served, env: dict[str, str]) -> None:
    from agents import Model, ModelResponse, Usage, set_tracing_disabled
    from openai.types.responses import (
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
    )

    set_tracing_disabled(True)
    offered: list[list[str]] = []
    systems: list[str] = []

    class ScriptedModel(Model):
        """The Agents SDK's Model interface: get_weather first, then the answer."""

        async def get_response(
            self,
            system_instructions: str | None,
            input: Any,
            model_settings: Any,
            tools: list[Any],
            output_schema: Any,
            handoffs: Any,
            tracing: Any,
            **kwargs: Any,
        ) -> ModelResponse:
            offered.append([t.name for t in ordinary(tools)])
            systems.append(system_instructions or "")
            answered = isinstance(input, list) and input[-1].get("type") == "function_call_output"
            usage = Usage(requests=1, input_tokens=120, output_tokens=12, total_tokens=132)
            if answered:
                text = ResponseOutputText(
                    type="output_text", text="Sunny and 21 C.", annotations=[]
                )
                item: Any = ResponseOutputMessage(
                    id="m1", type="message", role="assistant", status="completed", content=[text]
                )
            else:
                item = ResponseFunctionToolCall(
                    type="function_call",
                    id="f1",
                    call_id=f"c{len(offered)}",
                    name="get_weather",
                    arguments='{"city": "Lyon"}',
                    status="completed",
                )
            return ModelResponse(output=[item], usage=usage, response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError("the example does not stream")

    example = load("openai_agents")
    async with AsyncLearningClient(server.url, learner="examples-openai") as learning:
        for question in QUESTIONS:
            text = await example.answer(
                question, learning=learning, session_key="s-1", model=ScriptedModel()
            )
            assert text == "Sunny and 21 C."
    assert len(offered) == 4
    check_offered(offered, systems)
    check_learned(server, env, "examples-openai", "openai")


def ordinary(tools: list[Any]) -> list[Any]:
    """The Agents SDK tools sent as ordinary functions (not deferred, not tool search)."""
    from agents import FunctionTool

    return [t for t in tools if isinstance(t, FunctionTool) and not t.defer_loading]


class ToolSearchResponses:
    """A Responses API model for the Agents SDK, scripted as fake_messages_api is: after a
    function_call_output it answers with the output; a tool whose topic the question names is
    called if it is an ordinary tool or was loaded earlier in the conversation; a deferred one
    is found through tool search first (a tool_search_call, a tool_search_output holding the
    tool in its namespace, then the function_call, all in one response). Each call's tools,
    as the SDK would send them to the Responses API, are kept."""

    def __init__(self) -> None:
        self.sent: list[list[dict[str, Any]]] = []

    def model(self) -> Any:
        from agents import Model, ModelResponse, ToolSearchTool, Usage
        from agents.models.openai_responses import Converter
        from openai.types.responses import (
            ResponseFunctionToolCall,
            ResponseOutputMessage,
            ResponseOutputText,
            ResponseToolSearchCall,
            ResponseToolSearchOutputItem,
        )

        from .fake_messages_api import topic

        script = self

        class Scripted(Model):
            async def get_response(
                self,
                system_instructions: str | None,
                input: Any,
                model_settings: Any,
                tools: list[Any],
                output_schema: Any,
                handoffs: Any,
                tracing: Any,
                **kwargs: Any,
            ) -> ModelResponse:
                script.sent.append(
                    [
                        t if isinstance(t, dict) else t.model_dump()
                        for t in Converter.convert_tools(tools, []).tools
                    ]
                )
                n = len(script.sent)
                usage = Usage(requests=1, input_tokens=120, output_tokens=12, total_tokens=132)
                last = input[-1]
                if last.get("type") == "function_call_output":
                    text = ResponseOutputText(
                        type="output_text", text=str(last["output"]), annotations=[]
                    )
                    message = ResponseOutputMessage(
                        id=f"m{n}",
                        type="message",
                        role="assistant",
                        status="completed",
                        content=[text],
                    )
                    return ModelResponse(output=[message], usage=usage, response_id=None)
                question = str(last["content"]).lower()
                loaded = {
                    fn["name"]
                    for item in input
                    if item.get("type") == "tool_search_output"
                    for namespace in item["tools"]
                    for fn in namespace["tools"]
                }
                deferred = {t.name: t for t in tools if getattr(t, "defer_loading", False)}
                searchable = any(isinstance(t, ToolSearchTool) for t in tools)
                named = [
                    t for t in [*ordinary(tools), *deferred.values()] if topic(t.name) in question
                ]
                assert named, question
                tool = named[0]
                space = "team" if tool.name in deferred else None
                call = ResponseFunctionToolCall(
                    type="function_call",
                    id=f"f{n}",
                    call_id=f"c{n}",
                    name=tool.name,
                    namespace=space,
                    arguments='{"sql": "SELECT 42"}',
                    status="completed",
                )
                if space is None or tool.name in loaded:
                    return ModelResponse(output=[call], usage=usage, response_id=None)
                assert searchable
                found = ResponseToolSearchOutputItem.model_validate(
                    {
                        "id": f"ts{n}",
                        "call_id": f"s{n}",
                        "execution": "server",
                        "status": "completed",
                        "type": "tool_search_output",
                        "tools": [
                            {
                                "type": "namespace",
                                "name": "team",
                                "description": "More of the team's tools.",
                                "tools": [
                                    {
                                        "type": "function",
                                        "name": tool.name,
                                        "description": tool.description,
                                        "parameters": tool.params_json_schema,
                                        "defer_loading": True,
                                    }
                                ],
                            }
                        ],
                    }
                )
                search = ResponseToolSearchCall(
                    id=f"tc{n}",
                    call_id=f"s{n}",
                    arguments={"query": topic(tool.name)},
                    execution="server",
                    status="completed",
                    type="tool_search_call",
                )
                return ModelResponse(output=[search, found, call], usage=usage, response_id=None)

            def stream_response(self, *args: Any, **kwargs: Any) -> Any:
                raise NotImplementedError("the example does not stream")

        return Scripted()


async def test_openai_agents_example_takes_on_a_tool_found_through_tool_search(
    server: Served, env: dict[str, str]
) -> None:
    """Three turns of one session's conversation: the kept tools go first, every turn the
    same, then tool search and run_sql deferred in a namespace; turn 1 finds run_sql through
    tool search and calls it (reported loaded, so the session takes it on); turns 2 and 3 keep
    it deferred, as OpenAI wants an added tool, and the model calls it directly, the tool it
    loaded being in the conversation."""
    from agents import set_tracing_disabled

    set_tracing_disabled(True)
    example = load("openai_agents")
    scripted = ToolSearchResponses()
    learner = "examples-openai-search"
    async with AsyncLearningClient(server.url, learner=learner) as learning:
        for question in SEARCH_QUESTIONS:
            text = await example.answer(
                question, learning=learning, session_key="s-search", model=scripted.model()
            )
            assert text == "count\n42"
    assert len(scripted.sent) == 6
    assert len({json.dumps(tools) for tools in scripted.sent}) == 1  # the same every request
    tools = scripted.sent[0]
    kept = [t["name"] for t in tools if t["type"] == "function"]
    assert set(kept) == KEPT and tools[: len(kept)] == [t for t in tools if t["type"] == "function"]
    assert [t["type"] for t in tools[len(kept) :]] == ["tool_search", "namespace"]
    (namespace,) = tools[len(kept) + 1 :]
    assert [(t["name"], t["defer_loading"]) for t in namespace["tools"]] == [("run_sql", True)]
    conversation = await example.SESSIONS["s-search"].get_items()
    kinds = [item.get("type", "message") for item in conversation]
    assert kinds.count("tool_search_call") == 1  # searched once, on turn 1
    assert [i["name"] for i in conversation if i.get("type") == "function_call"] == ["run_sql"] * 3
    check_took_on(server, env, learner, kept, "run_sql", category="openai")


# -- LangGraph / LangChain ------------------------------------------------------------------------


async def test_langgraph_example(server: Served, env: dict[str, str]) -> None:
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.utils.function_calling import convert_to_openai_tool

    offered: list[list[str]] = []
    systems: list[str] = []

    class FakeToolChat(GenericFakeChatModel):
        """LangChain's fake chat model, with bind_tools recording the tools it is given."""

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:  # type: ignore[override]
            ordinary = [t for t in tools if not isinstance(t, dict)]
            ordinary = [t for t in ordinary if "defer_loading" not in (t.extras or {})]
            offered.append([convert_to_openai_tool(t)["function"]["name"] for t in ordinary])
            return self

        def _generate(self, messages: Any, *args: Any, **kwargs: Any) -> Any:
            systems.append(str(messages[0].content))
            return super()._generate(messages, *args, **kwargs)

    usage = {"input_tokens": 100, "output_tokens": 10, "total_tokens": 110}
    script = [
        AIMessage(
            "",
            tool_calls=[{"name": "get_weather", "args": {"city": "Lyon"}, "id": "c1"}],
            usage_metadata=usage,
        ),
        AIMessage("Sunny and 21 C.", usage_metadata=usage),
    ]
    model = FakeToolChat(messages=iter(script * 2))
    example = load("langgraph_tools")
    async with AsyncLearningClient(server.url, learner="examples-langgraph") as learning:
        for question in QUESTIONS:
            text = await example.answer(question, learning=learning, model=model, session_key="s-1")
            assert text == "Sunny and 21 C."
    assert len(offered) == 2 and len(systems) == 4
    check_offered(offered, systems)
    check_learned(server, env, "examples-langgraph", "langchain")


async def test_langgraph_example_takes_on_a_tool_found_through_tool_search(
    server: Served, env: dict[str, str]
) -> None:
    """Three turns of one session through a chat model with Anthropic's tool search: turn 1
    binds the kept tools (cache_control on the last), the tool search tool and run_sql with
    defer_loading; the model finds run_sql and calls it (reported loaded); turns 2 and 3 bind
    it plain after the kept ones and the model calls it directly."""
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    from langchain_core.outputs import ChatGeneration, ChatResult

    from .fake_messages_api import topic

    bound: list[list[Any]] = []

    class SearchingChat(GenericFakeChatModel):
        """Answers as fake_messages_api does, from the tools last bound."""

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:  # type: ignore[override]
            bound.append(
                [t if isinstance(t, dict) else {"name": t.name, **(t.extras or {})} for t in tools]
            )
            return self

        def _generate(self, messages: Any, *args: Any, **kwargs: Any) -> Any:
            usage = {"input_tokens": 100, "output_tokens": 10, "total_tokens": 110}
            if isinstance(messages[-1], ToolMessage):
                reply = AIMessage(str(messages[-1].content), usage_metadata=usage)
                return ChatResult(generations=[ChatGeneration(message=reply)])
            question = next(str(m.content) for m in messages if isinstance(m, HumanMessage))
            tools = bound[-1]
            sent = [t["name"] for t in tools if "type" not in t and not t.get("defer_loading")]
            deferred = [t["name"] for t in tools if t.get("defer_loading")]
            name = next(n for n in sent + deferred if topic(n) in question.lower())
            content: list[Any] = []
            if name in deferred:
                content = [
                    {
                        "type": "server_tool_use",
                        "id": "srvtoolu_1",
                        "name": "tool_search_tool_bm25",
                        "input": {"query": topic(name)},
                    },
                    {
                        "type": "tool_search_tool_result",
                        "tool_use_id": "srvtoolu_1",
                        "content": {
                            "type": "tool_search_tool_search_result",
                            "tool_references": [{"type": "tool_reference", "tool_name": name}],
                        },
                    },
                ]
            call = {"name": name, "args": {"sql": "SELECT 42"}, "id": f"c{len(bound)}"}
            reply = AIMessage(content, tool_calls=[call], usage_metadata=usage)
            return ChatResult(generations=[ChatGeneration(message=reply)])

    example = load("langgraph_tools")
    learner = "examples-langgraph-search"
    async with AsyncLearningClient(server.url, learner=learner) as learning:
        for question in SEARCH_QUESTIONS:
            model = SearchingChat(messages=iter(()))
            text = await example.answer(
                question, learning=learning, model=model, session_key="s-search"
            )
            assert text == "count\n42"
    assert len(bound) == 3  # one graph per turn
    end = next(i for i, t in enumerate(bound[0]) if "cache_control" in t) + 1
    kept = [t["name"] for t in bound[0][:end]]
    assert set(kept) == KEPT and all(b[:end] == bound[0][:end] for b in bound)
    assert bound[0][end:] == [example.TOOL_SEARCH, {"name": "run_sql", "defer_loading": True}]
    assert bound[1][end:] == bound[2][end:] == [{"name": "run_sql"}]
    check_took_on(server, env, learner, kept, "run_sql", category="langchain")


# -- pydantic-ai ----------------------------------------------------------------------------------


async def test_pydantic_ai_example(server: Served, env: dict[str, str]) -> None:
    from pydantic_ai.messages import (
        ModelMessage,
        ModelRequest,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
    )
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    offered: list[list[str]] = []
    systems: list[str] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        offered.append([t.name for t in info.function_tools])
        systems.append(info.instructions or "")
        last = messages[-1]
        if isinstance(last, ModelRequest) and any(
            isinstance(p, ToolReturnPart) for p in last.parts
        ):
            return ModelResponse(parts=[TextPart("Sunny and 21 C.")])
        return ModelResponse(parts=[ToolCallPart("get_weather", {"city": "Lyon"})])

    example = load("pydantic_ai_tools")
    async with AsyncLearningClient(server.url, learner="examples-pydantic-ai") as learning:
        for question in QUESTIONS:
            text = await example.answer(
                question, learning=learning, model=FunctionModel(model), session_key="s-1"
            )
            assert text == "Sunny and 21 C."
    assert len(offered) == 4
    check_offered(offered, systems)
    check_learned(server, env, "examples-pydantic-ai", "pydantic-ai")


async def test_pydantic_ai_example_takes_on_a_tool_found_through_tool_search(
    server: Served, env: dict[str, str]
) -> None:
    """Three turns of one session through a model that finds tools with pydantic-ai's tool
    search (its local `search_tools` where the model has no native one): turn 1 searches,
    finds the deferred run_sql and calls it (reported loaded); turns 2 and 3 get it as an
    ordinary tool after the kept ones and call it directly; the kept tools lead every
    request, in the same order."""
    from pydantic_ai.messages import (
        ModelMessage,
        ModelRequest,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        ToolSearchReturnPart,
        UserPromptPart,
    )
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from .fake_messages_api import topic

    offered: list[list[tuple[str, bool]]] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        offered.append([(t.name, t.defer_loading) for t in info.function_tools])
        question = next(
            str(p.content)
            for m in messages
            if isinstance(m, ModelRequest)
            for p in m.parts
            if isinstance(p, UserPromptPart)
        ).lower()
        last = messages[-1].parts
        returned = [p for p in last if isinstance(p, ToolReturnPart)]
        if returned and not isinstance(returned[0], ToolSearchReturnPart):
            return ModelResponse(parts=[TextPart(str(returned[0].content))])
        named = [t.name for t in info.function_tools if topic(t.name) in question]
        if named:
            return ModelResponse(parts=[ToolCallPart(named[0], {"sql": "SELECT 42"})])
        return ModelResponse(parts=[ToolCallPart("search_tools", {"queries": question.split()})])

    example = load("pydantic_ai_tools")
    learner = "examples-pydantic-ai-search"
    async with AsyncLearningClient(server.url, learner=learner) as learning:
        for question in SEARCH_QUESTIONS:
            text = await example.answer(
                question, learning=learning, model=FunctionModel(model), session_key="s-search"
            )
            assert text == "count\n42"
    kept = [name for name, _ in offered[0]]
    assert set(kept) == KEPT and all(o[:2] == offered[0] for o in offered), offered
    # turn 1: search, then run_sql (found, deferred) called, then the answer
    assert offered[:3] == [
        offered[0],
        offered[0] + [("run_sql", True)],
        offered[0] + [("run_sql", True)],
    ]
    # turns 2 and 3: run_sql an ordinary tool after the kept ones, called directly
    assert offered[3:] == [offered[0] + [("run_sql", False)]] * 4
    check_took_on(server, env, learner, kept, "run_sql", category="pydantic-ai")


def test_the_docs_show_the_anthropic_example_as_it_is() -> None:
    example = (REPO / "examples" / "anthropic_tools.py").read_text()
    assert f"```python\n{example}```" in (REPO / "docs" / "python.md").read_text()


def test_every_example_is_run_here() -> None:
    names = {p.stem for p in (REPO / "examples").glob("*.py")}
    tested = Path(__file__).read_text()
    assert names and all(f'load("{name}")' in tested for name in names), names
