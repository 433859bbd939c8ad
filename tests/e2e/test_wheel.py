"""The package as a user gets it: the wheel built from this tree, installed with its declared
dependencies (and nothing else: no `postgres` extra) into a fresh virtualenv outside the source
tree, then each documented command run from a folder of the user's that holds a `bot/` package
of its own (which must not shadow ours).

A file the wheel leaves out, or a dependency the package imports without declaring, fails
here: the commands below reach the dashboard page, the migrations, the Slack install flow
(slack_sdk's SQLAlchemy stores need greenlet) and the MCP server."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import TextContent

from tests.e2e.launch import free_port
from tests.processes import inherited

pytestmark = [pytest.mark.slow, pytest.mark.e2e]

ROOT = Path(__file__).resolve().parents[2]
LAYERS = ("engine", "storage", "bot", "adapters", "research")
"""The repository's top-level folders, installed inside `learning_bot` (docs/installing.md)."""
PACKAGES = ("learning_bot", *(f"learning_bot.{layer}" for layer in LAYERS))
BUILD_INPUTS = ("pyproject.toml", "README.md", "learning_bot", *LAYERS)
OWN_PREFIXES = ("LEARNING_BOT_", "SLACK_", "DISCORD_", "PYTHON")
BASE = "/__openclaw__/api/learning"
SHADOW = "raise ImportError('this is the user folder bot/, not learning-bot')\n"
STEP_SECONDS = 600
PIP = (sys.executable, "-m", "pip", "--quiet")


@dataclass(frozen=True)
class Installed:
    wheel: Path
    venv: Path
    cwd: Path
    """A folder of the user's, with a `bot/` package that raises when imported."""
    env: dict[str, str]
    database_url: str

    @property
    def python(self) -> str:
        return str(self.venv / "bin" / "python")

    @property
    def learning_bot(self) -> str:
        return str(self.venv / "bin" / "learning-bot")

    def run(
        self, *argv: str, env: dict[str, str] | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            argv,
            cwd=self.cwd,
            env=env or self.env,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=STEP_SECONDS,
        )
        if check:
            assert result.returncode == 0, _shown(argv, result)
            assert "Traceback" not in result.stderr, _shown(argv, result)
        return result


def _shown(argv: Sequence[str], result: subprocess.CompletedProcess[str]) -> str:
    return f"$ {' '.join(argv)} -> {result.returncode}\n{result.stdout}\n{result.stderr}"


def _clean_env(root: Path) -> dict[str, str]:
    """The caller's environment without PYTHONPATH (the source tree must not be importable)
    or any learning-bot, Slack or Discord setting (nor libfaketime: tests/processes.py); HOME
    and XDG directories under `root`."""
    env = {k: v for k, v in inherited().items() if not k.startswith(OWN_PREFIXES)}
    home = root / "home"
    for name, path in {
        "HOME": home,
        "XDG_DATA_HOME": home / ".local" / "share",
        "XDG_STATE_HOME": home / ".local" / "state",
        "XDG_CONFIG_HOME": home / ".config",
        "XDG_CACHE_HOME": home / ".cache",
    }.items():
        path.mkdir(parents=True, exist_ok=True)
        env[name] = str(path)
    env["NO_COLOR"] = "1"
    env["PIP_NO_INPUT"] = "1"
    # pip's cache stays the caller's, so that installing the dependencies is fast after once.
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    env.setdefault("PIP_CACHE_DIR", str(Path(cache) / "pip"))
    return env


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    root = tmp_path_factory.mktemp("wheel")
    assert not root.resolve().is_relative_to(ROOT), "the venv must live outside the source tree"
    env = _clean_env(root)

    source = root / "source"
    source.mkdir()
    for name in BUILD_INPUTS:
        path = ROOT / name
        if path.is_dir():
            ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.sqlite*")
            shutil.copytree(path, source / name, ignore=ignore, symlinks=True)
        else:
            shutil.copy2(path, source / name)
    dist = root / "dist"
    build = subprocess.run(
        [*PIP, "wheel", "--no-deps", "-w", str(dist), "."],
        cwd=source,
        env=env,
        capture_output=True,
        text=True,
        timeout=STEP_SECONDS,
    )
    assert build.returncode == 0, build.stderr
    (wheel,) = dist.glob("learning_bot-*.whl")

    # A venv without pip of its own: this interpreter's pip installs into it (--python), which
    # saves seeding pip and byte-compiling every dependency on each run.
    venv = root / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)],
        env=env,
        check=True,
        timeout=60,
    )
    install = subprocess.run(
        [*PIP, "--python", str(venv / "bin" / "python"), "install", "--no-compile", str(wheel)],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=STEP_SECONDS,
    )
    assert install.returncode == 0, install.stderr

    cwd = root / "project"
    (cwd / "bot").mkdir(parents=True)
    (cwd / "bot" / "__init__.py").write_text(SHADOW)
    database_url = f"sqlite:///{root / 'data' / 'learning-bot.sqlite'}"
    env["LEARNING_BOT_DATABASE_URL"] = database_url
    return Installed(wheel, venv, cwd, env, database_url)


