"""`learning-bot status` as a process: its output, errors and exit codes, `--json`, `top N`,
`arm X`, its settings, and `--url` against a server that answers well or badly."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from learning_bot.app import build_app, build_read_app
from learning_bot.bot.bus import Actor, Invocation
from learning_bot.bot.shapes import reply_json
from learning_bot.settings import Settings, load_settings
from learning_bot.simulate import simulate
from tests.processes import inherited

EXE = str(Path(sys.executable).with_name("learning-bot"))


def _run(args: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    done = subprocess.run([EXE, *args], env=env, capture_output=True, text=True, timeout=120)
    return done.returncode, done.stdout, done.stderr


@pytest.fixture(scope="module")
def simulated(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('sim')}/s.sqlite"
    app = build_app(Settings(database_url=url), spool=False)
    try:
        simulate(app.service(create=True), traces=80, arms=10, seed=7)
    finally:
        app.close()
    return url


def _env(db: str, **more: str) -> dict[str, str]:
    return inherited({"LEARNING_BOT_DATABASE_URL": db, **more})


# -- the local read -------------------------------------------------------------------------


def test_status_shows_the_learner_its_figures_and_the_arms(simulated: str) -> None:
    code, out, err = _run(["status"], _env(simulated))
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == "Learning status — default [ACTIVE]"
    # what the user pays first: the simulator's runs report no cache usage, so status says
    # the cost saving cannot be measured, then gives the token saving
    assert lines[1].startswith("Prompt cost saving not measured: the runs report no")
    lines.pop(1)
    assert lines[1].startswith("Kept about ")
    assert lines[2].startswith("Saved ") and "of prompt tokens" in lines[2]
    assert "Traces         80" in lines and "Arms           10" in lines
    assert "Top 5 arms by mean" in lines
    assert "Bottom 5 arms — candidates for exclusion" in lines
    assert "\x1b[" not in out  # not a terminal: no colour


@pytest.mark.parametrize(
    ("argv", "top"),
    [
        (["--learner", "default", "status", "top", "4"], 4),
        (["status", "TOP", "1", "Public"], 1),
        (["status", "top", "25"], 10),
    ],
    ids=["top 4", "TOP 1 Public", "top 25"],
)
def test_top_n_lists_n_arms(simulated: str, argv: list[str], top: int) -> None:
    code, out, _ = _run(argv, _env(simulated))
    assert code == 0
    assert f"Top {top} arms by mean" in out.splitlines()


def test_json_is_the_status_data(simulated: str) -> None:
    env = _env(simulated)
    code, out, _ = _run(["status", "--json"], env)
    data = json.loads(out)
    assert code == 0
    assert list(data) == ["summary", "phase", "bottom", "top", "compact"]
    assert data["summary"]["traceCount"] == 80 and data["phase"] == "active"
    assert len(data["top"]) == 5 and data["compact"]["headline"][0] == ["Phase", "ACTIVE"]
    code, out, _ = _run(["status", "--json", "top", "2"], env)
    data = json.loads(out)
    assert code == 0 and len(data["top"]) == 2 and "compact" not in data  # asked for a number
    code, out, _ = _run([f"--database-url={simulated}", "status", "public", "--json"], env)
    assert code == 0 and json.loads(out)["summary"]["traceCount"] == 80


def test_arm_shows_one_arm(simulated: str) -> None:
    env = _env(simulated)
    code, out, _ = _run(["status", "arm", "Read"], env)
    lines = out.splitlines()
    assert code == 0 and lines[0] == "tool:fs:Read"
    assert lines[1].split() == ["Label", "Read"] and lines[5].startswith("Pulls ")
    assert "Seed arm        yes (never excluded)" in lines
    code, out, _ = _run(["status", "arm", "tool:fs:Read", "--json"], env)
    arm = json.loads(out)["arm"]
    assert code == 0 and arm["armId"] == "tool:fs:Read" and arm["isSeed"] is True


@pytest.mark.parametrize(
    ("argv", "code", "stderr"),
    [
        (
            ["status", "arm", "nope"],
            1,
            "learning-bot: unknown arm 'nope'\ndid you mean memory:project:note-0?\n",
        ),
        (
            ["status", "arm", "e"],
            2,
            "learning-bot: 'e' matches 9 arms: file:workspace:README.md, memory:project:note-0, ",
        ),
        (
            ["status", "top", "0"],
            2,
            "learning-bot: top must be a whole number from 1 to 25, got '0'\nusage: learning-bot "
            "status [top N] [public] (see `learning-bot status --help`)\n",
        ),
        (
            ["status", "top", "26"],
            2,
            "learning-bot: top must be a whole number from 1 to 25, got '26'\nusage: ",
        ),
        (
            ["status", "--jsn"],
            2,
            "learning-bot: unknown option '--jsn'\ndid you mean --json? (see `learning-bot "
            "<command> --help`)\n",
        ),
        (["--learner", "nobody", "status"], 2, "learning-bot: unknown learner 'nobody'\n"),
    ],
    ids=["arm nope", "arm e", "top 0", "top 26", "--jsn", "--learner nobody"],
)
def test_a_mistake_is_one_line_and_an_exit_code(
    simulated: str, argv: list[str], code: int, stderr: str
) -> None:
    got = _run(argv, _env(simulated))
    assert got[:2] == (code, "")
    assert got[2].startswith(stderr)


def test_the_settings_it_shows_are_the_learners_own(simulated: str) -> None:
    """Status shows the learner's stored settings (docs/configuration.md), which `learner set`
    changes; a process configured otherwise shows them too, and says so on stderr."""
    changed = _run(
        [
            "learner",
            "set",
            "default",
            "tokenBudget=1234",
            "baselineRate=0.05",
            "minPulls=40",
            'seedArmIds=["tool:fs:Read","tool:fs:Write"]',
        ],
        _env(simulated),
    )
    assert changed[0] == 0, changed
    env = _env(
        simulated,
        LEARNING_BOT_TOKEN_BUDGET="999",
        LEARNING_BOT_PUBLIC_URL="https://learning.example.com",
    )
    code, out, err = _run(["status"], env)
    assert "tokenBudget 1234 (configured here: 999)" in err
    lines = out.splitlines()
    assert code == 0
    assert {"Token budget   1,234", "Baseline rate  5%", "Min pulls      40"} <= set(lines)
    assert (
        lines[-1] == "Dashboard: https://learning.example.com/__openclaw__/api/learning/dashboard"
    )
    assert (
        "Seed arms are never excluded, so the 2 seed arm(s) are not listed as candidates." in lines
    )


def test_a_database_not_written_yet_has_no_traces(tmp_path: Path) -> None:
    code, out, _ = _run(["status"], _env(f"sqlite:///{tmp_path}/new.sqlite"))
    assert code == 0
    assert "No traces recorded yet." in out.splitlines()
    assert "learning-bot simulate" in out


def test_after_a_reset_status_counts_from_the_reset(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/r.sqlite"
    app = build_app(Settings(database_url=url), spool=False)
    try:
        service = app.service(create=True)
        simulate(service, traces=60, arms=9, seed=4)
        service.reset(actor="test")
    finally:
        app.close()
    code, out, _ = _run(["status", "--json"], _env(url))
    data = json.loads(out)
    assert code == 0 and data["summary"]["traceCount"] == 0
    assert {arm["pulls"] for arm in data["top"]} == {0}


# -- --url ------------------------------------------------------------------------------------


class _Server:
    """A stand-in for `learning-bot serve`'s /command route: answers with `respond`."""

    def __init__(self) -> None:
        self.respond: Callable[[dict[str, Any]], tuple[int, dict[str, str], bytes]] = lambda _: (
            404,
            {},
            b"",
        )
        self.requests: list[tuple[str, dict[str, str], dict[str, Any]]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append((self.path, dict(self.headers), body))
                status, headers, payload = server.respond(body)
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                if "Transfer-Encoding" not in headers:
                    self.send_header("Content-Length", str(len(payload)))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *_: object) -> None:
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.http.server_port}"
        threading.Thread(target=self.http.serve_forever, daemon=True).start()


