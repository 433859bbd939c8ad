"""A Python client of the learning API (`learning-bot serve`), synchronous and asynchronous.

`LearningClient` and `AsyncLearningClient` send the same requests: `select` before a model
call, `observe` after it, and `reward`, `status`, `summary` and `set_phase` for the operator's
side. The request and response models are dataclasses whose fields carry the JSON names of the
OpenAPI document: they are the wire types declared in `engine.wire`, from which the server's
document and body checks are derived too.

The agent's path never fails because of the learning layer:

- `select` retries a 503 or a connection error with backoff, then answers every arm it was
  given, with `fallback` saying why (what the service does when its storage is down);
- `observe` retries the same way, then logs the failure and answers None. What is lost then is
  that run's trace and its posterior updates (the server's spool covers storage outages behind
  a running server, not a server that cannot be reached).

Neither raises, whatever the cause (a refused body, an answer that does not parse, a context
that is not JSON): the cause is logged on `learning_bot.client` and, for select, in `fallback`.

`reward`, `status`, `summary` and `set_phase` are operator calls: they retry the same way and
then raise `LearningClientError`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Generic, Literal, Self, TypeVar

import httpx

from learning_bot.engine.wire.declare import json_names
from learning_bot.engine.wire.operator import PhaseResult, Reply, RewardRequest, RewardResult
from learning_bot.engine.wire.reports import Summary
from learning_bot.engine.wire.runs import (
    ArmSpec,
    ObserveResult,
    RunReport,
    Selection,
    SelectRequest,
    ToolCall,
    Usage,
)

log = logging.getLogger("learning_bot.client")
T = TypeVar("T")
TransportT = TypeVar("TransportT", httpx.BaseTransport, httpx.AsyncBaseTransport)

DEFAULT_URL = "http://127.0.0.1:8787"
"""Where `learning-bot serve` (and `make run`) listens by default."""
API_PATH = "/__openclaw__/api/learning"
TOKEN_ENV = "LEARNING_BOT_API_TOKEN"
"""The bearer token of the mutating routes, read from the environment unless given."""
RETRY_STATUSES = frozenset({502, 503, 504})
"""Answers worth another try: the server is up but its storage (or a proxy) is not."""


def _read(model: Callable[[Any], T], data: Any) -> T:
    """An answer read as its model; LearningClientError when it is not of its shape."""
    try:
        return model(data)
    except ValueError as exc:
        raise LearningClientError(str(exc)) from None


class LearningClientError(Exception):
    """A call the server refused or could not answer; `status` is the HTTP status (None when
    it could not be reached)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


# -- the shared part of both clients ----------------------------------------------------------


def tool_calls_of(calls: Iterable[ToolCall | str | Mapping[str, Any]]) -> tuple[ToolCall, ...]:
    """Tool calls given as names, `{"name", "meta", "arm"}` objects or ToolCalls."""
    out: list[ToolCall] = []
    for call in calls:
        if isinstance(call, ToolCall):
            out.append(call)
        elif isinstance(call, str):
            out.append(ToolCall(call))
        else:
            arm = call.get("arm")
            out.append(
                ToolCall(str(call["name"]), call.get("meta"), None if arm is None else str(arm))
            )
    return tuple(out)


def _tool_name(arm_id: str) -> str | None:
    """The name of a tool's arm id (`tool:<category>:<name>`), None for another arm."""
    parts = arm_id.split(":", 2)
    return parts[2] if len(parts) == 3 and parts[0] == "tool" else None


def _naming_arms(calls: Sequence[ToolCall], offered: Sequence[str]) -> tuple[ToolCall, ...]:
    """Each call with the arm it calls, where the client can tell: the call names it already;
    its name is an offered arm's id or `category:name`; or its name is that of exactly one of
    the `offered` tools. Other calls are sent as they are (the server credits a bare name
    only when one of the run's arms has it)."""
    ids = set(offered)
    by_name: dict[str, list[str]] = {}
    for arm_id in offered:
        name = _tool_name(arm_id)
        if name is not None:
            by_name.setdefault(name, []).append(arm_id)
    out: list[ToolCall] = []
    for call in calls:
        if call.arm is None:
            if call.name in ids and _tool_name(call.name) is not None:
                call = ToolCall(_tool_name(call.name) or call.name, call.meta, call.name)
            elif f"tool:{call.name}" in ids:
                arm_id = f"tool:{call.name}"
                call = ToolCall(_tool_name(arm_id) or call.name, call.meta, arm_id)
            else:
                named = by_name.get(call.name, ())
                if len(named) == 1:
                    call = ToolCall(call.name, call.meta, named[0])
        out.append(call)
    return tuple(out)