def test_the_wheel_ships_every_package_and_its_data(installed: Installed) -> None:
    names = set(zipfile.ZipFile(installed.wheel).namelist())
    for package in PACKAGES:
        folder = package.replace(".", "/")
        assert f"{folder}/__init__.py" in names, package
        assert f"{folder}/py.typed" in names, f"{package} has no py.typed"
    assert "learning_bot/adapters/http/dashboard.html" in names
    assert "learning_bot/storage/migrations/script.py.mako" in names
    assert any(n.startswith("learning_bot/storage/migrations/versions/0001_") for n in names)
    # One top-level import name: nothing else in the wheel sits beside `learning_bot`.
    assert {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")} == {
        "learning_bot"
    }


def test_only_learning_bot_is_importable(installed: Installed) -> None:
    """Outside the source tree, the layers are reachable only as `learning_bot.<layer>`: a
    project with its own `storage` or `engine` package keeps it."""
    installed.run(installed.python, "-I", "-c", "import learning_bot.engine, learning_bot.client")
    for layer in LAYERS:
        result = installed.run(installed.python, "-I", "-c", f"import {layer}", check=False)
        assert result.returncode != 0, layer
        assert f"No module named '{layer}'" in result.stderr, result.stderr


def test_every_module_imports_with_the_declared_dependencies(installed: Installed) -> None:
    """Each module of the installed packages imports in the fresh venv (PostgreSQL's driver is
    imported only when a PostgreSQL URL is used), and pip finds nothing missing."""
    script = f"""
import importlib, pkgutil, sys
for top in {PACKAGES!r}:
    package = importlib.import_module(top)
    assert package.__file__.startswith(sys.prefix), (top, package.__file__)
    for info in pkgutil.walk_packages(package.__path__, top + "."):
        if info.name.endswith("__main__") or info.name == "learning_bot.storage.migrations.env":
            continue  # the first runs the command line, the second is Alembic's to run
        importlib.import_module(info.name)
print("ok")
"""
    result = installed.run(installed.python, "-I", "-c", script)
    assert result.stdout.strip() == "ok"
    installed.run(*PIP, "--python", installed.python, "check")


def test_commands_from_a_folder_with_its_own_bot_package(installed: Installed) -> None:
    shadowed = installed.run(installed.python, "-c", "import bot", check=False)
    assert "this is the user folder bot/" in shadowed.stderr  # the trap is armed

    version = installed.run(installed.learning_bot, "--version").stdout.strip()
    assert re.fullmatch(r"learning-bot \d+\.\d+\.\d+\S*", version), version
    wheel_version = installed.wheel.name.split("-")[1]
    assert version == f"learning-bot {wheel_version}"
    isolated = installed.run(installed.python, "-I", "-m", "learning_bot", "--version")
    assert isolated.stdout.strip() == version

    assert installed.run(installed.learning_bot, "db", "url").stdout.strip() == (
        installed.database_url
    )
    upgraded = installed.run(installed.learning_bot, "db", "upgrade").stdout
    assert "revision" in upgraded
    simulated = installed.run(
        installed.learning_bot, "simulate", "--traces", "40", "--arms", "8", "--seed", "1"
    )
    assert simulated.stdout.strip()
    status = installed.run(installed.learning_bot, "status").stdout
    assert "Traces" in status and "40" in status, status
    verified = installed.run(installed.learning_bot, "db", "verify").stdout
    assert "default: ok" in verified, verified
    # No user data directory was used: everything went to the configured file.
    assert Path(installed.database_url.removeprefix("sqlite:///")).is_file()


def test_a_postgresql_url_without_the_extra_says_what_to_install(installed: Installed) -> None:
    url = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
    for command in (("status",), ("db", "upgrade"), ("serve", "--port", str(free_port()))):
        result = installed.run(installed.learning_bot, "--database-url", url, *command, check=False)
        assert result.returncode == 2, _shown(command, result)
        lines = result.stderr.strip().splitlines()
        assert lines == [
            "learning-bot: the PostgreSQL driver psycopg is not installed: "
            "pip install 'learning-bot[postgres]'"
        ], _shown(command, result)


@contextlib.contextmanager
def _serving(installed: Installed, argv: Sequence[str], env: dict[str, str]) -> Iterator[str]:
    """A server started from the user's folder; yields its base URL once /v1/health or the
    Slack route answers, stops it with SIGTERM and expects a clean exit."""
    port = free_port()
    log = installed.cwd / f"server-{port}.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [*argv, "--host", "127.0.0.1", "--port", str(port)],
            cwd=installed.cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                pytest.fail(f"{' '.join(argv)} exited with {proc.returncode}\n{log.read_text()}")
            try:
                urllib.request.urlopen(f"{base}/", timeout=2).close()
                break
            except urllib.error.HTTPError:
                break  # it answers, if not at its root
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"{' '.join(argv)} did not answer\n{log.read_text()}")
            time.sleep(0.2)
        yield base
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=120) == 0, log.read_text()
        assert "Traceback" not in log.read_text(), log.read_text()
    finally:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=60)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


