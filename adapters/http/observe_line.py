"""Observe requests recorded together: for each learner, the requests waiting are written by
one `observe_many` (one transaction), and each is answered as if it had been alone."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from learning_bot.adapters.http.responses import ApiError
from learning_bot.bot.shapes import observe_json
from learning_bot.engine.bounds import MAX_BATCH
from learning_bot.engine.errors import InvalidInput, Unavailable
from learning_bot.engine.observation import RunReport
from learning_bot.engine.report_json import report_from_json
from learning_bot.engine.service import LearningService

_Waiting = tuple[Any, "asyncio.Future[Any]"]
"""A request body waiting for its turn, and where its answer goes."""


@dataclass(frozen=True)
class _Answer:
    """One request's answer, or the error it gets."""

    value: Any = None
    error: BaseException | None = None


def _parse_observe(data: Any) -> tuple[list[RunReport], bool]:
    """An observe body's reports, and whether it was a batch (`{reports: [...]}`)."""
    if isinstance(data, dict) and "reports" in data:
        raw = data["reports"]
        if not isinstance(raw, list) or not raw:
            raise ApiError(400, "reports must be a non-empty array")
        if len(raw) > MAX_BATCH:
            raise ApiError(400, f"reports: at most {MAX_BATCH} per request")
        reports = []
        for i, item in enumerate(raw):
            try:
                reports.append(report_from_json(item))
            except InvalidInput as exc:
                raise ApiError(400, f"reports[{i}]: {exc}") from None
        return reports, True
    return [report_from_json(data)], False


def _observe_answers(service: LearningService, bodies: list[Any]) -> list[_Answer]:
    """Observe the runs of several requests in one `observe_many` (one transaction), and
    answer each as if it had been alone: a body that does not parse gets its own error, and
    when the shared write fails for another reason than storage being unavailable, each
    request is written on its own so that one bad run fails only its request."""
    answers: list[_Answer | None] = []
    parsed: list[tuple[int, list[RunReport], bool]] = []
    for i, data in enumerate(bodies):
        try:
            reports, batch = _parse_observe(data)
        except Exception as exc:
            answers.append(_Answer(error=exc))
            continue
        answers.append(None)
        parsed.append((i, reports, batch))
    try:
        results = service.observe_many([r for _, reports, _ in parsed for r in reports])
        groups = []
        start = 0
        for i, reports, batch in parsed:
            groups.append((i, results[start : start + len(reports)], batch))
            start += len(reports)
    except Unavailable as exc:
        groups = []
        for i, _, _ in parsed:
            answers[i] = _Answer(error=exc)
    except Exception as exc:
        if len(parsed) == 1:
            answers[parsed[0][0]] = _Answer(error=exc)
            groups = []
        else:
            groups = []
            for i, reports, batch in parsed:
                try:
                    groups.append((i, service.observe_many(reports), batch))
                except Exception as single:
                    answers[i] = _Answer(error=single)
    for i, results, batch in groups:
        shaped = [observe_json(r) for r in results]
        answers[i] = _Answer({"results": shaped} if batch else shaped[0])
    return [a if a is not None else _Answer(error=RuntimeError("no answer")) for a in answers]


def _turn(waiting: list[_Waiting]) -> tuple[list[_Waiting], list[_Waiting]]:
    """The requests one turn takes (the oldest first, up to MAX_BATCH runs, at least one
    request) and those left for the next."""
    runs = 0
    for k, (data, _) in enumerate(waiting):
        reports = data.get("reports") if isinstance(data, dict) else None
        runs += len(reports) if isinstance(reports, list) else 1
        if runs > MAX_BATCH and k > 0:
            return waiting[:k], waiting[k:]
    return waiting, []


class ObserveLine:
    """Observe requests recorded together: for each learner a worker takes every request
    waiting and records their runs in one `observe_many` (one transaction); requests arriving
    meanwhile wait for the next turn. This is the only batching of observes: storage writes
    each `observe_many` as it comes, so one turn of a learner runs at a time (TURNS), and the
    turns never wait for each other's locks in the database. With a thread per request the
    threads would contend for the interpreter with the event loop, and each would wait to
    commit."""

    TURNS = 1

    def __init__(self, call: Callable[..., Awaitable[Any]]) -> None:
        self._call = call
        self._waiting: dict[LearningService, list[_Waiting]] = {}
        self._running: dict[LearningService, int] = {}
        self._turns: set[asyncio.Task[None]] = set()

    async def observe(self, service: LearningService, data: Any) -> Any:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(service, []).append((data, future))
        running = self._running.get(service, 0)
        if running < self.TURNS:
            self._running[service] = running + 1
            turn = asyncio.create_task(self._serve(service))
            self._turns.add(turn)
            turn.add_done_callback(self._turns.discard)
        return await future

    async def _serve(self, service: LearningService) -> None:
        """Record what waits for `service`, turn after turn, until nothing does."""
        try:
            while True:
                waiting = self._waiting.get(service)
                if not waiting:
                    return
                batch, self._waiting[service] = _turn(waiting)
                try:
                    answers = await self._call(_observe_answers, service, [d for d, _ in batch])
                except asyncio.CancelledError:  # the server is stopping: nobody is answered
                    for _, future in batch + self._waiting.pop(service, []):
                        future.cancel()
                    raise
                except Exception as exc:
                    answers = [_Answer(error=exc)] * len(batch)
                for (_, future), answer in zip(batch, answers, strict=True):
                    if future.done():
                        continue
                    if answer.error is not None:
                        future.set_exception(answer.error)
                    else:
                        future.set_result(answer.value)
        finally:
            left = self._running[service] - 1
            if left:
                self._running[service] = left
            else:
                del self._running[service]
                if not self._waiting.get(service):
                    self._waiting.pop(service, None)