def report_for(
    selection: Selection,
    *,
    tool_calls: Iterable[ToolCall | str | Mapping[str, Any]] = (),
    texts: Iterable[str] = (),
    trace_id: str | None = None,
    usage: Usage | None = None,
    **extra: Any,
) -> RunReport:
    """The run report of a run made with `selection`: every arm the select offered, included
    when it was selected or sent as an addition (`added`); a deferred arm the model called is
    reported `loaded` (it loaded it through tool search), not included. The report carries the
    selection's session key and the context the select sent (a `context` given here adds to
    it), and each tool call names its arm where the client can tell which (`_naming_arms`)."""
    chosen = set(selection.selected) | set(selection.added)
    deferred = set(selection.deferred) - chosen
    offered = [a.arm_id for a in selection.arms if a.arm_id in chosen or a.arm_id in deferred]
    calls = _naming_arms(tool_calls_of(tool_calls), offered)
    called_arms = {c.arm for c in calls if c.arm is not None}
    called_names = {c.name for c in calls if c.arm is None}
    arms = tuple(
        ArmSpec(
            a.arm_id,
            a.token_cost,
            a.label,
            a.content,
            a.arm_id in chosen,
            loaded=a.arm_id in deferred and (a.arm_id in called_arms or a.name in called_names),
        )
        for a in selection.arms
    )
    if selection.session_key and "session_key" not in extra:
        extra["session_key"] = selection.session_key
    context = {**(selection.context or {}), **(extra.pop("context", None) or {})}
    if context:
        extra["context"] = context
    return RunReport(
        trace_id=trace_id or uuid.uuid4().hex,
        arms=arms,
        is_baseline=selection.is_baseline,
        assistant_texts=tuple(texts),
        tool_calls=calls,
        usage=usage,
        **extra,
    )


def _error_text(response: httpx.Response) -> str:
    try:
        data = response.json()
    except ValueError:
        data = None
    if isinstance(data, Mapping) and isinstance(data.get("error"), str):
        return f"HTTP {response.status_code}: {data['error']}"
    return f"HTTP {response.status_code}"


