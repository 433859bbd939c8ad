"""`learning-bot status` through learning_bot.status says exactly what the general command line
says through the bus, and imports none of the bus, numpy, SQLAlchemy or the engine beyond the
estimated recall's arithmetic."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.terminal.render import render
from adapters.terminal.style import Style
from bot.bus import Actor, Invocation
from bot.replies import Reply
from engine.arms import Arm, ArmType
from engine.config import LearningConfig, Phase
from engine.observation import ReportedArm, RunReport, ToolCall, Usage
from engine.service import LearningService
from learning_bot.app import build_app, build_read_app
from learning_bot.cli.general import build_parser
from learning_bot.settings import Settings, load_settings
from learning_bot.simulate import simulate
from learning_bot.status import command, remote, reply, terminal

EXE = str(Path(sys.executable).with_name("learning-bot"))
GENERAL = "import sys\nfrom learning_bot.cli.general import main\nsys.exit(main(sys.argv[1:]))\n"
HEAVY = ("numpy", "sqlalchemy", "bot", "engine", "adapters", "email", "ssl")
HEAVY_MODULES = (
    "http.client",
    "learning_bot.cli.general",
    "learning_bot.app",
    "learning_bot.settings",
)
LIGHT_ENGINE = (
    "engine",
    "engine.errors",
    "engine.metrics",
    "adapters",
    "adapters.terminal",
    "adapters.terminal.style",
)
"""The estimated recall's arithmetic and the terminal's colours: the engine and terminal
packages import their names on first use."""
PROBE = (
    "import sys\n"
    "from learning_bot.cli import main\n"
    "code = main(sys.argv[1:])\n"
    f"heavy = [m for m in sys.modules if m.split('.')[0] in {HEAVY!r} or m in {HEAVY_MODULES!r}]\n"
    f"print(code, sorted(set(heavy) - set({LIGHT_ENGINE!r})), file=sys.stderr)\n"
)

NOT_FOR_URL = (
    "sqlite3",
    "storage",
    "engine",
    "learning_bot.status.reply",
    "socket",
    "selectors",
    "getpass",
    "typing",
    "dataclasses",
    "inspect",
    "urllib.request",
    "http",
)
"""What status --url does without: the file's reader and the reply builder (the local read's),
the socket module's wrappers (the C module does), getpass (its look-up is done without its
prompts), typing and dataclasses (the terminal package's light modules need neither)."""
PROBE_URL = (
    "import sys\n"
    "before = set(sys.modules)\n"
    "from learning_bot.cli import main\n"
    "code = main(sys.argv[1:])\n"
    "names = set(sys.modules) - before\n"
    f"heavy = [m for m in names if m.split('.')[0] in {HEAVY + NOT_FOR_URL!r}"
    f" or m in {HEAVY_MODULES + NOT_FOR_URL!r}]\n"
    "print(code, sorted(set(heavy) - {'adapters', 'adapters.terminal', "
    "'adapters.terminal.style'}), file=sys.stderr)\n"
)
"""PROBE for status --url: what it imports beyond what the interpreter had at start."""


# -- databases in the states status shows differently ------------------------------------------


def _report(trace_id: str, arms: list[Arm], used: set[str], *, baseline: bool = False) -> RunReport:
    return RunReport(
        trace_id=trace_id,
        arms=tuple(ReportedArm(a, a.id in used or baseline) for a in arms),
        is_baseline=baseline,
        tool_calls=(
            ToolCall("Read"),
            *(ToolCall(a.name) for a in arms if a.id in used and a.type is ArmType.TOOL),
        ),
        assistant_texts=("done",),
        usage=Usage(input=900, output=40),
        duration_ms=300,
    )


def _wide(service: LearningService) -> None:
    """Passive runs over arms whose names are wide, long or labelled."""
    arms = [
        Arm("tool:fs:Read", 120),
        Arm("tool:ext:翻訳ツール", 300, label="翻訳"),
        Arm("file:workspace:docs/" + "very-long-name-" * 5 + ".md", 900),
        Arm("tool:ext:Search", 200, label="Search the web"),
        Arm("memory:project:note", 40),
        Arm("skill:review:main", 400),
        Arm("tool:ext:Calendar", 80),
    ]
    for i in range(30):
        used = {a.id for j, a in enumerate(arms) if (i + j) % 3 == 0}
        service.observe(_report(f"w-{i}", arms, used, baseline=i % 5 == 0))


def _reset(service: LearningService) -> None:
    simulate(service, traces=60, arms=9, seed=4)
    service.reset(actor="test")


def _reset_then_runs(service: LearningService) -> None:
    """Arms reset, then learning again: their evidence counts from Beta(1, 1)."""
    simulate(service, traces=80, arms=9, seed=6)
    service.reset([view.arm_id for view in service.posteriors()[:3]], actor="test")
    simulate(service, traces=120, arms=11, seed=9)


def _boosted(service: LearningService) -> None:
    """Seed arms started at seedBoost's Beta(4, 1), posteriors that forget (half-life 40)."""
    config = LearningConfig(seed_boost=4.0, half_life=40.0)
    simulate(LearningService(service.store, config), traces=150, arms=10, seed=8)


STATES: dict[str, Callable[[LearningService], None]] = {
    "empty": lambda service: None,
    "simulated": lambda service: simulate(service, traces=150, arms=12, seed=5) and None,
    "few arms": lambda service: simulate(service, traces=30, arms=4, seed=2) and None,
    "after a reset": _reset,
    "reset, then runs": _reset_then_runs,
    "seed boost, forgetting": _boosted,
    "passive, wide names": _wide,
}


@pytest.fixture(scope="module", params=list(STATES))
def db(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('quick')}/q.sqlite"
    app = build_app(Settings(database_url=url), spool=False)
    try:
        STATES[request.param](app.service(create=True))
        if request.param == "empty":
            app.service().set_phase(Phase.ACTIVE, actor="test")
    finally:
        app.close()
    return url


def general_reply(env: dict[str, str], text: str) -> dict[str, Any]:
    """The bus's reply, as the general command line gets it for a terminal."""
    settings = load_settings(env)
    app = build_read_app(settings)
    assert app is not None
    try:
        invocation = Invocation("terminal", Actor("local:t", "t", is_admin=True), text)
        return app.bus.dispatch(invocation).to_dict()
    finally:
        app.close()


def quick_reply(env: dict[str, str], text: str) -> dict[str, Any] | None:
    request = command.parse(text.split())
    assert request is not None
    settings = command.read_settings(None, None, None, env)
    if request.arm is not None:
        return reply.read_arm(settings, request.arm, public=request.public)
    return reply.read_status(settings, request.top, public=request.public)


ENVS: dict[str, dict[str, str]] = {
    "defaults": {},
    "configured": {
        "LEARNING_BOT_TOKEN_BUDGET": "1234",
        "LEARNING_BOT_BASELINE_RATE": "0.05",
        "LEARNING_BOT_MIN_PULLS": "40",
        "LEARNING_BOT_SEED_ARM_IDS": "tool:fs:Read,tool:ext:Calendar",
        "LEARNING_BOT_PUBLIC_URL": "https://learning.example.com",
    },
}
TEXTS = (
    "status",
    "status top 3",
    "status top 25",
    "status TOP 1 Public",
    "status arm Read",
    "status public arm read",
    "status arm tool:fs:Read top 2",
    "status arm tool:fs:Rea",
    "status arm CALENDAR",
    "status arm docs/very-long",
    "status arm e",
    "status arm Nope",
)


@pytest.mark.parametrize("env_name", list(ENVS))
@pytest.mark.parametrize("text", TEXTS)
def test_the_reply_is_the_buses(db: str, env_name: str, text: str) -> None:
    env = {"LEARNING_BOT_DATABASE_URL": db, **ENVS[env_name]}
    expected = general_reply(env, text)
    got = quick_reply(env, text)
    if got is None:  # the general path says why
        assert expected["kind"] == "error", expected
        return
    assert json.dumps(got, indent=1) == json.dumps(expected, indent=1)
    for colour in (False, True):
        assert terminal.render(got, colour) == render(Reply.from_dict(expected), Style(colour))


def test_what_it_does_not_read_is_left_to_the_general_path(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/s.sqlite"
    settings = command.read_settings(url, None, None, {})
    assert reply.read_status(settings, None) is None  # no file yet
    app = build_app(Settings(database_url=url), spool=False)
    try:
        simulate(app.service(create=True), traces=5, arms=3)
    finally:
        app.close()
    assert reply.read_status(settings, None) is not None
    assert reply.read_status(command.read_settings(url, "nobody", None, {}), None) is None
    memory = command.read_settings("sqlite://", None, None, {})
    assert reply.read_status(memory, None) is None
    import sqlite3

    with sqlite3.connect(tmp_path / "s.sqlite") as conn:
        conn.execute("UPDATE alembic_version SET version_num = '0002'")
    assert reply.read_status(settings, None) is None


# -- the command line, in processes ---------------------------------------------------------------


def _run(args: list[str], env: dict[str, str], code: str | None = None) -> tuple[int, str, str]:
    cmd = [sys.executable, "-c", code, *args] if code else [EXE, *args]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    return done.returncode, done.stdout, done.stderr


ARGVS = (
    ["status"],
    ["status", "--json"],
    ["--learner", "default", "status", "top", "4"],
    ["--database-url=URL", "status", "public", "--json"],
    ["status", "--json", "top", "2"],
    ["status", "arm", "Read"],
    ["status", "arm", "tool:fs:Read", "--json"],
    ["status", "arm", "nope"],
    ["status", "top", "0"],
    ["status", "top", "26"],
    ["status", "--jsn"],
    ["--learner", "nobody", "status"],
)


@pytest.fixture(scope="module")
def simulated(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('sim')}/s.sqlite"
    app = build_app(Settings(database_url=url), spool=False)
    try:
        simulate(app.service(create=True), traces=80, arms=10, seed=7)
    finally:
        app.close()
    return url


@pytest.mark.parametrize("argv", ARGVS, ids=" ".join)
def test_status_says_what_the_general_command_line_says(simulated: str, argv: list[str]) -> None:
    db = simulated
    env = {**os.environ, "LEARNING_BOT_DATABASE_URL": db}
    argv = [a.replace("URL", db) for a in argv]
    assert _run(argv, env) == _run(argv, env, GENERAL)


def test_status_imports_neither_the_bus_nor_the_engine(db: str) -> None:
    env = {**os.environ, "LEARNING_BOT_DATABASE_URL": db}
    code, out, err = _run(["status"], env, PROBE)
    assert (code, err) == (0, "0 []\n")
    assert out == _run(["status"], env, GENERAL)[1]


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
    db = simulated
    env = {**os.environ, "LEARNING_BOT_DATABASE_URL": db, "LEARNING_BOT_API_TOKEN": "sesame"}
    server.respond = lambda body: _json(200, general_reply(env, body["text"]))
    for args in (["status"], ["status", "top", "2", "--json"]):
        code, out, err = _run(["--url", server.url, "--learner", "default", *args], env, PROBE_URL)
        assert (code, err) == (0, "0 []\n")
        assert out == _run(args, env)[1]
        assert out == _run(["--url", server.url, "--learner", "default", *args], env, GENERAL)[1]
    path, headers, body = server.requests[0]
    assert path == "/__openclaw__/api/learning/command?learner=default"
    assert headers["Authorization"] == "Bearer sesame"
    assert headers["Content-Type"] == "application/json"
    assert body["actor"] and {k: v for k, v in body.items() if k != "actor"} == {
        "conversation": "",
        "wording": "terminal",
        "text": "status",
    }
    assert [r[2] for r in server.requests[:2]] == [body, body]  # the quick and general paths


@pytest.mark.parametrize(
    "answer",
    [
        _json(500, {"error": "Something went wrong on our side; the error was logged."}),
        _json(401, {"error": "a valid bearer token is required"}),
        (502, {"Content-Type": "text/plain"}, b"bad gateway"),
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
        _json(200, {"kind": "info", "blocks": []}),
        _json(
            200,
            {
                "kind": "info",
                "summary": "s",
                "visibility": "private",
                "blocks": [
                    {"type": "text", "text": "hello\x1b[2J", "muted": True},
                    {"type": "mystery"},
                ],
                "data": {},
            },
        ),
        _json(
            200,
            {
                "kind": "info",
                "summary": "s",
                "visibility": "private",
                "blocks": [],
                "data": {"a": 1},
            },
        ),
        (200, {"Content-Type": "application/json"}, b"not json"),
        _chunked(
            {
                "kind": "info",
                "summary": "s",
                "visibility": "private",
                "blocks": [{"type": "heading", "text": "Chunked", "badge": "ACTIVE"}],
                "data": {},
            }
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
def test_a_server_answer_it_does_not_print_is_worded_as_before(
    simulated: str, server: _Server, answer: tuple[int, dict[str, str], bytes]
) -> None:
    db = simulated
    server.respond = lambda _body: answer
    env = {**os.environ, "LEARNING_BOT_DATABASE_URL": db}
    for args in (["--url", server.url, "status"], ["--url", server.url, "status", "--json"]):
        assert _run(args, env) == _run(args, env, GENERAL)


def test_an_unreachable_server_is_worded_as_before(simulated: str, server: _Server) -> None:
    db = simulated
    url = server.url
    server.http.shutdown()
    server.http.server_close()
    env = {**os.environ, "LEARNING_BOT_DATABASE_URL": db}
    for target in (url, "http://localhost:1/x/", "http://127.0.0.1:99999"):
        args = ["--url", target, "status"]
        assert _run(args, env) == _run(args, env, GENERAL)


# -- the pieces -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["status"],
        ["status", "--json"],
        ["status", "top", "5", "--json"],
        ["status", "--json", "public", "top", "25"],
        ["status", "--json", "--json"],
        ["--database-url", "sqlite:///x", "--learner=a", "--config", "c.toml", "status"],
        ["--url=http://h:1", "--url", "http://h:2", "status", "TOP", "09"],
        ["--learner=", "--url=", "status"],
        ["status", "arm", "Read"],
        ["status", "Arm", "tool:fs:Read", "public", "--json"],
        ["status", "arm", "arm"],
    ],
)
def test_it_reads_the_command_line_as_argparse_does(argv: list[str]) -> None:
    request = command.parse(argv)
    assert request is not None
    args = build_parser().parse_args(argv)
    assert (args.command, args.words, args.json) == ("status", request.words, request.as_json)
    assert (args.database_url, args.learner, args.config, args.url) == (
        request.database_url,
        request.learner,
        request.config,
        request.url,
    )


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["--version"],
        ["-h"],
        ["status", "-h"],
        ["reward", "Read"],
        ["--learner", "status"],
        ["--learn", "x", "status"],
        ["--learner", "-x", "status"],
        ["status", "top", "--json", "5"],
        ["status", "arm"],
        ["status", "arm", "a", "arm", "b"],
        ["status", "arm", "-x"],
        ["status", "arm", "a b"],
        ["status", "arm", "Read's"],
        ["status", "arm", "翻訳"],
        ["status", "top", "0"],
        ["status", "top", "26"],
        ["status", "top"],
        ["status", "nonsense"],
        ["status", "tool:fs:Read"],
        ["status", "top", "5", "top"],
        ["status", "--", "top", "1"],
        ["status", "public"] * 5,
    ],
)
def test_what_it_cannot_read_alike_goes_to_argparse(argv: list[str]) -> None:
    assert command.parse(argv) is None


def test_the_variables_it_does_not_read_are_not_settings(tmp_path: Path) -> None:
    plain = load_settings({})
    for name in command.UNREAD_ENV:
        assert load_settings({f"LEARNING_BOT_{name}": "x\x00 9 nonsense"}) == plain, name
    env = {"LEARNING_BOT_DATABASE_URL": "sqlite:///a.db", "LEARNING_BOT_LEARNER": "b"}
    loaded, read = load_settings(env), command.read_settings(None, None, None, env)
    assert (read.database_url, read.learner) == (loaded.database_url, loaded.learner)
    config = loaded.config
    assert (read.token_budget, read.baseline_rate, read.min_pulls, read.seed_arm_ids) == (
        config.token_budget,
        config.baseline_rate,
        config.min_pulls,
        config.seed_arm_ids,
    )
    read = command.read_settings("sqlite:///c.db", "d", None, env)
    assert (read.database_url, read.learner) == ("sqlite:///c.db", "d")


@pytest.mark.parametrize("arm_id", ["tool:fs:Read", "file:workspace:a.md", "memory:p:n"])
@pytest.mark.parametrize(
    "base",
    [(3.0, 1.0, 0, 0), (4.0, 1.0, 0, 0), (1.0, 1.0, 0, 17), (3.5, 2.0, 12, 0), (2, 9, 3, 40)],
)
def test_it_reads_evidence_against_the_prior_forgetting_uses(
    arm_id: str, base: tuple[float, float, int, int]
) -> None:
    from engine.arms import parse_arm_id
    from engine.forgetting import forgetting_prior
    from engine.posterior import prior_parameters

    row = (arm_id, "", 10, 5.0, 5.0, 7, None, 1, *base)
    expected = forgetting_prior(prior_parameters(parse_arm_id(arm_id).type), *base)
    assert reply.forgets_toward(row) == expected


def test_its_figures_are_the_engines_and_the_buses() -> None:
    from adapters.terminal.commands import API_BASE
    from adapters.terminal.style import CODES
    from bot.commands import MAX_TOP
    from bot.handlers import COMPACT_ITEMS, DEFAULT_TOP
    from engine.posterior import CURATED_PRIOR, LEARNED_PRIOR
    from engine.service import RECALL_WINDOW

    assert (reply.RECALL_WINDOW, reply.DEFAULT_TOP, command.MAX_TOP) == (
        RECALL_WINDOW,
        DEFAULT_TOP,
        MAX_TOP,
    )
    assert (reply.COMPACT_ITEMS, reply.CURATED_PRIOR, reply.LEARNED_PRIOR) == (
        COMPACT_ITEMS,
        CURATED_PRIOR,
        LEARNED_PRIOR,
    )
    assert (remote.API_BASE, terminal.CODES) == (API_BASE, CODES)


_texts = st.text(st.characters(codec="utf-8"), max_size=60)
_blocks = st.one_of(
    st.builds(
        lambda t, b: {"type": "heading", "text": t, "badge": b},
        _texts,
        st.one_of(st.none(), st.sampled_from(["ACTIVE", "PASSIVE", " active ", ""]), _texts),
    ),
    st.builds(lambda t, m: {"type": "text", "text": t, "muted": m}, _texts, st.booleans()),
    st.builds(
        lambda items: {"type": "fields", "items": items},
        st.lists(st.lists(_texts, min_size=2, max_size=2), max_size=4),
    ),
    st.integers(1, 4).flatmap(
        lambda n: st.builds(
            lambda title, aligns, rows: {
                "type": "table",
                "title": title,
                "columns": [{"name": f"c{i}", "align": a} for i, a in enumerate(aligns)],
                "rows": rows,
            },
            st.one_of(st.none(), _texts),
            st.lists(st.sampled_from(["left", "right"]), min_size=n, max_size=n),
            st.lists(st.lists(_texts, min_size=n, max_size=n), max_size=4),
        )
    ),
    st.builds(
        lambda commands: {
            "type": "actions",
            "actions": [
                {"label": c, "command": c, "token": "t", "style": "default", "confirmText": None}
                for c in commands
            ],
        },
        st.lists(st.sampled_from(["confirm", "cancel"]), min_size=1, max_size=2),
    ),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_blocks, max_size=6), st.booleans())
def test_it_renders_any_reply_as_the_terminal_does(
    blocks: list[dict[str, Any]], colour: bool
) -> None:
    data = {"kind": "info", "summary": "s", "visibility": "private", "blocks": blocks, "data": {}}
    assert terminal.render(data, colour) == render(Reply.from_dict(data), Style(colour))
