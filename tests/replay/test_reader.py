"""Agent logs read into runs: each shape from the providers' documented examples, requests
grouped into conversations, unreadable lines named, and a long log streamed in bounded
memory."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import pytest

from learning_bot.engine.errors import InvalidInput
from learning_bot.engine.observation import SkipReason
from learning_bot.engine.records import RunRecord
from learning_bot.replay.reader import ASSUMED_TOOL_TOKENS, LogReader, load_tools, read_all
from tests.replay.logs import write_log

FIXTURES = Path(__file__).parent / "fixtures"


def used(record: RunRecord) -> set[str]:
    return {a.label for a in record.arms if a.referenced}


def test_anthropic_messages_exchanges() -> None:
    runs, summary = read_all([str(FIXTURES / "anthropic.jsonl")])
    assert [r.trace_id for r in runs] == [
        "anthropic.jsonl:1",
        "anthropic.jsonl:2",
        "anthropic.jsonl:3",
        "anthropic.jsonl:5",
    ]
    # each request offers its three tools, costed from their JSON definitions
    defs = json.loads((FIXTURES / "anthropic.jsonl").read_text().splitlines()[0])
    weather = defs["request"]["tools"][0]
    compact = json.dumps(weather, separators=(",", ":"), ensure_ascii=False)
    assert runs[0].arms[0].token_cost == -(-len(compact) // 4)
    assert [a.label for a in runs[0].arms] == ["get_weather", "get_time", "get_stock_price"]
    assert all(a.included for r in runs for a in r.arms)
    assert [used(r) for r in runs] == [{"get_weather"}, set(), {"get_weather", "get_time"}, set()]
    talk = SkipReason.CONVERSATIONAL
    assert [r.guard for r in runs] == [None, talk, None, talk]
    # two conversations: the first one's cache marker moved between its requests
    assert runs[0].session_key == runs[1].session_key != runs[2].session_key == runs[3].session_key
    assert summary.sessions == 2
    assert runs[1].usage.cache_read == 540 and runs[1].usage.input == 30
    assert runs[2].usage.cache_write == 560 and runs[2].usage.output == 120
    assert runs[0].provider == "anthropic" and runs[0].model == "claude-sonnet-4-5"
    assert runs[1].timestamp - runs[0].timestamp == 4000


def test_openai_chat_completions_exchanges() -> None:
    runs, summary = read_all([str(FIXTURES / "openai_chat.jsonl")])
    assert len(runs) == 2 and summary.sessions == 1
    assert used(runs[0]) == {"get_current_weather"}
    assert [a.label for a in runs[0].arms] == ["get_current_weather", "search_web"]
    # prompt_tokens include the cached ones: 1,210 of which 1,024 were read from the cache
    assert (runs[1].usage.input, runs[1].usage.cache_read) == (186, 1024)
    assert runs[0].timestamp == 1699896916000 and runs[0].provider == "openai"


def test_openai_responses_exchanges_chained_by_previous_response_id() -> None:
    runs, summary = read_all([str(FIXTURES / "openai_responses.jsonl")])
    assert len(runs) == 3
    assert used(runs[0]) == {"get_weather"}
    assert used(runs[2]) == {"web_search"}  # a built-in tool's call item
    assert runs[0].session_key == runs[1].session_key != runs[2].session_key
    assert (runs[1].usage.input, runs[1].usage.cache_read) == (84, 256)
    assert summary.bad_lines == 1
    assert str(summary.named[0]) == (
        "openai_responses.jsonl:4: request.tools[0].name is missing or not a string"
    )


def test_openclaw_transcript_with_and_without_tool_definitions() -> None:
    path = str(FIXTURES / "openclaw-session.jsonl")
    tools = load_tools(FIXTURES / "openclaw-tools.json")
    runs, summary = read_all([path], tools=tools)
    assert [r.trace_id for r in runs] == [
        "openclaw-session.jsonl:3",
        "openclaw-session.jsonl:5",
        "openclaw-session.jsonl:8",
    ]
    assert {r.session_key for r in runs} == {"openclaw:7f1c2d3e-claw"}
    assert [a.label for a in runs[0].arms] == ["exec", "read", "web_fetch", "message"]
    assert [used(r) for r in runs] == [{"exec"}, set(), {"web_fetch"}]
    assert runs[0].usage.cache_write == 9800 and runs[1].usage.cache_read == 9800
    assert not summary.assumed
    # without definitions: the tools called, at an assumed size, and said so
    runs, summary = read_all([path])
    assert [(a.label, a.token_cost) for a in runs[0].arms] == [
        ("exec", ASSUMED_TOOL_TOKENS),
        ("web_fetch", ASSUMED_TOOL_TOKENS),
    ]
    assert summary.assumed == {"tool:agent:exec", "tool:agent:web_fetch"}


def test_unreadable_lines_are_counted_and_named_never_fatal() -> None:
    files = sorted(str(p) for p in FIXTURES.glob("*.jsonl"))
    runs, summary = read_all(files)
    assert len(runs) == summary.runs == 12
    assert summary.formats == {
        "anthropic": 4,
        "openai-chat": 2,
        "openai-responses": 3,
        "openclaw": 3,
    }
    assert [str(b) for b in summary.named] == [
        "anthropic.jsonl:4: not JSON (Expecting value: line 1 column 1 (char 0))",
        "anthropic.jsonl:6: response.content must be a list",
        "openai_chat.jsonl:3: response.choices[0].message.tool_calls[0].function.name is "
        "missing or not a string",
        "openai_responses.jsonl:4: request.tools[0].name is missing or not a string",
        "openclaw-session.jsonl:7: message.usage.input must be a whole number of tokens, got -3",
    ]
    assert summary.bad_lines == 5 and summary.sessions == 6


def test_tools_file_errors_name_the_field(tmp_path: Path) -> None:
    bad = tmp_path / "tools.json"
    bad.write_text('[{"name": "ok", "input_schema": {}}, {"description": "no name"}]')
    with pytest.raises(InvalidInput, match=r"tools\[1\]\.name is missing"):
        load_tools(bad)
    bad.write_text("{")
    with pytest.raises(InvalidInput, match="is not JSON"):
        load_tools(bad)


def test_generated_log_groups_every_conversation(tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"
    written = write_log(path, 5_000, seed=3, bad_every=1_000)
    reader = LogReader([str(path)])
    runs = 0
    sessions: set[str] = set()
    for record in reader.runs():
        runs += 1
        sessions.add(record.session_key)
    summary = reader.summary
    assert runs == 4_995 and summary.bad_lines == 5
    assert [b.line for b in summary.named] == [1000, 2000, 3000, 4000, 5000]
    assert len(sessions) == summary.sessions == written.conversations
    assert summary.tool_runs == written.tool_calls


def test_memory_stays_bounded_as_the_log_grows(tmp_path: Path) -> None:
    """Peak memory while streaming 3,000 lines is near that of 1,000 (it would be three times
    as much if runs or lines were kept): nothing is kept but the open conversations' states,
    and a conversation idle for an hour is closed (lines 10 s apart on average, so both files
    last longer than that). A first small read fills the caches of arm ids and tool lists."""
    peaks = []
    for lines in (300, 1_000, 3_000):
        path = tmp_path / f"agent-{lines}.jsonl"
        write_log(path, lines, seed=5, max_gap_ms=20_000)
        reader = LogReader([str(path)])
        tracemalloc.start()
        try:
            for _ in reader.runs():
                pass
            peaks.append(tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()
    assert peaks[2] < peaks[1] * 2, peaks


def test_http_exchanges_logged_with_their_bodies(tmp_path: Path) -> None:
    """A proxy that logs HTTP exchanges keeps the JSON under `body`, beside headers and
    status: read as the bare envelope is."""
    first = json.loads((FIXTURES / "anthropic.jsonl").read_text().splitlines()[0])
    wrapped = {
        "timestamp": first["timestamp"],
        "request": {"method": "POST", "path": "/v1/messages", "body": first["request"]},
        "response": {"status": 200, "headers": {}, "body": first["response"]},
    }
    path = tmp_path / "proxy.jsonl"
    path.write_text(json.dumps(wrapped) + "\n")
    (run,), summary = read_all([str(path)])
    bare = read_all([str(FIXTURES / "anthropic.jsonl")])[0][0]
    assert summary.bad_lines == 0
    assert (run.arms, run.usage, run.timestamp, run.guard) == (
        bare.arms,
        bare.usage,
        bare.timestamp,
        bare.guard,
    )


def test_a_system_message_that_changes_keeps_the_conversation(tmp_path: Path) -> None:
    lines = [json.loads(x) for x in (FIXTURES / "openai_chat.jsonl").read_text().splitlines()]
    lines[1]["request"]["messages"][0] = {"role": "system", "content": "Today is Tuesday."}
    path = tmp_path / "chat.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines[:2]) + "\n")
    runs, summary = read_all([str(path)])
    assert runs[0].session_key == runs[1].session_key and summary.sessions == 1