@pytest.fixture
def server() -> Iterator[_Server]:
    fake = _Server()
    try:
        yield fake
    finally:
        fake.http.shutdown()
        fake.http.server_close()


def _bus_reply(env: dict[str, str], text: str) -> dict[str, Any]:
    """The reply the server's bus gives a terminal."""
    app = build_read_app(load_settings(env))
    assert app is not None
    try:
        invocation = Invocation("terminal", Actor("local:t", "t", is_admin=True), text)
        return reply_json(app.bus.dispatch(invocation))
    finally:
        app.close()


def _json(status: int, data: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
    return status, {"Content-Type": "application/json"}, json.dumps(data).encode()


def _chunked(data: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
    body = json.dumps(data).encode()
    half = len(body) // 2
    chunks = b"".join(f"{len(p):x}\r\n".encode() + p + b"\r\n" for p in (body[:half], body[half:]))
    return (
        200,
        {"Content-Type": "application/json", "Transfer-Encoding": "chunked"},
        chunks + (b"0\r\n\r\n"),
    )


def test_status_from_a_server_is_the_local_status(simulated: str, server: _Server) -> None:
    env = _env(simulated, LEARNING_BOT_API_TOKEN="sesame")
    server.respond = lambda body: _json(200, _bus_reply(env, body["text"]))
    for args in (["status"], ["status", "top", "2", "--json"], ["status", "arm", "Read"]):
        code, out, err = _run(["--url", server.url, "--learner", "default", *args], env)
        assert (code, err) == (0, "")
        assert out == _run(args, env)[1]
    path, headers, body = server.requests[0]
    assert path == "/__openclaw__/api/learning/command?learner=default"
    assert headers["Authorization"] == "Bearer sesame"
    assert headers["Content-Type"] == "application/json"
    assert body["actor"] and {k: v for k, v in body.items() if k != "actor"} == {
        "conversation": "",
        "wording": "terminal",
        "text": "status",
    }
    assert server.requests[1][2]["text"] == "status top 2"


def _reply(blocks: list[dict[str, Any]], **data: Any) -> dict[str, Any]:
    return {"kind": "info", "summary": "s", "visibility": "private", "blocks": blocks, "data": data}


BASE = "learning-bot: {url}/__openclaw__/api/learning: "
UNEXPECTED = "learning-bot: unexpected error: {error}\nset LEARNING_BOT_DEBUG=1 for the details\n"


@pytest.mark.parametrize(
    ("answer", "code", "out", "json_out", "err"),
    [
        (
            _json(500, {"error": "Something went wrong on our side; the error was logged."}),
            1,
            "",
            "",
            BASE + "Something went wrong on our side; the error was logged.\n",
        ),
        (
            _json(401, {"error": "a valid bearer token is required"}),
            1,
            "",
            "",
            BASE + "a valid bearer token is required\n",
        ),
        (
            (502, {"Content-Type": "text/plain"}, b"bad gateway"),
            1,
            "",
            "",
            BASE + "HTTP Error 502: Bad Gateway\n",
        ),
        (
            _json(
                200,
                {
                    "kind": "error",
                    "summary": "unknown learner 'x'",
                    "visibility": "private",
                    "blocks": [{"type": "text", "text": "unknown learner 'x'", "muted": False}],
                    "data": {"error": "unknown learner 'x'", "errorCode": "not_found"},
                },
            ),
            1,
            "",
            "",
            "learning-bot: unknown learner 'x'\n",
        ),
        (
            _json(200, {"kind": "info", "blocks": []}),
            1,
            "",
            "",
            UNEXPECTED.format(error="KeyError: 'summary'"),
        ),
        (
            _json(
                200,
                _reply(
                    [{"type": "text", "text": "hello\x1b[2J", "muted": True}, {"type": "mystery"}]
                ),
            ),
            1,
            "",
            "",
            UNEXPECTED.format(error="KeyError: 'actions'"),
        ),
        (_json(200, _reply([], a=1)), 0, "\n", '{\n  "a": 1\n}\n', ""),
        (
            (200, {"Content-Type": "application/json"}, b"not json"),
            1,
            "",
            "",
            UNEXPECTED.format(
                error="JSONDecodeError: Expecting value: line 1 column 1 (char 0)",
            ),
        ),
        (
            _chunked(_reply([{"type": "heading", "text": "Chunked", "badge": "ACTIVE"}])),
            0,
            "Chunked [ACTIVE]\n",
            "{}\n",
            "",
        ),
    ],
    ids=[
        "500",
        "401",
        "502 text",
        "error reply",
        "not a reply",
        "unknown block",
        "empty",
        "not json",
        "chunked",
    ],
)
def test_what_a_server_answers_is_printed_or_worded(
    simulated: str,
    server: _Server,
    answer: tuple[int, dict[str, str], bytes],
    code: int,
    out: str,
    json_out: str,
    err: str,
) -> None:
    server.respond = lambda _body: answer
    env = _env(simulated)
    expected = err.format(url=server.url)
    assert _run(["--url", server.url, "status"], env) == (code, out, expected)
    assert _run(["--url", server.url, "status", "--json"], env) == (code, json_out, expected)


def test_an_unreachable_server_is_one_line(simulated: str, server: _Server) -> None:
    url = server.url
    server.http.shutdown()
    server.http.server_close()
    for target, base in (
        (url, url),
        ("http://localhost:1/x/", "http://localhost:1/x"),
    ):
        code, out, err = _run(["--url", target, "status"], _env(simulated))
        assert (code, out) == (1, "")
        assert err.startswith(f"learning-bot: cannot reach {base}/__openclaw__/api/learning: ")
        assert err.count("\n") == 1


def test_a_request_the_server_refuses_as_invalid_exits_2_as_locally(
    simulated: str, server: _Server
) -> None:
    server.respond = lambda _body: (
        400,
        {"Content-Type": "application/json"},
        b'{"error": "arm: an arm id is at most 512 characters"}',
    )
    code, out, err = _run(["--url", server.url, "status", "arm", "x" * 600], _env(simulated))
    assert (code, out) == (2, ""), err
    assert err.endswith(": arm: an arm id is at most 512 characters\n"), err


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("notaurl", "expected http:// or https:// and a host, got 'notaurl'"),
        ("ftp://example.org", "expected http:// or https:// and a host"),
        ("http://", "expected http:// or https:// and a host"),
        ("http://[::1", "not a valid URL: Invalid IPv6 URL"),
        ("http://127.0.0.1:99999", "not a valid URL: Port out of range"),
        ("http://127.0.0.1:port", "not a valid URL: Port could not be cast"),
    ],
)
def test_a_malformed_url_is_a_usage_error_before_anything_is_sent(
    simulated: str, url: str, says: str
) -> None:
    for argv in (["status"], ["dashboard"], ["learner", "set", "default", "halfLife=3"]):
        code, out, err = _run(["--url", url, *argv], _env(simulated))
        assert (code, out) == (2, ""), (argv, err)
        assert err.startswith(f"learning-bot: --url: {says}"), (argv, err)
        assert "unexpected error" not in err and "Traceback" not in err


