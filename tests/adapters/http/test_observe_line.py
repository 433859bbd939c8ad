"""Observe requests recorded together (ObserveLine): every request is answered as if it had
been alone, while the runs of the requests that waited together share one transaction."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

from learning_bot.adapters.http.observe_line import ObserveLine, _observe_answers
from learning_bot.adapters.http.responses import ApiError
from learning_bot.engine import LearningConfig, Phase
from learning_bot.engine.errors import InvalidInput, Unavailable
from learning_bot.engine.records import RunRecord
from learning_bot.engine.service import LearningService
from learning_bot.engine.store_records import RecordResult
from learning_bot.storage import SqlStore
from tests.adapters.http.conftest import TOKEN, Live

ARMS = [
    {"armId": "tool:fs:Read", "tokenCost": 120},
    {"armId": "skill:coding:main", "tokenCost": 200},
]


def body(trace_id: str, calls: Sequence[str] = ("Read",)) -> dict[str, Any]:
    return {
        "traceId": trace_id,
        "arms": ARMS,
        "toolCalls": [{"name": c} for c in calls],
        "usage": {"input": 10, "output": 5},
    }


class Recording:
    """The real store; writes down each transaction's trace ids and how many were written at
    once, can be told to take its time, and to fail."""

    def __init__(self, store: SqlStore) -> None:
        self.store = store
        self.batches: list[list[str]] = []
        self.poison: str | None = None
        self.down = False
        self.seconds = 0.0
        self.writing = 0
        self.most_at_once = 0
        self._lock = threading.Lock()

    def record_runs(
        self, learner_id: int, runs: Sequence[RunRecord], settings: str | None = None
    ) -> RecordResult:
        ids = [r.trace_id for r in runs]
        if self.down:
            raise Unavailable("storage is down")
        if self.poison in ids:
            raise RuntimeError("this run cannot be written")
        with self._lock:
            self.writing += 1
            self.most_at_once = max(self.most_at_once, self.writing)
        try:
            time.sleep(self.seconds)
            self.batches.append(ids)
            return self.store.record_runs(learner_id, runs, settings)
        finally:
            with self._lock:
                self.writing -= 1


@pytest.fixture
def service(tmp_path: Path) -> Iterator[tuple[LearningService, Recording]]:
    store = SqlStore(f"sqlite:///{tmp_path}/line.sqlite")
    writer = Recording(store)
    yield LearningService(store, LearningConfig(phase=Phase.ACTIVE), writer=writer), writer
    store.close()


def test_requests_waiting_together_share_one_transaction_and_keep_their_answers(
    service: tuple[LearningService, Recording],
) -> None:
    svc, writer = service
    answers = _observe_answers(
        svc,
        [
            body("a"),
            {"arms": ARMS},
            {"reports": [body("b"), body("c", [])]},
            body("a"),
            {"reports": []},
        ],
    )
    assert writer.batches == [["a", "b", "c", "a"]]
    assert answers[0].value["recorded"] is True and answers[0].value["traceId"] == "a"
    assert isinstance(answers[1].error, InvalidInput)
    assert "traceId (string) is required" in str(answers[1].error)
    results = answers[2].value["results"]
    assert [r["traceId"] for r in results] == ["b", "c"]
    assert [r["skipped"] for r in results] == [None, "conversational"]
    assert answers[3].value["duplicate"] is True and answers[3].value["recorded"] is False
    assert isinstance(answers[4].error, ApiError) and answers[4].error.status == 400
    assert svc.traces()[1] == 3
    assert svc.verify().ok


def test_a_run_that_cannot_be_written_fails_only_its_request(
    service: tuple[LearningService, Recording],
) -> None:
    svc, writer = service
    writer.poison = "bad"
    answers = _observe_answers(svc, [body("x"), body("bad"), {"reports": [body("y")]}])
    assert writer.batches == [["x"], ["y"]]
    assert answers[0].value["recorded"] is True
    assert isinstance(answers[1].error, RuntimeError)
    assert answers[2].value["results"][0]["recorded"] is True
    assert svc.traces()[1] == 2


def test_storage_down_fails_every_request_of_the_turn(
    service: tuple[LearningService, Recording],
) -> None:
    svc, writer = service
    writer.down = True
    answers = _observe_answers(svc, [body("p"), body("q")])
    assert all(isinstance(a.error, Unavailable) for a in answers)
    assert writer.batches == []


async def test_one_turn_of_a_learner_writes_at_a_time_and_the_next_takes_all_that_waited(
    service: tuple[LearningService, Recording],
) -> None:
    """The line is the only batching of observes: while a learner's turn writes, the requests
    arriving wait, and the next turn writes them all in one transaction."""
    svc, writer = service
    writer.seconds = 0.2
    line = ObserveLine(asyncio.to_thread)
    first = asyncio.create_task(line.observe(svc, body("first")))
    while not writer.writing:
        await asyncio.sleep(0.005)
    waiting = [asyncio.create_task(line.observe(svc, body(f"w{i}"))) for i in range(5)]
    answers = await asyncio.gather(first, *waiting)
    assert [a["traceId"] for a in answers] == ["first", *(f"w{i}" for i in range(5))]
    assert all(a["recorded"] for a in answers)
    assert writer.batches == [["first"], [f"w{i}" for i in range(5)]]
    assert writer.most_at_once == 1
    assert svc.verify().ok


def test_concurrent_observes_over_http_are_all_answered_for_themselves(live: Live) -> None:
    errors: list[str] = []
    recorded: list[str] = []
    lock = threading.Lock()
    barrier = threading.Barrier(12)

    def client(k: int) -> None:
        with httpx.Client(
            base_url=live.api, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30
        ) as c:
            barrier.wait()
            for i in range(6):
                if k == 0 and i % 2:
                    r = c.post("/observe", json={"arms": ARMS})
                    if r.status_code != 400 or "traceId" not in r.json()["error"]:
                        errors.append(r.text)
                    continue
                trace = f"line-{k}-{i % 4}"
                r = c.post("/observe", json=body(trace))
                if r.status_code != 200 or r.json()["traceId"] != trace:
                    errors.append(r.text)
                elif r.json()["recorded"]:
                    with lock:
                        recorded.append(trace)

    threads = [threading.Thread(target=client, args=(k,)) for k in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == []
    assert sorted(recorded) == sorted(
        {f"line-{k}-{i % 4}" for k in range(12) for i in range(6) if not (k == 0 and i % 2)}
    )
    with live.client() as c:
        ids = {t["traceId"] for t in c.get("/traces", params={"limit": 1000}).json()["traces"]}
    assert set(recorded) <= ids


def test_a_turn_takes_at_most_a_thousand_runs_but_always_one_request() -> None:
    from learning_bot.adapters.http.observe_line import _turn

    def waiting(*sizes: int) -> list[Any]:
        return [({"reports": [{}] * n} if n > 1 else {}, None) for n in sizes]

    taken, left = _turn(waiting(600, 300, 200))
    assert [len(d.get("reports", [1])) for d, _ in taken] == [600, 300]
    assert len(left) == 1
    taken, left = _turn(waiting(1000, 1))
    assert len(taken) == 1 and len(left) == 1
    taken, left = _turn(waiting(1, 1, 1))
    assert len(taken) == 3 and left == []
    taken, left = _turn([({"reports": "x"}, None), ("not a dict", None)])
    assert len(taken) == 2 and left == []
