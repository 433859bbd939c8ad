from __future__ import annotations

from collections.abc import Iterator

import pytest

from learning_bot.engine import LearningConfig, Phase
from learning_bot.engine.service import LearningService
from learning_bot.storage import SqlStore


@pytest.fixture
def store(database_url: str) -> Iterator[SqlStore]:
    s = SqlStore(database_url)
    yield s
    s.close()


@pytest.fixture
def active(store: SqlStore) -> LearningService:
    """A service in the active phase with the cache always fresh."""
    return LearningService(
        store, LearningConfig.for_policy("seed", phase=Phase.ACTIVE), rng=7, cache_ttl=0
    )


@pytest.fixture
def passive(store: SqlStore) -> LearningService:
    return LearningService(store, LearningConfig.for_policy("seed"), rng=7, cache_ttl=0)