def test_learner_set_recall_target_is_stored_and_status_shows_it_beside_the_estimate(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path}/target.sqlite"
    app = build_app(Settings(database_url=url), spool=False)
    try:
        simulate(app.service(create=True), traces=80, arms=10, seed=7)
    finally:
        app.close()
    env = _env(url)
    code, out, err = _run(["learner", "set", "default", "--recall-target", "0.97", "--json"], env)
    assert (code, err) == (0, ""), out
    assert json.loads(out)["settings"]["recallTarget"] == 0.97
    code, out, _ = _run(["status"], env)
    assert code == 0
    shown = [line for line in out.splitlines() if line.startswith("Recall target")]
    assert len(shown) == 1
    assert shown[0].split(None, 2)[2].startswith("97% (estimated ")
    assert shown[0].endswith("% kept; token budget a cap)")
    code, out, _ = _run(["status", "--json"], env)
    assert json.loads(out)["recallTarget"] == 0.97
    refused = _run(["learner", "set", "default", "--recall-target", "1.5"], env)
    assert refused[0] == 2 and "recallTarget" in refused[2]
    code, out, _ = _run(["learner", "set", "default", "--recall-target", "none", "--json"], env)
    assert code == 0 and "recallTarget" not in json.loads(out)["settings"]
    code, out, _ = _run(["status"], env)
    assert not any(line.startswith("Recall target") for line in out.splitlines())
