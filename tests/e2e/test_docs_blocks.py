"""Every shell command block of the README and of the pages under docs/ that it leads to, run
as written: in a fresh home with a fresh database, with the installed `learning-bot` first on
PATH and `.venv` where the README says.

A block that cannot run here is marked by the comment line right above it,
`<!-- needs: <what> (<the test that covers it instead>) -->`:

- `needs: a running server` blocks run against a `learning-bot serve` this test starts (their
  `127.0.0.1:8787` is pointed at it);
- `needs: slack credentials`, `discord credentials` and `a terminal to stop it` blocks are not
  run; the comment must name the existing test that covers the same commands against fakes.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.processes import inherited

from .launch import served

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
NOT_RUN = {
    # container commands: deploy/smoke.sh runs them where a container engine runs
    "deploying.md",
}
PAGES = [README, *sorted(p for p in (ROOT / "docs").glob("*.md") if p.name not in NOT_RUN)]
"""The README and its pages (the generated reference pages under docs/reference/ hold no
commands to run)."""
BIN = Path(sys.executable).parent
SHELLS = ("sh", "bash", "shell")
NEEDS = re.compile(r"<!--\s*needs:\s*(?P<what>[^(]*?)\s*(?:\((?P<why>.*)\))?\s*-->")
COVERED_ELSEWHERE = (
    "slack credentials",
    "discord credentials",
    "a terminal to stop it",
    "a model API key",
    "your own logs",
)
SERVER = "a running server"


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    code: str
    needs: str | None
    why: str

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


def shell_blocks(text: str, page: str) -> list[Block]:
    blocks: list[Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        fence = re.match(r"^```(\w*)\s*$", lines[i])
        if not fence:
            i += 1
            continue
        start = i
        i += 1
        body: list[str] = []
        while i < len(lines) and not lines[i].startswith("```"):
            body.append(lines[i])
            i += 1
        i += 1
        if fence.group(1) not in SHELLS:
            continue
        above = next((ln for ln in reversed(lines[:start]) if ln.strip()), "")
        marker = NEEDS.search(above)
        blocks.append(
            Block(
                page,
                start + 1,
                "\n".join(body),
                marker.group("what").strip() if marker else None,
                (marker.group("why") or "") if marker else "",
            )
        )
    return blocks


def python_blocks(text: str, page: str) -> list[Block]:
    """A page's python blocks, with the `needs:` comment above each (as for shell)."""
    blocks = []
    for m in re.finditer(r"^```python\n(.*?)^```", text, re.S | re.M):
        before = text[: m.start()]
        above = next((ln for ln in reversed(before.splitlines()) if ln.strip()), "")
        marker = NEEDS.search(above)
        blocks.append(
            Block(
                page,
                before.count("\n") + 1,
                m.group(1),
                marker.group("what").strip() if marker else None,
                (marker.group("why") or "") if marker else "",
            )
        )
    return blocks


def _name(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


BLOCKS = [b for page in PAGES for b in shell_blocks(page.read_text(), _name(page))]
PYTHON_BLOCKS = [b for page in PAGES for b in python_blocks(page.read_text(), _name(page))]


def _env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir()
    env = {
        k: v
        for k, v in inherited().items()
        if not k.startswith(("LEARNING_BOT_", "SLACK_", "DISCORD_", "XDG_"))
    }
    env.update(
        HOME=str(home),
        PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}",
        LEARNING_BOT_DATABASE_URL=f"sqlite:///{tmp_path}/readme.sqlite",
        NO_COLOR="1",
    )
    (tmp_path / ".venv").symlink_to(Path(sys.prefix))
    return env


def _run(code: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", code],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=600,
    )


def test_the_pages_have_shell_blocks_and_no_retired_commands() -> None:
    assert len(BLOCKS) >= 6
    assert any(b.page == "README.md" for b in BLOCKS)
    for page in PAGES:
        text = page.read_text()
        for retired in ("python -m adapters.slack", "python -m adapters.discord", "from bot.app"):
            assert retired not in text, (_name(page), retired)
    for block in BLOCKS:
        assert block.needs in (None, SERVER, *COVERED_ELSEWHERE), (block.id, block.needs)


