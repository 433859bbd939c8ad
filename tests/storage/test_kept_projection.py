"""The projection kept with a learner at its switch to active (migration 0019): saved,
replaced, read back by SqlStore and by the read-only view."""

from __future__ import annotations

from learning_bot.engine import Phase
from learning_bot.storage import SqlStore
from learning_bot.storage.lite import LiteReader, sqlite_path


def test_the_kept_projection_round_trips(store: SqlStore, database_url: str) -> None:
    learner = store.open_learner("kept", Phase.PASSIVE).id
    other = store.open_learner("other", Phase.PASSIVE).id
    assert store.saved_projection(learner) is None
    store.save_projection(learner, '{"runs": 1}', at=5)
    store.save_projection(learner, '{"runs": 2}', at=7)
    assert store.saved_projection(learner) == ('{"runs": 2}', 7)
    assert store.saved_projection(other) is None
    path = sqlite_path(database_url)
    if path is not None:
        lite = LiteReader(path)
        try:
            assert lite.saved_projection(learner) == ('{"runs": 2}', 7)
        finally:
            lite.close()
