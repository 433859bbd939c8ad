from __future__ import annotations

from collections.abc import Iterator

import pytest

from learning_bot.bot.bus import Actor, BusSettings, CommandBus, Invocation, LearnerServices
from learning_bot.bot.replies import Reply
from learning_bot.engine import LearningConfig, Phase
from learning_bot.engine.service import LearningService
from learning_bot.storage import SqlStore
from learning_bot.storage.command_log import SqlCommandLog

ADMIN = Actor("U-admin", "Ada", is_admin=True)
MEMBER = Actor("U-member", "Max")
GUEST = Actor("U-guest", "Gus", is_guest=True)


@pytest.fixture
def store(database_url: str) -> Iterator[SqlStore]:
    s = SqlStore(database_url)
    yield s
    s.close()


def make_bus(store: SqlStore, settings: BusSettings) -> CommandBus:
    """A bus over `store` whose learners start active and re-read storage on every use."""
    config = LearningConfig.for_policy("seed", phase=Phase.ACTIVE)

    def make(learner: str) -> LearningService:
        return LearningService(store, config, learner=learner, cache_ttl=0)

    return CommandBus(LearnerServices(make, config), SqlCommandLog(store.engine), settings)


@pytest.fixture
def bus(store: SqlStore) -> CommandBus:
    return make_bus(store, BusSettings(admins=frozenset({"U-listed"})))


def say(
    bus: CommandBus,
    text: object,
    actor: Actor = ADMIN,
    key: str | None = None,
    conversation: str = "C1",
) -> Reply:
    return bus.dispatch(
        Invocation("test", actor, text, scope="T1", conversation=conversation, idempotency_key=key)  # type: ignore[arg-type]
    )
