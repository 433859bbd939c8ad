"""A server started while its database was down checks (creates) the schema when storage first
answers: every thread that reaches storage meanwhile waits for that check, none goes ahead
into tables that do not exist yet (the spool's replay thread beside a request's thread)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from sqlalchemy import create_engine

from learning_bot.storage import database


def test_a_second_thread_waits_for_the_deferred_check_in_progress(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    engine = create_engine(f"sqlite:///{tmp_path}/deferred.sqlite")
    events: list[str] = []
    started = threading.Event()

    def slow_check(checked: Any, *, auto_create: bool = True, **_: Any) -> None:
        assert checked is engine
        started.set()
        database.schema_ready(checked)  # the check's own statements re-enter: no deadlock
        time.sleep(0.3)
        events.append("schema made")

    monkeypatch.setattr(database, "ensure_schema", slow_check)
    with database._deferred_lock:
        database._DEFERRED[engine] = True

    def first() -> None:
        database.schema_ready(engine)

    def second() -> None:
        started.wait(120)
        database.schema_ready(engine)
        events.append("second went on")

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert events == ["schema made", "second went on"]
    assert engine not in database._DEFERRED
    database.schema_ready(engine)  # done: the quick way out from now on
    assert events == ["schema made", "second went on"]
    engine.dispose()


def test_a_failed_check_stays_deferred(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    from learning_bot.engine.errors import Unavailable

    engine = create_engine(f"sqlite:///{tmp_path}/deferred.sqlite")

    def down(_: Any, **__: Any) -> None:
        raise Unavailable("storage is unavailable: connection refused")

    monkeypatch.setattr(database, "ensure_schema", down)
    with database._deferred_lock:
        database._DEFERRED[engine] = True
    with pytest.raises(Unavailable):
        database.schema_ready(engine)
    assert database._DEFERRED.get(engine) is True
    with database._deferred_lock:
        database._DEFERRED.pop(engine, None)
    engine.dispose()
