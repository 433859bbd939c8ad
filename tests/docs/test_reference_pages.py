"""The reference pages under docs/reference/ are what docs/generate.py writes from the code now,
every page under docs/ is reachable from the README, and every environment variable the code
reads is described on a hand-written page."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
NAMED = re.compile(r"\b(?:LEARNING_BOT|SLACK|DISCORD)_\w*[A-Z0-9]\b")


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_generate", ROOT / "docs" / "generate.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


GENERATE = _generator()
NOW = GENERATE.pages()
"""Each reference page as the code gives it now (built once: it imports most of the project)."""


@pytest.mark.parametrize("name", sorted(GENERATE.PAGES))
def test_the_checked_in_page_is_what_the_code_gives_now(name: str) -> None:
    path = ROOT / "docs" / "reference" / name
    expected = NOW[path]
    assert path.is_file(), f"{path.relative_to(ROOT)} is missing: run `make docs`"
    assert path.read_text(encoding="utf-8") == expected, (
        f"{path.relative_to(ROOT)} is out of date: run `make docs`"
    )


def test_a_stale_page_is_found_and_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(GENERATE, "REFERENCE", tmp_path)
    monkeypatch.setattr(GENERATE, "PAGES", {"a.md": lambda: "now\n", "b.md": lambda: "new\n"})
    (tmp_path / "a.md").write_text("an old page\n")
    assert {p.name for p in GENERATE.stale()} == {"a.md", "b.md"}
    assert GENERATE.main(["--check"]) == 1
    assert GENERATE.main([]) == 0
    assert (tmp_path / "a.md").read_text() == "now\n"
    assert GENERATE.stale() == [] and GENERATE.main(["--check"]) == 0


def test_the_reference_lists_what_the_code_declares() -> None:
    from learning_bot.engine.config import LearningConfig

    settings = (ROOT / "docs" / "reference" / "settings.md").read_text()
    for key in LearningConfig().to_dict(complete=True):
        assert f"| `{key}` |" in settings, key
    cli = (ROOT / "docs" / "reference" / "cli.md").read_text()
    for command in ("status", "replay", "serve", "discord sync", "completion"):
        assert f"## learning-bot {command}\n" in cli, command
    routes = (ROOT / "docs" / "reference" / "http-routes.md").read_text()
    for route in ("/__openclaw__/api/learning/select", "/v1/learning/observe", "/readyz", "/mcp"):
        assert f"`{route}`" in routes, route


def test_every_docs_page_is_linked_from_the_readme() -> None:
    readme = (ROOT / "README.md").read_text()
    linked = set(re.findall(r"\]\((docs/[^)#\s]+\.md)", readme))
    pages = {p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").rglob("*.md")}
    assert pages - linked == set(), "pages the README does not link"
    assert linked - pages == set(), "links to pages that do not exist"


def test_every_link_between_pages_leads_to_a_page() -> None:
    for page in [ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]:
        for target in re.findall(r"\]\(([^)#\s:]+\.md)(?:#[^)]*)?\)", page.read_text()):
            assert (page.parent / target).is_file(), (page.relative_to(ROOT), target)


def test_every_environment_variable_is_described_and_every_described_one_is_read() -> None:
    read = GENERATE.environment_variables()
    undescribed = [name for name in read if not GENERATE.documented_in(name)]
    assert undescribed == [], "variables the code reads that no page describes"
    named: set[str] = set()
    for page in GENERATE._hand_written_pages():
        named |= set(NAMED.findall(page.read_text()))
    elsewhere = " ".join(  # the tests' database, and the compose file's and smoke test's own
        p.read_text()
        for p in [
            ROOT / "tests" / "conftest.py",
            *(ROOT / "tests" / "deploy").glob("*.py"),
            *(p for p in (ROOT / "deploy").rglob("*") if p.is_file()),
        ]
    )
    unread = {name for name in named - set(read) if name not in elsewhere}
    assert unread == set(), "variables the pages name that nothing reads"
