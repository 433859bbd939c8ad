"""The shapes of agent logs `learning-bot replay` reads, each line recognised from its content.

- **Anthropic Messages**: `{"request": {model, system, tools, messages}, "response": {content,
  usage}}`, the envelope logging proxies write (each part may wrap its JSON in `body`). Tools
  are the request's `tools`, tool calls the response's `tool_use` (and `server_tool_use`)
  blocks; usage `input_tokens` (uncached), `cache_read_input_tokens`,
  `cache_creation_input_tokens`, `output_tokens`.
- **OpenAI Chat Completions**: the same envelope, request `messages` and `tools` (or the older
  `functions`), response `choices[0].message.tool_calls` (or `function_call`); usage
  `prompt_tokens` includes `prompt_tokens_details.cached_tokens`, which are read from the cache.
- **OpenAI Responses**: the same envelope, request `input` (a string or items) and `tools`,
  response `output` items of type `function_call` (built-in tools: `<type>_call`); usage
  `input_tokens` includes `input_tokens_details.cached_tokens`. `previous_response_id` chains a
  request to the reply it continues.
- **OpenClaw session transcripts** (`~/.openclaw/agents/<agent>/sessions/<id>.jsonl`): a
  `{"type": "session", "id": ...}` header, then `{"type": "message", "message": {...}}`
  entries; every assistant message is one model call, with its `toolCall` blocks, `usage`
  (`input`, `output`, `cacheRead`, `cacheWrite`), `provider` and `model`. Transcripts do not
  record the tool definitions: they come from `--tools FILE` or from the tools called.

`parse_line` turns one decoded line into an `Exchange` (or None for a line that is valid but is
not a model call, such as a transcript's header or a user message), or raises `LineError`
naming the field that is wrong.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from learning_bot.engine.arms import Arm, estimate_tokens
from learning_bot.engine.bounds import MAX_TIMESTAMP_MS
from learning_bot.engine.errors import InvalidInput
from learning_bot.engine.usage import Usage

ANTHROPIC = "anthropic"
OPENAI_CHAT = "openai-chat"
OPENAI_RESPONSES = "openai-responses"
OPENCLAW = "openclaw"
FORMATS = (ANTHROPIC, OPENAI_CHAT, OPENAI_RESPONSES, OPENCLAW)
"""Every shape read, as `ReadSummary.formats` names them."""

TOOL_CATEGORY = "agent"
"""The category of a tool's arm (`tool:agent:<name>`), as learning_bot.client.ArmSpec.tool
names it by default."""


class LineError(ValueError):
    """A line that cannot be read; the message names the field and what is wrong."""


@dataclass(frozen=True, slots=True)
class Exchange:
    """One model call and its reply, as a log line tells it."""

    format: str
    provider: str
    model: str
    tools: tuple[Arm, ...] | None
    """The tools the request offered (None: the log does not record them)."""
    calls: tuple[str, ...]
    """Names of the tools the reply called, in order."""
    usage: Usage
    timestamp: int | None
    """Unix milliseconds, when the line says."""
    messages: Sequence[Any] = ()
    """The request's conversation items, to tell which conversation it continues."""
    response_id: str = ""
    previous_id: str = ""
    """The reply this request continues (Responses' `previous_response_id`)."""
    error: str | None = None
    """The reply was an error (the run teaches nothing)."""
    session: str = ""
    """The session the log names (a transcript's), else empty: found from the messages."""


@dataclass(slots=True)
class FileState:
    """What a file's earlier lines said that later ones need (a transcript's session id)."""

    session: str = ""


def tool_arm(name: Any, definition: Mapping[str, Any], where: str) -> Arm:
    """The arm of a tool definition: `tool:agent:<name>`, costing the definition's token
    estimate (engine.arms.estimate_tokens, as ArmSpec.tool costs it)."""
    if not isinstance(name, str) or not name:
        raise LineError(f"{where}.name is missing or not a string")
    described = definition.get("description")
    try:
        return Arm(
            f"tool:{TOOL_CATEGORY}:{name}",
            estimate_tokens(dict(definition)),
            name,
            description=described[:4000] if isinstance(described, str) and described else None,
        )
    except InvalidInput as exc:
        raise LineError(f"{where}: {exc}") from None