@dataclass
class _Settings:
    base: str
    headers: dict[str, str]
    learner: str | None
    retries: int
    backoff: float
    timeout: float

    @classmethod
    def of(
        cls,
        url: str,
        token: str | None,
        learner: str | None,
        retries: int,
        backoff: float,
        timeout: float,
    ) -> _Settings:
        if retries < 0:
            raise ValueError("retries must be 0 or more")
        token = token if token is not None else os.environ.get(TOKEN_ENV) or None
        headers = {"Accept": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        base = url.rstrip("/")
        if not base.endswith(API_PATH):
            base += API_PATH
        return cls(base, headers, learner, retries, backoff, timeout)

    @property
    def params(self) -> dict[str, str]:
        return {"learner": self.learner} if self.learner else {}

    def delay(self, attempt: int) -> float:
        """Exponential backoff with full jitter: up to backoff x 2^attempt seconds."""
        return random.uniform(0, self.backoff * 2**attempt)


def _retryable(outcome: httpx.Response | Exception) -> bool:
    if isinstance(outcome, httpx.Response):
        return outcome.status_code in RETRY_STATUSES
    return isinstance(outcome, httpx.TransportError)


def _answer(outcome: httpx.Response | Exception) -> Any:
    """The JSON of a 2xx answer; otherwise LearningClientError."""
    if isinstance(outcome, Exception):
        raise LearningClientError(f"the learning server could not be reached: {outcome!r}")
    if not outcome.is_success:
        raise LearningClientError(_error_text(outcome), outcome.status_code)
    try:
        return outcome.json()
    except ValueError:
        raise LearningClientError("the learning server answered something else than JSON") from None


def _everything(
    arms: Sequence[ArmSpec],
    session_key: str | None,
    context: Mapping[str, Any] | None,
    exc: Exception,
) -> Selection:
    """select's answer when the server could not give one: every arm, the cause logged."""
    log.warning("select fell back to every arm: %s", exc)
    return Selection.everything(arms, session_key, f"learning server: {exc}", context)


def _report_or_none(
    selection: Selection,
    tool_calls: Iterable[ToolCall | str | Mapping[str, Any]],
    texts: Iterable[str],
    trace_id: str | None,
    usage: Usage | None,
    extra: dict[str, Any],
) -> RunReport | None:
    """observe's report (`report_for`); None, logged, when it cannot be built."""
    try:
        return report_for(
            selection, tool_calls=tool_calls, texts=texts, trace_id=trace_id, usage=usage, **extra
        )
    except Exception as exc:  # never fails the agent: logged, not raised
        log.error("observe: the run report could not be built: %r", exc)
        return None


def _not_recorded(report: RunReport, exc: Exception) -> None:
    log.error("observe of run %s was not recorded: %s", report.trace_id, exc)


def _reward_request(arm: str, value: float, reason: str | None, actor: str | None) -> RewardRequest:
    return RewardRequest(arm, "accepted" if value >= 0.5 else "rejected", value, reason, actor)


class _Client(Generic[TransportT]):
    """The constructor both clients share; each opens its own kind of HTTP client."""

    def __init__(
        self,
        url: str = DEFAULT_URL,
        *,
        token: str | None = None,
        learner: str | None = None,
        retries: int = 3,
        backoff: float = 0.2,
        timeout: float = 5.0,
        transport: TransportT | None = None,
    ) -> None:
        self._settings = _Settings.of(url, token, learner, retries, backoff, timeout)
        self._open(transport)

    def _open(self, transport: TransportT | None) -> None:
        raise NotImplementedError


class LearningClient(_Client[httpx.BaseTransport]):
    """The learning API from synchronous code. A context manager; `close()` otherwise.

    `url` is the server (`http://HOST:PORT`, the API path is added); `token` defaults to
    `LEARNING_BOT_API_TOKEN`; `learner` names a learner other than the server's default;
    `retries` more tries after a 503 or a connection error, `backoff` seconds the first wait."""

    def _open(self, transport: httpx.BaseTransport | None) -> None:
        s = self._settings
        self._http = httpx.Client(headers=s.headers, timeout=s.timeout, transport=transport)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _send(self, method: str, path: str, body: Any = None) -> httpx.Response | Exception:
        s = self._settings
        outcome: httpx.Response | Exception
        for attempt in range(s.retries + 1):
            try:
                outcome = self._http.request(method, f"{s.base}/{path}", json=body, params=s.params)
            except httpx.HTTPError as exc:
                outcome = exc
            if attempt == s.retries or not _retryable(outcome):
                break
            time.sleep(s.delay(attempt))
        return outcome

    def select(
        self,
        arms: Sequence[ArmSpec],
        *,
        session_key: str | None = None,
        context: Mapping[str, Any] | None = None,
    ) -> Selection:
        """The arms for the next prompt; every arm (with `fallback` set) if the server cannot
        answer. A session key keeps the same arms in the same order for the session."""
        request = SelectRequest(tuple(arms), context, session_key)
        try:
            data = _answer(self._send("POST", "select", request.to_json()))
            return Selection.from_json(data, arms, session_key, context)
        except Exception as exc:  # never fails the agent: logged, not raised
            return _everything(arms, session_key, context, exc)

    def observe(
        self,
        selection: Selection,
        *,
        tool_calls: Iterable[ToolCall | str | Mapping[str, Any]] = (),
        texts: Iterable[str] = (),
        trace_id: str | None = None,
        usage: Usage | None = None,
        **extra: Any,
    ) -> ObserveResult | None:
        """Report the run made with `selection` (see `report_for`); None, logged, when it
        could not be delivered."""
        report = _report_or_none(selection, tool_calls, texts, trace_id, usage, extra)
        return None if report is None else self.observe_report(report)

    def observe_report(self, report: RunReport) -> ObserveResult | None:
        """Report one run; None, logged, when it could not be delivered (the run is lost)."""
        try:
            return ObserveResult.from_json(_answer(self._send("POST", "observe", report.to_json())))
        except Exception as exc:  # never fails the agent: logged, not raised
            _not_recorded(report, exc)
            return None

    def reward(
        self,
        arm: str,
        value: float = 1.0,
        *,
        reason: str | None = None,
        actor: str | None = None,
    ) -> RewardResult:
        """A manual reward for one arm (full id or label), 1.0 good to 0.0 bad."""
        request = _reward_request(arm, value, reason, actor)
        return _read(
            RewardResult.from_json, _answer(self._send("POST", "reward", request.to_json()))
        )

    def summary(self) -> Summary:
        return _read(Summary.from_json, _answer(self._send("GET", "summary")))

    def status(self) -> Reply:
        """`/learning status`: its text in `.summary`, its figures in `.data`."""
        return _read(Reply.from_json, _answer(self._send("POST", "command", {"text": "status"})))

    def set_phase(self, phase: Literal["passive", "active"]) -> PhaseResult:
        """Switch the phase (confirmed: the caller asked for it)."""
        body = {"phase": phase, "confirm": True}
        return _read(PhaseResult.from_json, _answer(self._send("POST", "phase", body)))


class AsyncLearningClient(_Client[httpx.AsyncBaseTransport]):
    """`LearningClient` for asyncio code: the same calls, awaited, over `httpx.AsyncClient`.
    An async context manager; `await aclose()` otherwise."""

    def _open(self, transport: httpx.AsyncBaseTransport | None) -> None:
        s = self._settings
        self._http = httpx.AsyncClient(headers=s.headers, timeout=s.timeout, transport=transport)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _send(self, method: str, path: str, body: Any = None) -> httpx.Response | Exception:
        s = self._settings
        outcome: httpx.Response | Exception
        for attempt in range(s.retries + 1):
            try:
                outcome = await self._http.request(
                    method, f"{s.base}/{path}", json=body, params=s.params
                )
            except httpx.HTTPError as exc:
                outcome = exc
            if attempt == s.retries or not _retryable(outcome):
                break
            await asyncio.sleep(s.delay(attempt))
        return outcome

    async def select(
        self,
        arms: Sequence[ArmSpec],
        *,
        session_key: str | None = None,
        context: Mapping[str, Any] | None = None,
    ) -> Selection:
        """See `LearningClient.select`."""
        request = SelectRequest(tuple(arms), context, session_key)
        try:
            data = _answer(await self._send("POST", "select", request.to_json()))
            return Selection.from_json(data, arms, session_key, context)
        except Exception as exc:  # never fails the agent: logged, not raised
            return _everything(arms, session_key, context, exc)

    async def observe(
        self,
        selection: Selection,
        *,
        tool_calls: Iterable[ToolCall | str | Mapping[str, Any]] = (),
        texts: Iterable[str] = (),
        trace_id: str | None = None,
        usage: Usage | None = None,
        **extra: Any,
    ) -> ObserveResult | None:
        """See `LearningClient.observe`."""
        report = _report_or_none(selection, tool_calls, texts, trace_id, usage, extra)
        return None if report is None else await self.observe_report(report)

    async def observe_report(self, report: RunReport) -> ObserveResult | None:
        try:
            data = _answer(await self._send("POST", "observe", report.to_json()))
            return ObserveResult.from_json(data)
        except Exception as exc:  # never fails the agent: logged, not raised
            _not_recorded(report, exc)
            return None

    async def reward(
        self,
        arm: str,
        value: float = 1.0,
        *,
        reason: str | None = None,
        actor: str | None = None,
    ) -> RewardResult:
        request = _reward_request(arm, value, reason, actor)
        data = _answer(await self._send("POST", "reward", request.to_json()))
        return _read(RewardResult.from_json, data)

    async def summary(self) -> Summary:
        return _read(Summary.from_json, _answer(await self._send("GET", "summary")))

    async def status(self) -> Reply:
        data = _answer(await self._send("POST", "command", {"text": "status"}))
        return _read(Reply.from_json, data)

    async def set_phase(self, phase: Literal["passive", "active"]) -> PhaseResult:
        body = {"phase": phase, "confirm": True}
        return _read(PhaseResult.from_json, _answer(await self._send("POST", "phase", body)))


__all__ = [
    "API_PATH",
    "DEFAULT_URL",
    "TOKEN_ENV",
    "ArmSpec",
    "AsyncLearningClient",
    "LearningClient",
    "LearningClientError",
    "ObserveResult",
    "PhaseResult",
    "Reply",
    "RewardRequest",
    "RewardResult",
    "RunReport",
    "SelectRequest",
    "Selection",
    "Summary",
    "ToolCall",
    "Usage",
    "json_names",
    "report_for",
    "tool_calls_of",
]
