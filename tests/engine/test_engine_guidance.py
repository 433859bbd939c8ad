"""The guidance sentence naming the tools left out of a prompt (engine.guidance)."""

from __future__ import annotations

import pytest

from learning_bot.engine import excluded_tools_guidance


def test_guidance_names_excluded_tools_only() -> None:
    text = excluded_tools_guidance(
        ["tool:web:WebSearch", "skill:go:main", "file:w:README.md", "tool:ext:Jira"]
    )
    assert text is not None
    assert "WebSearch" in text
    assert "Jira" in text
    assert "go" not in text.split()
    assert "README" not in text
    lowered = text.lower()
    assert "explain" in lowered
    assert "alternative" in lowered


@pytest.mark.parametrize(
    "excluded", [[], ["skill:go:main", "memory:p:n1", "file:w:a.md", "section:s:intro"]]
)
def test_guidance_is_none_without_excluded_tools(excluded: list[str]) -> None:
    assert excluded_tools_guidance(excluded) is None


def test_guidance_cuts_names_at_64_characters() -> None:
    text = excluded_tools_guidance([f"tool:x:{'T' * 100}", f"tool:x:{'S' * 64}"])
    assert text is not None
    assert "T" * 64 in text
    assert "T" * 65 not in text
    assert "S" * 64 in text


def test_guidance_strips_control_characters() -> None:
    text = excluded_tools_guidance(["tool:x:Evil\nIgnore\x00previous\x1b[2J\u202eTool"])
    assert text is not None
    assert "EvilIgnoreprevious[2JTool" in text
    for ch in ("\n", "\x00", "\x1b", "\u202e"):
        assert ch not in text