_TOOL_LISTS: dict[str, tuple[Arm, ...]] = {}
_TOOL_LISTS_SIZE = 256


def tools_of(raw: Any, where: str) -> tuple[Arm, ...]:
    """The arms of a list of tool definitions in any of the three request shapes (Anthropic
    `{name, input_schema}`, Chat Completions `{type: function, function: {name, ...}}`,
    Responses `{type: function, name}` or a built-in `{type: web_search}`).

    Requests repeat their tool list: a list already read is taken from a small cache."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise LineError(f"{where} must be a list")
    try:
        key = json.dumps(raw, separators=(",", ":"))
    except (TypeError, ValueError):
        key = ""
    found = _TOOL_LISTS.get(key) if key else None
    if found is None:
        found = _read_tools(raw, where)
        if key:
            if len(_TOOL_LISTS) >= _TOOL_LISTS_SIZE:
                _TOOL_LISTS.clear()
            _TOOL_LISTS[key] = found
    return found


def _read_tools(raw: list[Any], where: str) -> tuple[Arm, ...]:
    arms: dict[str, Arm] = {}
    for i, tool in enumerate(raw):
        here = f"{where}[{i}]"
        if not isinstance(tool, Mapping):
            raise LineError(f"{here} must be an object")
        function = tool.get("function")
        if isinstance(function, Mapping):
            name = function.get("name")
            here = f"{here}.function"
        elif tool.get("type") in (None, "function", "custom"):
            name = tool.get("name")
        else:  # a built-in tool (web_search, file_search...) is named by its type
            name = tool.get("name") or tool.get("type")
        arm = tool_arm(name, tool, here)
        arms.setdefault(arm.id, arm)
    return tuple(arms.values())


def parse_line(data: Any, state: FileState) -> Exchange | None:
    """The exchange one decoded line records, None for a valid line that is not a model call,
    or LineError saying why it cannot be read."""
    if not isinstance(data, Mapping):
        raise LineError("the line is not a JSON object")
    request = _body(data.get("request"))
    response = _body(data.get("response"))
    if isinstance(request, Mapping) and isinstance(response, Mapping):
        when = _timestamp(data.get("timestamp", data.get("time")), "timestamp")
        if "input" in request or "output" in response or response.get("object") == "response":
            return _responses(request, response, when)
        if "choices" in response or response.get("object") == "chat.completion":
            return _chat(request, response, when)
        if "messages" in request:
            return _anthropic(request, response, when)
        raise LineError("request and response are neither Anthropic Messages nor OpenAI shapes")
    if "request" in data or "response" in data:
        missing = "response" if isinstance(request, Mapping) else "request"
        raise LineError(f"{missing} is missing or not an object")
    kind = data.get("type")
    if kind == "session" or (kind == "message" and isinstance(data.get("message"), Mapping)):
        return _openclaw(data, state)
    if isinstance(kind, str) and ("parentId" in data or state.session):
        return None  # another transcript entry (compaction, model change...): no model call
    raise LineError(
        "not a recognised shape (expected {request, response} or an OpenClaw transcript entry)"
    )


# -- each shape ---------------------------------------------------------------------------------


def _anthropic(
    request: Mapping[str, Any], response: Mapping[str, Any], when: int | None
) -> Exchange:
    messages = _list(request.get("messages"), "request.messages")
    calls: list[str] = []
    content = _list(response.get("content") or [], "response.content")
    for i, block in enumerate(content):
        if isinstance(block, Mapping) and block.get("type") in ("tool_use", "server_tool_use"):
            calls.append(_name(block.get("name"), f"response.content[{i}].name"))
    usage = _usage(
        _mapping(response.get("usage"), "response.usage"),
        "response.usage",
        input="input_tokens",
        output="output_tokens",
        cache_read="cache_read_input_tokens",
        cache_write="cache_creation_input_tokens",
    )
    tools = tools_of(request.get("tools"), "request.tools")
    return _exchange(ANTHROPIC, "anthropic", request, response, tools, calls, usage, when, messages)


def _chat(request: Mapping[str, Any], response: Mapping[str, Any], when: int | None) -> Exchange:
    messages = _list(request.get("messages"), "request.messages")
    tools = tools_of(request.get("tools"), "request.tools")
    if request.get("functions") is not None:
        tools += tools_of(request.get("functions"), "request.functions")
    calls: list[str] = []
    choices = _list(response.get("choices") or [], "response.choices")
    if choices:
        choice = _mapping(choices[0], "response.choices[0]")
        message = _mapping(choice.get("message"), "response.choices[0].message")
        for i, call in enumerate(message.get("tool_calls") or []):
            where = f"response.choices[0].message.tool_calls[{i}]"
            function = _mapping(_mapping(call, where).get("function"), f"{where}.function")
            calls.append(_name(function.get("name"), f"{where}.function.name"))
        legacy = message.get("function_call")
        if isinstance(legacy, Mapping):
            calls.append(_name(legacy.get("name"), "response.choices[0].message.function_call"))
    usage = _openai_usage(response, "prompt_tokens", "completion_tokens")
    if when is None:
        when = _timestamp(response.get("created"), "created")
    return _exchange(OPENAI_CHAT, "openai", request, response, tools, calls, usage, when, messages)


def _responses(
    request: Mapping[str, Any], response: Mapping[str, Any], when: int | None
) -> Exchange:
    items = request.get("input", [])
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    if not isinstance(items, list):
        raise LineError("request.input must be a string or a list")
    calls: list[str] = []
    output = _list(response.get("output") or [], "response.output")
    for i, item in enumerate(output):
        if not isinstance(item, Mapping):
            continue
        kind = item.get("type")
        if kind in ("function_call", "custom_tool_call"):
            calls.append(_name(item.get("name"), f"response.output[{i}].name"))
        elif isinstance(kind, str) and kind.endswith("_call"):
            calls.append(kind.removesuffix("_call"))  # a built-in tool: web_search_call...
    usage = _openai_usage(response, "input_tokens", "output_tokens")
    if when is None:
        when = _timestamp(response.get("created_at"), "created_at")
    tools = tools_of(request.get("tools"), "request.tools")
    previous = _text(request.get("previous_response_id"), "request.previous_response_id")
    return _exchange(
        OPENAI_RESPONSES, "openai", request, response, tools, calls, usage, when, items, previous
    )


def _exchange(
    fmt: str,
    provider: str,
    request: Mapping[str, Any],
    response: Mapping[str, Any],
    tools: tuple[Arm, ...] | None,
    calls: list[str],
    usage: Usage,
    when: int | None,
    messages: Sequence[Any],
    previous: str = "",
) -> Exchange:
    """An exchange of a provider's request and response: what the three shapes read alike (the
    model, the response's id and error)."""
    return Exchange(
        format=fmt,
        provider=provider,
        model=_text(response.get("model") or request.get("model"), "request.model"),
        tools=tools,
        calls=tuple(calls),
        usage=usage,
        timestamp=when,
        messages=messages,
        response_id=_text(response.get("id"), "response.id"),
        previous_id=previous,
        error=_error(response),
    )


