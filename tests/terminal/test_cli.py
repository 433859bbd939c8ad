"""The real `learning-bot` executable, driven in a subprocess (and the console in a pty)."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from learning_bot.bot.export import POSTERIOR_CSV_HEADER, TRACE_CSV_HEADER
from tests.e2e.launch import served
from tests.processes import inherited

EXE = str(Path(sys.executable).with_name("learning-bot"))


def run(db: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = inherited({"LEARNING_BOT_DATABASE_URL": db})
    return subprocess.run(
        [EXE, *args], capture_output=True, text=True, env=env, input=stdin, timeout=300
    )


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/cli.sqlite"


def test_simulated_sessions_report_the_measured_and_the_true_cost_saving(db: str) -> None:
    sim = run(db, "simulate", "--sessions", "--traces", "600", "--seed", "2")
    assert sim.returncode == 0, sim.stderr
    assert "sessions." in sim.stdout and "Prompt cost under the prompt cache" in sim.stdout
    match = re.search(r"status measures (-?[\d.]+)% \(simulator: (-?[\d.]+)%", sim.stdout)
    assert match, sim.stdout
    assert abs(float(match[1]) - float(match[2])) <= 3.0


def test_first_session(db: str) -> None:
    empty = run(db, "status")
    assert empty.returncode == 0 and "No traces recorded yet" in empty.stdout

    sim = run(db, "simulate", "--traces", "300", "--seed", "1")
    assert sim.returncode == 0, sim.stderr
    assert "Simulated 300 runs" in sim.stdout

    status = run(db, "status")
    assert status.returncode == 0
    assert "Traces         300" in status.stdout
    assert "Tokens per run, selected against baseline runs:" in status.stdout
    assert "Top 5 arms by mean" in status.stdout
    assert "candidates for exclusion" in status.stdout

    exported = run(db, "export", "--format", "json")
    data = json.loads(exported.stdout)
    assert len(data["traces"]) == 300 and len(data["posteriors"]) == 40
    assert {"traceId", "arms", "usage", "isBaseline"} <= set(data["traces"][0])
    posteriors = {p["armId"]: p for p in data["posteriors"]}
    only = run(db, "export", "--no-traces")
    assert json.loads(only.stdout) == {"posteriors": data["posteriors"]}
    assert set(posteriors) == {a["armId"] for a in data["traces"][0]["arms"]}

    traces_csv = run(db, "export", "--format", "csv", "--table", "traces").stdout.splitlines()
    posteriors_csv = run(db, "export", "--format", "csv", "--table", "posteriors").stdout
    assert traces_csv[0] == TRACE_CSV_HEADER
    assert posteriors_csv.splitlines()[0] == POSTERIOR_CSV_HEADER
    assert len(traces_csv) == 301

    refused = run(db, "reset")
    assert refused.returncode == 2 and "--confirm" in refused.stderr
    first, *hint = refused.stderr.splitlines()
    assert first.startswith("learning-bot: ") and len(hint) <= 1

    reset = run(db, "reset", "--confirm")
    assert reset.returncode == 0 and "Reset every arm (40 arm(s)" in reset.stdout
    after = run(db, "status")
    assert "Traces         0" in after.stdout and "0.500" in after.stdout

    undo = run(db, "reset", "undo", "--confirm")
    assert undo.returncode == 0
    restored = json.loads(run(db, "export", "--no-traces").stdout)
    assert restored == {"posteriors": data["posteriors"]}
    assert "Traces         300" in run(db, "status").stdout

    verify = run(db, "db", "verify")
    assert verify.returncode == 0 and "default: ok" in verify.stdout


def test_reward_and_phase_from_the_terminal(db: str) -> None:
    run(db, "simulate", "--traces", "60", "--arms", "10")
    reward = run(db, "reward", "Read", "good", "worked", "well")
    assert reward.returncode == 0 and "tool:fs:Read" in reward.stdout
    assert "Reason: worked well" in reward.stdout
    phase = run(db, "phase")
    assert "ACTIVE" in phase.stdout
    assert run(db, "phase", "passive", "--confirm").returncode == 0
    assert "PASSIVE" in run(db, "phase").stdout


@pytest.mark.parametrize(
    ("args", "code", "needle"),
    [
        (("reward", "2"), 2, "'2' is not 1, 0, good or bad"),
        (("frobnicate",), 2, "unknown command 'frobnicate'\none of: status, reward"),
        (("stauts",), 2, "unknown command 'stauts'\ndid you mean `learning-bot status`?"),
        (("status", "--jsn"), 2, "unknown option '--jsn'\ndid you mean --json?"),
        (("export", "--format", "jsn"), 2, "did you mean --format json?"),
        (("db", "upgrad"), 2, "did you mean `learning-bot db upgrade`?"),
        (("status", "top", "x"), 2, "top must be a whole number"),
        (("status", "top", "0"), 2, "top must be a whole number from 1 to 25, got '0'\nusage: "),
        (("reward", "Nope", "good"), 1, "unknown arm 'Nope'"),
        (("reward", "Wirte", "good"), 1, "unknown arm 'Wirte'\ndid you mean tool:fs:Write?"),
        (("--learner", "defualt", "reward", "Read"), 2, "did you mean --learner default?"),
        (("export", "--no-traces", "--no-posteriors"), 2, "nothing to export"),
        (("simulate", "--traces", "0"), 2, "--traces must be from 1"),
        (("dashboard",), 2, "the dashboard's address is not known"),
        (("--url", "http://127.0.0.1:1", "export"), 2, "--url does not apply to `export`"),
        (("--url", "http://127.0.0.1:1", "simulate"), 2, "--url does not apply to `simulate`"),
        (("--url", "http://127.0.0.1:1", "status"), 1, "cannot reach http://127.0.0.1:1"),
        (("--url", "http://127.0.0.1:1", "dashboard"), 1, "cannot reach http://127.0.0.1:1"),
        (("status", "--url", "http://127.0.0.1:1"), 1, "cannot reach http://127.0.0.1:1"),
        (("export", "--url", "http://127.0.0.1:1"), 2, "--url does not apply to `export`"),
        (("status", "--databse-url", "x"), 2, "did you mean --database-url?"),
        (("reward", "Read", "--learner", "defualt"), 2, "did you mean --learner default?"),
    ],
)
def test_errors_are_one_line_and_exit_codes(
    db: str, args: tuple[str, ...], code: int, needle: str
) -> None:
    if "reward" in args:
        run(db, "simulate", "--traces", "20", "--arms", "10")
    result = run(db, *args)
    assert result.returncode == code, result.stderr
    assert needle in result.stderr
    first, *hint = result.stderr.splitlines()
    assert first.startswith("learning-bot: ") and len(hint) <= 1, result.stderr
    assert "/learning " not in result.stderr and "\x1b[" not in result.stderr


def test_global_options_are_taken_after_the_command_too(tmp_path: Path) -> None:
    """`learning-bot status --database-url=...` reads the database it names, as the same
    option before the command does; given on both sides, the one after the command wins."""
    here = f"sqlite:///{tmp_path}/here.sqlite"
    elsewhere = f"sqlite:///{tmp_path}/elsewhere.sqlite"
    assert run(elsewhere, "simulate", "--traces", "30", f"--database-url={here}").returncode == 0
    after = run(elsewhere, "status", "--database-url", here)
    before = run(elsewhere, "--database-url", here, "status")
    assert after.returncode == 0 and after.stdout == before.stdout
    assert "Traces         30\n" in after.stdout
    assert "No traces recorded yet" in run(elsewhere, "status").stdout
    both = run(elsewhere, "--database-url", elsewhere, "db", "url", "--database-url", here)
    assert both.stdout.strip() == here
    assert run(elsewhere, "db", "url").stdout.strip() == elsewhere
    assert run(here, "learner", "create", "second").returncode == 0
    assert "No traces recorded yet" in run(here, "status", "--learner", "second").stdout
    assert (
        "Traces         30\n"
        in run(here, "--learner", "second", "status", "--learner", "default").stdout
    )


def test_version_help_and_json(db: str) -> None:
    version = run(db, "--version")
    assert version.returncode == 0 and version.stdout.startswith("learning-bot 0.")

    def helped(*command: str) -> str:
        return " ".join(run(db, *command, "--help").stdout.split())

    for command in ("status", "reward", "reset", "phase", "help"):
        assert "the rest of the /learning command" not in helped(command)
    described = {
        ("status",): ["'top N' lists N arms", "--json print the status data as JSON"],
        ("reward",): ["the arm by id (tool:fs:Read) or label (Read)", "--conversation ID"],
        ("reset",): ["or undo the last reset", "--confirm do it without asking"],
        ("phase",): ["the phase to switch to"],
        ("simulate",): [
            "--traces N runs to",
            "--arms N arms in",
            "--seed N random seed",
            "--sessions runs come as multi-turn sessions",
        ],
        ("export",): ["jsonl: one trace per line", "--table", "--compact json: one line"],
        ("serve",): ["--host HOST address to listen", "--port PORT port", "--workers N"],
        ("slack",): ["--host HOST HTTP mode: address", "--port PORT HTTP mode: port"],
        ("discord", "sync"): ["--guild ID sync to this guild"],
    }
    for command, phrases in described.items():
        text = helped(*command)
        for phrase in phrases:
            assert phrase in text, (command, phrase, text)

    run(db, "simulate", "--traces", "30", "--arms", "8")
    data = json.loads(run(db, "status", "--json").stdout)
    assert data["summary"]["traceCount"] == 30 and data["phase"] == "active"
    assert len(data["top"]) == 5
    plain = run(db, "phase").stdout
    assert "Switch with learning-bot phase passive." in plain and "\x1b[" not in plain


def test_dashboard_asks_the_running_server_or_the_public_url(db: str) -> None:
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    class Healthz(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            ok = self.path == "/__openclaw__/api/learning/healthz"
            self.send_response(200 if ok else 404)
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *_: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Healthz)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_port}"
        asked = run(db, "--url", url, "dashboard")
        assert asked.returncode == 0, asked.stderr
        assert asked.stdout.strip() == f"{url}/__openclaw__/api/learning/dashboard"
    finally:
        server.shutdown()
    env = inherited({"LEARNING_BOT_DATABASE_URL": db})
    public = subprocess.run(
        [EXE, "dashboard"],
        capture_output=True,
        text=True,
        env={**env, "LEARNING_BOT_PUBLIC_URL": "https://learning.example.com/"},
        timeout=60,
    )
    assert (
        public.stdout.strip() == "https://learning.example.com/__openclaw__/api/learning/dashboard"
    )
    bad = subprocess.run(
        [EXE, "dashboard"],
        capture_output=True,
        text=True,
        env={**env, "LEARNING_BOT_PUBLIC_URL": "learning.example.com"},
        timeout=60,
    )
    assert bad.returncode == 2 and "LEARNING_BOT_PUBLIC_URL" in bad.stderr


def test_bad_database_url_is_one_line(tmp_path: Path) -> None:
    down = "postgresql+psycopg://postgres@127.0.0.1:1/none?connect_timeout=1"
    for command in (("status",), ("db", "upgrade")):
        result = run(down, *command)
        assert result.returncode == 1
        assert result.stderr.startswith("learning-bot: storage is unavailable: ")
        # one error, one line: not the server's "starting anyway" warning before it
        assert len(result.stderr.splitlines()) == 1 and "anyway" not in result.stderr
    bad = run("notadb://x", "status")
    assert bad.returncode in (1, 2) and "Traceback" not in bad.stderr


def test_a_postgresql_url_without_its_driver_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from learning_bot.cli import main

    monkeypatch.setitem(sys.modules, "psycopg", None)  # as a plain install has it
    code = main(["status", "--database-url", "postgresql+psycopg://u@127.0.0.1:1/x"])
    assert code == 2
    assert capsys.readouterr().err.splitlines() == [
        "learning-bot: the PostgreSQL driver psycopg is not installed: "
        "pip install 'learning-bot[postgres]'"
    ]


def test_invalid_config_names_the_setting(db: str) -> None:
    env = inherited({"LEARNING_BOT_DATABASE_URL": db, "LEARNING_BOT_BASELINE_RATE": "7"})
    result = subprocess.run([EXE, "status"], capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 2
    assert "LEARNING_BOT_BASELINE_RATE" in result.stderr


def _read_until(fd: int, needle: bytes, timeout: float = 60.0) -> bytes:
    buffer = b""
    deadline = time.monotonic() + timeout
    while needle not in buffer:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError(f"did not see {needle!r}; got {buffer[-2000:]!r}")
        ready, _, _ = select.select([fd], [], [], remaining)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            buffer += chunk
    return buffer


def test_console_in_a_pseudo_terminal(db: str) -> None:
    run(db, "simulate", "--traces", "50", "--arms", "10")
    env = inherited({"LEARNING_BOT_DATABASE_URL": db, "TERM": "dumb"})
    pid, fd = pty.fork()
    if pid == 0:  # child
        os.execve(EXE, [EXE, "console"], env)
    try:
        _read_until(fd, b"learning> ")
        os.write(fd, b"/learning status\n")
        out = _read_until(fd, b"learning> ")
        assert b"Learning status" in out and b"Traces         50" in out
        os.write(fd, b"/learning reset\n")
        out = _read_until(fd, b"learning> ")
        assert b"Reset all 10 arms" in out and b"Reply `confirm` or `cancel`" in out
        os.write(fd, b"cancel\n")
        out = _read_until(fd, b"learning> ")
        assert b"nothing changed" in out
        os.write(fd, b"/learning nonsense\n")
        out = _read_until(fd, b"learning> ")
        assert b"unknown command 'nonsense'" in out
        os.write(fd, b"quit\n")
        _, status = os.waitpid(pid, 0)
        assert os.WEXITSTATUS(status) == 0
    finally:
        os.close(fd)


UNUSED_BY_STATUS = (
    "sqlalchemy",
    "numpy",
    # the reply's JSON details (the wire types) are made only for a surface that sends them
    "learning_bot.engine.wire.reports",
    # nor the codec of the bodies runtimes send (engine.report_json)
    "learning_bot.engine.wire.runs",
    # --url's HTTP client, the alert scheduler and the installed metadata (--version)
    "urllib.request",
    "asyncio",
    "importlib.metadata",
    # the select and observe side, wired on first use (engine.run_side)
    "learning_bot.engine.selecting",
    "learning_bot.engine.context_learning",
    "learning_bot.engine.observing",
    "learning_bot.engine.gateway_runs",
    # a run report and a stored run; the records a store trades beyond a status's reads
    "learning_bot.engine.observation",
    "learning_bot.engine.records",
    "learning_bot.engine.store_records",
    # the projection's replay, for `phase` (a kept projection is read as JSON)
    "learning_bot.engine.projection",
    # reward, reset and phase changes, and what they answer
    "learning_bot.engine.changes",
    "learning_bot.engine.results",
)
"""Modules a terminal's `learning-bot status` on the local database does not import."""


