"""Synthetic agent logs in the Anthropic Messages envelope, for the replay tests and
bench/replay.py: `write_log` writes `lines` requests of interleaved conversations, one
`{"timestamp", "request", "response"}` object per line, each request's messages extending the
conversation's previous request with its reply and the tool's result."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from learning_bot.engine.arms import estimate_tokens

MODEL = "claude-sonnet-4-5"
SYSTEM_TOKENS = 1_500
"""The prompt beside the tools and the conversation, in each request's usage."""
START_MS = 1_793_600_000_000


def tool(i: int, words: int = 0) -> dict[str, Any]:
    """Tool i; `words` more words of description make its definition bigger."""
    more = " ".join(f"detail{j}" for j in range(words))
    return {
        "name": f"tool_{i:02d}",
        "description": f"Does task number {i} for the user and returns its result as text {more}",
        "input_schema": {
            "type": "object",
            "properties": {"query": {"type": "string", "description": "what to do"}},
            "required": ["query"],
        },
    }


@dataclass
class _Conversation:
    number: int
    turns_left: int
    messages: list[dict[str, Any]] = field(default_factory=list)
    prompt_tokens: int = 0


@dataclass(frozen=True)
class Written:
    lines: int
    conversations: int
    tool_calls: int
    """Lines whose reply called a tool."""


def write_log(
    path: Path,
    lines: int,
    *,
    seed: int = 0,
    tools: int = 10,
    concurrent: int = 20,
    mean_turns: int = 6,
    bad_every: int = 0,
    max_gap_ms: int = 4_000,
    tool_words: int = 0,
) -> Written:
    """Write `lines` requests of conversations `concurrent` at a time; with `bad_every`, every
    so many lines one is cut short (not JSON). Tool i is called with weight 1/(i+1); lines
    come 0.2 s to `max_gap_ms` apart."""
    rng = random.Random(seed)
    definitions = [tool(i, tool_words) for i in range(tools)]
    weights = [1.0 / (i + 1) for i in range(tools)]
    tool_tokens = sum(estimate_tokens(d) for d in definitions)
    open_: list[_Conversation] = []
    started = calls = 0
    written: set[int] = set()
    now = START_MS
    with path.open("w", encoding="utf-8") as out:
        for line in range(1, lines + 1):
            if bad_every and line % bad_every == 0:
                out.write('{"request": {"model": "cut short\n')
                continue
            if len(open_) < concurrent:
                started += 1
                first = {"role": "user", "content": f"Conversation {started}: please help"}
                turns = max(1, int(rng.expovariate(1 / mean_turns)) + 1)
                open_.append(_Conversation(started, turns, [first]))
            conv = rng.choice(open_)
            now += rng.randint(200, max_gap_ms)
            if rng.random() < 0.3:
                content: list[dict[str, Any]] = [{"type": "text", "text": "Done."}]
                stop = "end_turn"
            else:
                name = rng.choices(definitions, weights)[0]["name"]
                call_id = f"toolu_{conv.number}_{len(conv.messages)}"
                content = [
                    {"type": "tool_use", "id": call_id, "name": name, "input": {"query": "x"}}
                ]
                stop = "tool_use"
                calls += 1
            size = len(json.dumps(conv.messages)) // 4 + tool_tokens + SYSTEM_TOKENS
            cached = conv.prompt_tokens
            request = {"model": MODEL, "max_tokens": 1024, "tools": definitions}
            request["messages"] = conv.messages
            response = {
                "id": f"msg_{line}",
                "type": "message",
                "role": "assistant",
                "model": MODEL,
                "content": content,
                "stop_reason": stop,
                "usage": {
                    "input_tokens": 20,
                    "output_tokens": 30,
                    "cache_read_input_tokens": cached,
                    "cache_creation_input_tokens": max(size - cached - 20, 0),
                },
            }
            out.write(
                json.dumps({"timestamp": now, "request": request, "response": response}) + "\n"
            )
            conv.prompt_tokens = size
            written.add(conv.number)
            conv.turns_left -= 1
            if conv.turns_left <= 0:
                open_.remove(conv)
                continue
            conv.messages = [*conv.messages, {"role": "assistant", "content": content}]
            if stop == "tool_use":
                result = {"type": "tool_result", "tool_use_id": content[0]["id"], "content": "ok"}
                conv.messages.append({"role": "user", "content": [result]})
            else:
                conv.messages.append({"role": "user", "content": "and then?"})
    return Written(lines, len(written), calls)