def _openclaw(data: Mapping[str, Any], state: FileState) -> Exchange | None:
    if data.get("type") == "session":
        state.session = _text(data.get("id"), "id")
        return None
    message = data["message"]
    if message.get("role") != "assistant":
        return None  # the user's message or a tool's result: the conversation, no model call
    if message.get("provider") == "openclaw":
        return None  # a reply the gateway mirrored into the transcript, not a model call
    content = message.get("content") or []
    calls: list[str] = []
    if isinstance(content, list):
        for i, block in enumerate(content):
            if isinstance(block, Mapping) and block.get("type") == "toolCall":
                calls.append(_name(block.get("name"), f"message.content[{i}].name"))
    elif not isinstance(content, str):
        raise LineError("message.content must be a list or a string")
    usage = _mapping(message.get("usage"), "message.usage")
    when = _timestamp(message.get("timestamp"), "message.timestamp")
    failed = message.get("stopReason") in ("error", "aborted")
    return Exchange(
        format=OPENCLAW,
        provider=_text(message.get("provider"), "message.provider"),
        model=_text(message.get("model"), "message.model"),
        tools=None,
        calls=tuple(calls),
        usage=_usage(
            usage,
            "message.usage",
            input="input",
            output="output",
            cache_read="cacheRead",
            cache_write="cacheWrite",
        ),
        timestamp=when if when is not None else _timestamp(data.get("timestamp"), "timestamp"),
        error=str(message.get("errorMessage") or "error")[:1000] if failed else None,
    )


