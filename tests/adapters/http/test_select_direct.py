"""`POST select` straight on ASGI (`Api.fast_select`): the bytes, headers and errors of the
Starlette route, the draws of `LearningService.select` for the same seed, and bodies seen
before answered without being read again."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import learning_bot.adapters.http.fast_select as fast_select_module
from learning_bot.adapters.http import HttpSettings, create_app
from learning_bot.adapters.http.app import DirectRoutes
from learning_bot.adapters.http.fast_select import SelectBodies, selection_bytes
from learning_bot.adapters.http.responses import ENCODER
from learning_bot.bot.bus import BusSettings, CommandBus, LearnerServices
from learning_bot.bot.shapes import selection_json
from learning_bot.engine import LearningConfig, Phase
from learning_bot.engine.inventory import ArmSet
from learning_bot.engine.report_json import report_from_json, report_to_json
from learning_bot.engine.selection import Selection
from learning_bot.engine.service import LearningService
from learning_bot.research.simulation import make_workload
from learning_bot.storage import SqlStore
from learning_bot.storage.command_log import SqlCommandLog

from .conftest import BASE

TOKEN = "test-token-0123456789abcdef"
CONFIG = LearningConfig(phase=Phase.ACTIVE, token_budget=2000)
WORKLOAD = make_workload(30, seed=11)
ARMS = [
    {"armId": a.id, "tokenCost": a.token_cost, "label": a.label, "content": a.content}
    for a in WORKLOAD.arms
]


def warm_reports() -> list[Any]:
    import numpy as np

    rng = np.random.default_rng(3)
    ids = [a.id for a in WORKLOAD.arms]
    return [
        report_from_json(
            report_to_json(WORKLOAD.report(f"w{i}", ids, WORKLOAD.draw_usage(i, rng)[1], False))
        )
        for i in range(60)
    ]


def seeded_bus(path: Path, seed: int = 7) -> tuple[CommandBus, SqlStore]:
    """A bus whose learners draw from `seed`, over a SQLite file warmed with the same runs."""
    store = SqlStore(f"sqlite:///{path}")

    def make(learner: str) -> LearningService:
        return LearningService(store, CONFIG, seed, learner=learner, cache_ttl=3600.0)

    services = LearnerServices(make, CONFIG)
    services.get("default").observe_many(warm_reports())
    return CommandBus(services, SqlCommandLog(store.engine), BusSettings()), store


def call(
    app: Any,
    body: bytes | list[bytes],
    headers: dict[str, str] | None = None,
    *,
    path: str = BASE + "/select",
    query: bytes = b"",
) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """One request straight to an ASGI application: (status, headers, body)."""
    chunks = body if isinstance(body, list) else [body]
    given = {"host": "127.0.0.1:8787", "content-type": "application/json", **(headers or {})}
    if not isinstance(body, list):
        given.setdefault("content-length", str(len(body)))
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": query,
        "headers": [(k.lower().encode(), v.encode()) for k, v in given.items()],
        "server": ("127.0.0.1", 8787),
        "client": ("127.0.0.1", 50000),
    }
    messages = [
        {"type": "http.request", "body": c, "more_body": i < len(chunks) - 1}
        for i, c in enumerate(chunks)
    ]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    start, *rest = sent
    return start["status"], list(start["headers"]), b"".join(m.get("body", b"") for m in rest)


@pytest.fixture
def bus(tmp_path: Path) -> Iterator[CommandBus]:
    made, store = seeded_bus(tmp_path / "a.sqlite")
    yield made
    store.close()


def test_the_answers_are_the_bytes_and_draws_of_select_for_the_same_seed(
    tmp_path: Path, bus: CommandBus
) -> None:
    """Twenty selects of the same body (the first read, the others found again) answer what
    `LearningService.select` with the same seed answers, encoded as the route encodes it."""
    reference, store = seeded_bus(tmp_path / "b.sqlite")
    service = reference.services.get("default")
    app = create_app(bus, HttpSettings())
    body = json.dumps({"arms": ARMS}).encode()
    try:
        seen = set()
        for _ in range(20):
            status, headers, answer = call(app, body)
            expected = ENCODER.encode(selection_json(service.select(ArmSet.from_json(ARMS))))
            assert status == 200
            assert answer == expected.encode("utf-8")
            assert headers == [
                (b"content-length", str(len(answer)).encode()),
                (b"content-type", b"application/json"),
            ]
            seen.add(answer)
        assert len(seen) > 1  # the draws differ from request to request
        assert any(json.loads(a)["guidance"] for a in seen)
    finally:
        store.close()


def test_a_body_seen_before_is_not_decoded_again(
    bus: CommandBus, monkeypatch: pytest.MonkeyPatch
) -> None:
    decoded: list[bytes] = []
    decode = fast_select_module.decode_body

    def counting(raw: bytes, route: str | None = None) -> Any:
        decoded.append(raw)
        return decode(raw, route)

    monkeypatch.setattr(fast_select_module, "decode_body", counting)
    app = create_app(bus, HttpSettings())
    body = json.dumps({"arms": ARMS}).encode()
    other = json.dumps({"arms": ARMS[:10], "context": {"channel": "c"}}).encode()
    for raw in (body, body, other, body, other):
        assert call(app, raw)[0] == 200
    assert decoded == [body, other]
    # Bodies refused are read again each time (only valid ones are kept).
    bad = json.dumps({"arms": ARMS, "context": "x"}).encode()
    for _ in range(2):
        assert call(app, bad)[0] == 400
    assert decoded == [body, other, bad, bad]


GOOD = json.dumps({"arms": ARMS[:8]}).encode()
REQUESTS: list[tuple[bytes | list[bytes], dict[str, str], bytes]] = [
    (GOOD, {}, b""),
    (GOOD, {"content-type": "application/json; charset=utf-8"}, b""),
    (GOOD, {"referer": "http://127.0.0.1:8787/x"}, b""),
    (GOOD, {}, b"learner=other"),
    (json.dumps({"arms": ARMS[:8]}, ensure_ascii=False).encode("utf-16"), {}, b""),
    ([GOOD[:100], GOOD[100:]], {}, b""),
    (b"{not json", {}, b""),
    (b"", {}, b""),
    (b"[1, 2]", {}, b""),
    (b'{"arms": []}', {}, b""),
    (b'{"arms": [{"armId": "nope", "tokenCost": 1}]}', {}, b""),
    (b'{"arms": [{"armId": "tool:a:b", "tokenCost": true}]}', {}, b""),
    (b'{"arms": [{"armId": "tool:a:b", "tokenCost": 1e999}]}', {}, b""),
    (b'{"arms": [{"armId": "tool:a:b", "tokenCost": NaN}]}', {}, b""),
    (json.dumps({"arms": ARMS[:2] * 2}).encode(), {}, b""),
    (json.dumps({"arms": ARMS[:2] * 2, "context": 1}).encode(), {}, b""),
    (json.dumps({"arms": ARMS[:2], "context": {"x": [[[[[]]]]] * 3}}).encode(), {}, b""),
    (GOOD, {"content-type": "text/plain"}, b""),
    (GOOD, {"host": "rebound.example:8787"}, b""),
    (GOOD, {"origin": "http://elsewhere.example"}, b""),
    (GOOD, {"content-length": "12x"}, b""),
    (GOOD, {"content-length": "99999999"}, b""),
    (json.dumps({"arms": ARMS}).encode(), {}, b""),
    ([b'{"arms": [', b" " * 5000, b"]}"], {}, b""),
    (GOOD, {}, b"learner=no%20spaces"),
]


@pytest.mark.parametrize(("body", "headers", "query"), REQUESTS)
@pytest.mark.parametrize("token", [None, TOKEN])
def test_the_direct_route_answers_as_the_starlette_route(
    tmp_path: Path,
    body: bytes | list[bytes],
    headers: dict[str, str],
    query: bytes,
    token: str | None,
) -> None:
    """The same status, headers and body (with and without a token, good and bad requests)
    as the Starlette route `create_app` serves behind `DirectRoutes`, over a learner drawing
    from the same seed."""
    limits = HttpSettings(max_body_bytes=4096, allowed_hosts=("127.0.0.1",), api_token=token)
    answers = []
    for direct in (True, False):
        made, store = seeded_bus(tmp_path / f"{direct}.sqlite")
        try:
            app = create_app(made, limits)
            assert isinstance(app, DirectRoutes)
            served = app if direct else app.app
            sent = {**headers, "authorization": f"Bearer {token}"} if token else headers
            for _ in range(2):  # read, then (when valid) found again
                answers.append(call(served, body, sent, query=query))
            if token:
                answers.append(call(served, body, headers, query=query))  # no token: 401
        finally:
            store.close()
    half = len(answers) // 2
    assert answers[:half] == answers[half:]
    assert answers[0][0] in (200, 400, 401, 403, 413, 415)


def test_unknown_paths_and_other_methods_still_go_through_starlette(bus: CommandBus) -> None:
    app = create_app(bus, HttpSettings())
    status, _, body = call(app, b"{}", path=BASE + "/selectx")
    assert status == 404 and json.loads(body) == {"error": "Unknown learning API route"}


def test_kept_bodies_are_bounded() -> None:
    sets = [ArmSet.from_json(ARMS[: k + 1]) for k in range(8)]
    bodies = SelectBodies(size=3, max_bytes=100)
    for k in range(5):
        bodies.keep(b"%d" % k * 10, sets[k], None)
    assert bodies.find(b"0" * 10) is None and bodies.find(b"1" * 10) is None
    kept = bodies.find(b"2" * 10)
    assert kept is not None and kept.arms is sets[2]
    assert kept.names == {a: json.dumps(a, ensure_ascii=False) for a in sets[2].ids}
    bodies.keep(b"x" * 101, sets[5], None)  # larger than everything kept together: not kept
    assert bodies.find(b"x" * 101) is None
    # The newest is kept, then the most recently used while they fit (2 was found last).
    bodies.keep(b"y" * 80, sets[6], None)
    assert bodies.find(b"3" * 10) is None
    assert all(bodies.find(raw) is not None for raw in (b"y" * 80, b"2" * 10, b"4" * 10))


def test_one_body_is_kept_per_inventory() -> None:
    """A runtime that sends a new context each time leaves one body to compare, not eight."""
    arms, other = ArmSet.from_json(ARMS[:3]), ArmSet.from_json(ARMS[:4])
    bodies = SelectBodies()
    bodies.keep(b'{"arms":[],"context":{"n":0}}', arms, {"n": 0})
    bodies.keep(b'{"arms":[1],"context":{"n":0}}', other, {"n": 0})
    bodies.keep(b'{"arms":[],"context":{"n":1}}', arms, {"n": 1})
    assert bodies.find(b'{"arms":[],"context":{"n":0}}') is None
    kept = bodies.find(b'{"arms":[],"context":{"n":1}}')
    assert kept is not None and kept.context == {"n": 1}
    assert bodies.find(b'{"arms":[1],"context":{"n":0}}') is not None


TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)


@settings(max_examples=200, deadline=None)
@given(
    ids=st.lists(TEXT, min_size=1, max_size=8, unique=True),
    split=st.integers(0, 8),
    baseline=st.booleans(),
    budget=st.integers(-(2**63), 2**63 - 1),
    used=st.integers(0, 2**40),
    fallback=st.none() | TEXT,
    known=st.booleans(),
)
def test_selection_bytes_are_the_encoders(
    ids: list[str],
    split: int,
    baseline: bool,
    budget: int,
    used: int,
    fallback: str | None,
    known: bool,
) -> None:
    selection = Selection(ids[:split], ids[split:], baseline, budget, used, used > budget, fallback)
    names = {i: json.dumps(i, ensure_ascii=False) for i in ids[: len(ids) if known else -1]}
    expected = ENCODER.encode(selection_json(selection)).encode("utf-8")
    assert selection_bytes(selection, names) == expected
    assert selection_bytes(selection, None) == expected


def test_selection_bytes_of_other_kinds_go_through_the_encoder() -> None:
    import numpy as np

    names = {"tool:fs:Read": '"tool:fs:Read"'}
    odd = Selection(["tool:fs:Read"], [], False, np.int64(5), 1, False)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        selection_bytes(odd, names)
    flag = Selection(["tool:fs:Read"], [], 1, 5, 1, False)  # type: ignore[arg-type]
    assert selection_bytes(flag, names) == ENCODER.encode(selection_json(flag)).encode()
    assert b'"isBaseline":1' in selection_bytes(flag, names)
