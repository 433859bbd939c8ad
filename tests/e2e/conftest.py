"""Process-level tests: each documented way of running learning-bot, as a subprocess."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "e2e: starts learning-bot as a subprocess and talks to it (tests/e2e)"
    )