def test_status_reads_without_sqlalchemy_and_says_the_same(db: str) -> None:
    run(db, "simulate", "--traces", "40", "--arms", "10")
    env = inherited({"LEARNING_BOT_DATABASE_URL": db})
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, io, contextlib\n"
            "from learning_bot.cli import main\n"
            "out = io.StringIO()\n"
            "with contextlib.redirect_stdout(out): main(['status'])\n"
            "print(*(m in sys.modules for m in sys.argv[1:]))\n"
            "print(out.getvalue())",
            *UNUSED_BY_STATUS,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    flags, _, lite_text = probe.stdout.partition("\n")
    assert flags.split() == ["False"] * len(UNUSED_BY_STATUS), (flags, probe.stderr)
    from learning_bot.app import build_app
    from learning_bot.bot.bus import Actor, Invocation
    from learning_bot.bot.render_text import render_text
    from learning_bot.settings import Settings

    app = build_app(Settings(database_url=db), spool=False)
    try:
        reply = app.bus.dispatch(Invocation("terminal", Actor("t", is_admin=True), "status"))
    finally:
        app.close()
    assert lite_text.strip() == render_text(reply).strip()


def test_status_on_an_older_schema_asks_for_an_upgrade(db: str) -> None:
    run(db, "simulate", "--traces", "5", "--arms", "5")
    import sqlite3

    path = db.removeprefix("sqlite:///")
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE alembic_version SET version_num = '0002'")
    result = run(db, "status")
    assert result.returncode == 1
    assert "run `learning-bot db upgrade`" in result.stderr