def _get(url: str) -> tuple[int, dict[str, str], str]:
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(url, timeout=30) as response:
            return response.status, dict(response.headers), response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read().decode(errors="replace")


def _install_starts(base: str) -> None:
    """GET /slack/install sends the browser to Slack's authorize page: a redirect, or the
    install page that links there."""
    status, headers, body = _get(f"{base}/slack/install")
    authorize = "https://slack.com/oauth/v2/authorize?"
    if 300 <= status < 400:
        assert headers["Location"].startswith(authorize), headers
    else:
        assert status == 200, (status, body[:500])
        assert f'href="{authorize}' in body, body[:500]
    assert "client_id=111.222" in (headers.get("Location", "") + body)


SLACK_INSTALL = {
    "SLACK_CLIENT_ID": "111.222",
    "SLACK_CLIENT_SECRET": "client-secret",
    "SLACK_SIGNING_SECRET": "s" * 32,
}


def test_serve_answers_the_dashboard_the_api_and_the_slack_install(installed: Installed) -> None:
    env = installed.env | SLACK_INSTALL
    with _serving(installed, [installed.learning_bot, "serve"], env) as base:
        status, _, page = _get(f"{base}{BASE}/dashboard")
        assert status == 200 and "<html" in page.lower()
        status, _, body = _get(f"{base}{BASE}/summary")
        assert status == 200, body
        assert isinstance(json.loads(body), dict)
        status, _, body = _get(f"{base}/v1/health")
        assert (status, json.loads(body)) == (200, {"status": "ok"})
        _install_starts(base)


def test_the_slack_command_starts_the_install_flow(installed: Installed) -> None:
    env = installed.env | SLACK_INSTALL
    with _serving(installed, [installed.learning_bot, "slack"], env) as base:
        _install_starts(base)


@pytest.mark.parametrize("launch", ["learning-bot", "python -I -m learning_bot"])
async def test_mcp_over_stdio(installed: Installed, launch: str) -> None:
    """As an MCP client spawns it: the executable, or the venv's interpreter isolated from the
    working folder, with the database URL on the command line and HOME the only setting."""
    if launch == "learning-bot":
        command, args = installed.learning_bot, ["mcp"]
    else:
        command, args = installed.python, ["-I", "-m", "learning_bot", "mcp"]
    params = StdioServerParameters(
        command=command,
        args=[*args, f"--database-url={installed.database_url}"],
        env={"HOME": installed.env["HOME"]},
        cwd=installed.cwd,
    )
    with (installed.cwd / f"mcp-{launch.split()[0]}.log").open("w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            init = await session.initialize()
            assert init.server_info.name == "learning-bot"
            assert init.server_info.version == installed.wheel.name.split("-")[1]
            listed = {tool.name for tool in (await session.list_tools()).tools}
            assert {"qortex_learning_select", "learning_status"} <= listed
            result = await session.call_tool("learning_status", {})
            assert not result.is_error, result
            texts = [c.text for c in result.content if isinstance(c, TextContent)]
            assert any("Traces" in text for text in texts), texts


def test_the_client_and_an_example_from_the_wheel(installed: Installed) -> None:
    """The Python client as a user's agent imports it from the installed wheel: the Anthropic
    example (with the `anthropic` SDK installed beside the wheel, as its README says) runs
    three turns of one session against `learning-bot serve` from the wheel and a scripted
    Messages API, and the wheel's `status` shows the session took on the tool it found."""
    from tests.e2e.test_examples import SEARCH_QUESTIONS, SETTINGS, wait_until_up

    installed.run(*PIP, "--python", installed.python, "install", "anthropic>=2.14")
    learner = "wheel-example"
    env = installed.env | SETTINGS  # a budget that leaves run_sql to tool search
    with _serving(installed, [installed.learning_bot, "serve"], env) as base:
        installed.run(
            installed.learning_bot,
            *("phase", "active", "--confirm", "--learner", learner, "--url", base),
        )
        port = free_port()
        fake = subprocess.Popen(
            [
                sys.executable,
                str(ROOT / "tests" / "e2e" / "fake_messages_api.py"),
                "--port",
                str(port),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        api = f"http://127.0.0.1:{port}"
        try:
            wait_until_up(fake, f"{api}/healthz")
            demo = installed.run(
                installed.python,
                str(ROOT / "examples" / "anthropic_tools.py"),
                *("--url", base, "--learner", learner, "--session", "s-wheel"),
                *SEARCH_QUESTIONS,
                env=installed.env | {"ANTHROPIC_BASE_URL": api, "ANTHROPIC_API_KEY": "test"},
            )
        finally:
            fake.terminate()
            fake.communicate(timeout=60)
        assert demo.stdout == "count\n42\n" * 3, demo.stdout
        status = installed.run(
            installed.learning_bot, "status", "--learner", learner, "--url", base
        )
        assert "1 took on tools outside its cached prefix" in status.stdout, status.stdout