def test_every_picture_the_pages_show_is_in_the_repository_and_made_by_make_screenshots() -> None:
    pictures = {
        _name((page.parent / link).resolve())
        for page in PAGES
        for link in re.findall(r"!\[[^\]]*\]\(((?:docs/)?screenshots/[^)\s]+)\)", page.read_text())
    }
    assert {"docs/screenshots/status-slack.png", "docs/screenshots/phase-discord.png"} <= pictures
    missing = [p for p in pictures if not (ROOT / p).is_file()]
    assert not missing, f"pictures not in the repository: {missing}"
    makefile = (ROOT / "Makefile").read_text()
    target = makefile[makefile.index("\nscreenshots:") :].split("\n\n")[0]
    scripts = sorted(p.name for p in (ROOT / "docs").glob("*screenshot*.py"))
    assert scripts and all(f"docs/{name}" in target for name in scripts), (scripts, target)


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.needs is None], ids=lambda b: b.id)
def test_block_runs_as_written(block: Block, tmp_path: Path) -> None:
    result = _run(block.code, _env(tmp_path), tmp_path)
    assert result.returncode == 0, f"{block.id}\n{block.code}\n{result.stdout}\n{result.stderr}"
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.needs == SERVER], ids=lambda b: b.id)
def test_block_runs_against_a_server(block: Block, tmp_path: Path) -> None:
    env = _env(tmp_path)
    with served(env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) as server:
        code = block.code.replace("127.0.0.1:8787", f"127.0.0.1:{server.port}")
        result = _run(code, env, tmp_path)
        assert result.returncode == 0, f"{block.id}\n{result.stdout}\n{result.stderr}"
        assert result.stdout.strip() and '"error"' not in result.stdout, result.stdout


@pytest.mark.parametrize(
    "block", [b for b in BLOCKS if b.needs in COVERED_ELSEWHERE], ids=lambda b: b.id
)
def test_block_not_run_here_names_the_test_that_covers_it(block: Block) -> None:
    named = re.findall(r"tests/[\w/]+\.py", block.why)
    assert named, f"{block.id}: say which test covers it instead"
    for path in named:
        assert (ROOT / path).is_file(), f"{block.id}: {path} does not exist"
    commands = {
        line.split()[1]
        for line in block.code.splitlines()
        if line.startswith("learning-bot ") and len(line.split()) > 1
    }
    covering = " ".join((ROOT / p).read_text() for p in named)
    for command in commands:  # the commands it documents are the ones the test runs
        assert command in covering, (block.id, command, named)


@pytest.mark.parametrize("block", [b for b in PYTHON_BLOCKS if b.needs is None], ids=lambda b: b.id)
def test_python_block_runs_as_written(block: Block, tmp_path: Path) -> None:
    """The embedding snippets, with made-up Slack settings (nothing is sent to Slack)."""
    env = _env(tmp_path) | {"SLACK_SIGNING_SECRET": "s" * 32, "SLACK_BOT_TOKEN": "xoxb-1"}
    result = subprocess.run(
        [sys.executable, "-c", block.code],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, f"{block.id}\n{result.stderr}"


@pytest.mark.parametrize(
    "block", [b for b in PYTHON_BLOCKS if b.needs == SERVER], ids=lambda b: b.id
)
def test_python_block_runs_against_a_server(block: Block, tmp_path: Path) -> None:
    """The Python client's agent loop, against `learning-bot serve` as `make run` starts it:
    it runs, prints, and its runs are recorded (none fell back to every arm)."""
    env = _env(tmp_path)
    with served(env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) as server:
        code = block.code.replace("127.0.0.1:8787", f"127.0.0.1:{server.port}")
        result = subprocess.run(
            [sys.executable, "-c", code],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert result.returncode == 0, f"{block.id}\n{result.stderr}"
    assert result.stdout.strip() and "not recorded" not in result.stdout, result.stdout
    assert "fell back" not in result.stderr, result.stderr


@pytest.mark.parametrize(
    "block", [b for b in PYTHON_BLOCKS if b.needs in COVERED_ELSEWHERE], ids=lambda b: b.id
)
def test_python_block_not_run_here_names_the_test_that_runs_it(block: Block) -> None:
    named = re.findall(r"tests/[\w/]+\.py", block.why)
    assert named, f"{block.id}: say which test covers it instead"
    for path in named:
        assert (ROOT / path).is_file(), f"{block.id}: {path} does not exist"