def test_db_verify_reports_a_tampered_posterior(db: str) -> None:
    run(db, "simulate", "--traces", "30", "--arms", "8")
    import sqlite3

    with sqlite3.connect(db.removeprefix("sqlite:///")) as conn:
        conn.execute("UPDATE posteriors SET alpha = alpha + 1 WHERE arm_id = 'tool:fs:Read'")
    result = run(db, "db", "verify")
    assert result.returncode == 1
    assert "default: FAILED" in result.stdout
    assert "tool:fs:Read: posterior Beta(" in result.stdout


def test_spool_bound_comes_from_the_environment(tmp_path: Path) -> None:
    from learning_bot.app import build_app
    from learning_bot.engine.errors import InvalidConfig
    from learning_bot.settings import load_settings

    env = {"LEARNING_BOT_SPOOL_MAX_MB": "0.5", "LEARNING_BOT_SPOOL_DIR": str(tmp_path / "s")}
    settings = load_settings(env, database_url=f"sqlite:///{tmp_path}/s.sqlite")
    assert settings.spool_max_mb == 0.5
    app = build_app(settings)
    try:
        assert app.writer.spool.max_bytes == 512 * 1024  # type: ignore[attr-defined]
    finally:
        app.close()
    for bad in ("0", "-1", "lots", "nan"):
        with pytest.raises(InvalidConfig, match="LEARNING_BOT_SPOOL_MAX_MB"):
            load_settings({"LEARNING_BOT_SPOOL_MAX_MB": bad})