# -- fields ---------------------------------------------------------------------------------------


def _body(part: Any) -> Any:
    """A request or response, or the `body` it wraps (proxies that log HTTP exchanges keep
    headers and status beside it)."""
    if isinstance(part, Mapping) and isinstance(part.get("body"), Mapping):
        return part["body"]
    return part


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise LineError(f"{where} must be an object")
    return value


def _text(value: Any, where: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise LineError(f"{where} must be a string")
    return value[:256]


def _name(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise LineError(f"{where} is missing or not a string")
    return value


def _count(value: Any, where: str) -> int:
    if value is None:
        return 0
    if type(value) is not int or value < 0:
        raise LineError(f"{where} must be a whole number of tokens, got {value!r:.40}")
    return value


def _usage(raw: Mapping[str, Any], where: str, **parts: str | int) -> Usage:
    """Usage from `raw`: each part the count under the key given (or a count already read)."""
    counts = {
        part: key if isinstance(key, int) else _count(raw.get(key), f"{where}.{key}")
        for part, key in parts.items()
    }
    return Usage(**counts)


def _list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise LineError(f"{where} must be a list")
    return value


def _openai_usage(response: Mapping[str, Any], prompt_key: str, output_key: str) -> Usage:
    """Usage from an OpenAI response: the prompt's count under `prompt_key` holds its cached
    tokens (under `<prompt_key>_details.cached_tokens`), which count apart as cache reads."""
    usage = _mapping(response.get("usage"), "response.usage")
    prompt = _count(usage.get(prompt_key), f"response.usage.{prompt_key}")
    where = f"response.usage.{prompt_key}_details"
    details = _mapping(usage.get(f"{prompt_key}_details"), where)
    cached = _count(details.get("cached_tokens"), f"{where}.cached_tokens")
    return _usage(
        usage,
        "response.usage",
        input=max(prompt - cached, 0),
        output=output_key,
        cache_read=min(cached, prompt) if prompt else cached,
    )


def _error(response: Mapping[str, Any]) -> str | None:
    error = response.get("error")
    if error is None or error == {}:
        return None
    if isinstance(error, Mapping):
        return str(error.get("message") or error.get("type") or "error")[:1000]
    return str(error)[:1000]


def _timestamp(value: Any, where: str) -> int | None:
    """Unix milliseconds from an ISO 8601 text or a number of seconds or milliseconds."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise LineError(f"{where} must be a time")
    if isinstance(value, (int, float)):
        if not math.isfinite(value) or value < 0:
            raise LineError(f"{where} must be a time, got {value!r}")
        ms = int(value if value > 100_000_000_000 else value * 1000)
    elif isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            raise LineError(f"{where} is not an ISO 8601 time: {value[:40]!r}") from None
        if parsed.tzinfo is None:
            from datetime import UTC

            parsed = parsed.replace(tzinfo=UTC)
        ms = int(parsed.timestamp() * 1000)
    else:
        raise LineError(f"{where} must be a time")
    if not 0 <= ms <= MAX_TIMESTAMP_MS:
        raise LineError(f"{where} is out of range")
    return ms
