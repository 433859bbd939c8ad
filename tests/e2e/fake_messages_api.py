"""A scripted Anthropic Messages API that implements tool search, for the examples' tests.

    python tests/e2e/fake_messages_api.py --port 8788
    ANTHROPIC_BASE_URL=http://127.0.0.1:8788 ANTHROPIC_API_KEY=test \\
        python examples/anthropic_tools.py --session s-1 "How many signups? Ask SQL."

`POST /v1/messages` answers as Claude would with tools, by a script: a tool's topic is its name
after the verb (get_weather: "weather", run_sql: "sql"). After a `tool_result` it answers text
(the results). Else, if the question mentions the topic of a tool sent in `tools`, it calls that
tool; if it mentions a deferred tool's topic (`defer_loading: true`, beside a tool search tool),
it searches for it and loads it, as the API does: a `server_tool_use` of the tool search tool, a
`tool_search_tool_result` holding a `tool_reference` to the tool, then a `tool_use` of it.
Otherwise it answers that it cannot help.

Its usage prices a prompt cache: the tools up to the one marked `cache_control` are the cached
prefix (the prompt runs tools, system, messages), written the first time it is seen
(`cache_creation_input_tokens`) and read afterwards (`cache_read_input_tokens`); the rest is
`input_tokens`. Sizes are a character count over 4. `GET /requests` lists the request bodies
received; `GET /healthz` answers once it listens.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import threading
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route


def topic(name: str) -> str:
    """The tool's topic: its name after the verb (run_sql: "sql")."""
    return name.split("_", 1)[-1].replace("_", " ").lower()


def tokens(value: Any) -> int:
    return max(1, len(json.dumps(value, sort_keys=True)) // 4)


class MessagesScript:
    """The scripted model and the prompt cache it bills; thread-safe, its requests and
    answers kept."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.answers: list[dict[str, Any]] = []
        self._cached: set[str] = set()
        self._lock = threading.Lock()

    def respond(self, body: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self.requests.append(body)
            number = len(self.requests)
            usage = self._usage(body)
        content, stop = self._content(body, number)
        answer = {
            "id": f"msg_{number}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "claude"),
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": usage,
        }
        with self._lock:
            self.answers.append(answer)
        return answer

    def _content(self, body: dict[str, Any], number: int) -> tuple[list[dict[str, Any]], str]:
        last = body["messages"][-1]["content"]
        if isinstance(last, list) and any(b.get("type") == "tool_result" for b in last):
            results = [str(b.get("content", "")) for b in last if b.get("type") == "tool_result"]
            return [{"type": "text", "text": " ".join(results)}], "end_turn"
        question = last if isinstance(last, str) else " ".join(b.get("text", "") for b in last)
        question = question.lower()
        tools = body.get("tools") or []
        search = next((t for t in tools if str(t.get("type", "")).startswith("tool_search")), None)
        sent = [t for t in tools if "type" not in t and not t.get("defer_loading")]
        deferred = [t for t in tools if "type" not in t and t.get("defer_loading")]
        for tool in sent:
            if topic(tool["name"]) in question:
                return [self._use(tool, question, number)], "tool_use"
        for tool in deferred if search is not None else []:
            if topic(tool["name"]) in question:
                assert search is not None
                search_id = f"srvtoolu_{number}"
                return [
                    {
                        "type": "server_tool_use",
                        "id": search_id,
                        "name": search["name"],
                        "input": {"query": topic(tool["name"])},
                    },
                    {
                        "type": "tool_search_tool_result",
                        "tool_use_id": search_id,
                        "content": {
                            "type": "tool_search_tool_search_result",
                            "tool_references": [
                                {"type": "tool_reference", "tool_name": tool["name"]}
                            ],
                        },
                    },
                    self._use(tool, question, number),
                ], "tool_use"
        return [{"type": "text", "text": "I cannot help with that."}], "end_turn"

    @staticmethod
    def _use(tool: dict[str, Any], question: str, number: int) -> dict[str, Any]:
        schema = tool.get("input_schema") or {}
        required = list(schema.get("required") or schema.get("properties") or [])
        return {
            "type": "tool_use",
            "id": f"toolu_{number}",
            "name": tool["name"],
            "input": dict.fromkeys(required[:1], question),
        }

    def _usage(self, body: dict[str, Any]) -> dict[str, int]:
        tools = body.get("tools") or []
        marked = [i for i, t in enumerate(tools) if "cache_control" in t]
        prefix = (
            tools[: marked[-1] + 1] if marked else []
        )  # the prompt runs tools, system, messages
        rest = [tools[len(prefix) :], body.get("system", ""), body["messages"]]
        cached = tokens(prefix) if prefix else 0
        key = hashlib.sha256(json.dumps(prefix, sort_keys=True).encode()).hexdigest()
        hit = bool(prefix) and key in self._cached
        if prefix:
            self._cached.add(key)
        return {
            "input_tokens": tokens(rest),
            "output_tokens": 20,
            "cache_read_input_tokens": cached if hit else 0,
            "cache_creation_input_tokens": 0 if hit else cached,
        }


def app(script: MessagesScript | None = None) -> Starlette:
    script = script or MessagesScript()

    async def messages(request: Request) -> JSONResponse:
        return JSONResponse(script.respond(await request.json()))

    async def requests(request: Request) -> JSONResponse:
        return JSONResponse(script.requests)

    async def healthz(request: Request) -> JSONResponse:
        return JSONResponse({"ok": True})

    return Starlette(
        routes=[
            Route("/v1/messages", messages, methods=["POST"]),
            Route("/requests", requests),
            Route("/healthz", healthz),
        ]
    )


def main() -> None:
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8788)
    args = parser.parse_args()
    uvicorn.run(app(), host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