def test_policy_and_half_life_come_from_the_environment(tmp_path: Path) -> None:
    from learning_bot.engine.config import DEFAULT_POLICY, LearningConfig
    from learning_bot.engine.errors import InvalidConfig
    from learning_bot.settings import load_settings

    assert load_settings({}).config == LearningConfig()
    assert load_settings({}).config.policy == DEFAULT_POLICY
    seed = load_settings({"LEARNING_BOT_POLICY": "seed"}).config
    assert seed == LearningConfig.for_policy("seed")
    mixed = load_settings({"LEARNING_BOT_POLICY": "seed", "LEARNING_BOT_HALF_LIFE": "30"})
    assert (mixed.config.pooled_prior, mixed.config.half_life) == (False, 30.0)
    config = tmp_path / "learning.toml"
    config.write_text('[learning]\npolicy = "seed"\n')
    from_file = load_settings({"LEARNING_BOT_CONFIG": str(config)}).config
    assert from_file == LearningConfig.for_policy("seed")
    for name, bad in (("POLICY", "best"), ("HALF_LIFE", "soon"), ("HALF_LIFE", "-3")):
        with pytest.raises(InvalidConfig, match=f"LEARNING_BOT_{name}"):
            load_settings({f"LEARNING_BOT_{name}": bad})


def test_serve_announces_the_public_url_and_status_links_its_dashboard(db: str) -> None:
    run(db, "simulate", "--traces", "20", "--arms", "6")
    public = "https://learning.example.com"
    env = inherited({"LEARNING_BOT_DATABASE_URL": db, "LEARNING_BOT_PUBLIC_URL": public})
    with served(env) as server:
        assert server.proc.stdout is not None
        lines: list[str] = []
        while not any("live surfaces" in line for line in lines):
            line = server.proc.stdout.readline()
            assert line, "".join(lines)
            lines.append(line)
        dashboard = f"{public}/__openclaw__/api/learning/dashboard"
        assert any(f"public address {public}" in line and dashboard in line for line in lines)
        url = server.url
        status = run(db, "--url", url, "status", "--json")
        assert status.returncode == 0, status.stderr
        data = json.loads(status.stdout)
        assert data["dashboardUrl"] == dashboard
        assert data["compact"]["headline"][:2] == [["Phase", "ACTIVE"], ["Traces", "20"]]
        asked = run(db, "--url", url, "dashboard")
        assert asked.stdout.strip() == f"{url}/__openclaw__/api/learning/dashboard"
