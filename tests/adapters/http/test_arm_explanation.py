"""`GET arms/{armId}`: one arm's posterior with what its usefulness depends on and how often it
was deferred, then loaded, in the words `status arm` uses, after runs observed over HTTP with a
request context; any arm id round-trips, and the read writes nothing."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from .conftest import Live, start_server, stop_server
from .test_api import conforms

FORECAST = "tool:t:forecast"
DEFERRED = "tool:t:Tool04"
HOSTILE = "tool:x:<img src=x onerror=alert(1)>"
SLASHED = "file:ws:docs/guide.md"
ARMS = [
    {"armId": FORECAST, "tokenCost": 100, "description": "weather rain forecast"},
    *({"armId": f"tool:t:Tool{i:02d}", "tokenCost": 100} for i in range(5)),
    {"armId": HOSTILE, "tokenCost": 50},
    {"armId": SLASHED, "tokenCost": 50},
]


@pytest.fixture(scope="module")
def explained(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Live, Path]]:
    path = tmp_path_factory.mktemp("explain") / "explain.sqlite"
    live = start_server(f"sqlite:///{path}")
    with live.client() as c:
        # the inventory's words become nameable once a select has read them
        assert c.post("/select", json={"arms": ARMS, "context": {"message": "rain"}}).is_success
        for i in range(12):
            rain = i % 2 == 0
            report = {
                "traceId": f"e{i}",
                "arms": [{**a, "included": a["armId"] != DEFERRED} for a in ARMS],
                "toolCalls": [{"name": "forecast" if rain else "Tool00"}],
                "context": {"message": "rain" if rain else "", "loaded": []},
            }
            r = c.post("/observe", json=report)
            assert r.status_code == 200 and r.json()["recorded"], r.text
    yield live, path
    stop_server(live)


def arm_url(arm_id: str) -> str:
    return "/arms/" + quote(arm_id, safe="")


def rows(path: Path) -> list[str]:
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return list(conn.iterdump())


def status_fields(live: Live, arm_id: str) -> list[tuple[str, str]]:
    """The label/value lines `status arm` shows (through the command route)."""
    with live.client() as c:
        reply = c.post("/command", json={"text": f"status arm {arm_id}"}).json()
    fields = [b for b in reply["blocks"] if b.get("type") == "fields"]
    assert fields, reply
    return [(k, v) for k, v in fields[0]["items"]]


def test_the_arm_view_explains_what_its_usefulness_depends_on(
    explained: tuple[Live, Path],
) -> None:
    live, _ = explained
    with live.client(None) as c:
        got: dict[str, Any] = c.get(arm_url(FORECAST)).json()
        posteriors = {p["armId"]: p for p in c.get("/posteriors").json()}
    conforms("ArmDetail", got)
    assert {k: v for k, v in got.items() if k != "explanation"} == posteriors[FORECAST]
    explanation = got["explanation"]
    rain = next(
        d for d in explanation["dependsOn"] if d["feature"] == "the message mentions 'rain'"
    )
    assert rain["rateWith"] == pytest.approx(1.0)
    # the default policy forgets a little at each run: the other runs' rate is near 0
    assert rain["rateWithout"] < 0.1
    assert rain["runsWith"] == pytest.approx(6, abs=0.5)
    assert rain["runsWith"] + rain["runsWithout"] == pytest.approx(got["pulls"])
    assert rain["text"] == (
        "used in 100% of 6 runs where the message mentions 'rain'; "
        f"{rain['rateWithout']:.0%} otherwise"
    )
    assert (explanation["deferred"], explanation["loaded"]) == (0, 0)
    assert explanation["deferredText"] is None
    # the same lines `status arm` shows, on every surface
    shown = [v for k, v in status_fields(live, FORECAST) if k == "Depends on"]
    assert shown == [d["text"] for d in explanation["dependsOn"]]


def test_deferred_then_loaded_is_counted(explained: tuple[Live, Path]) -> None:
    live, _ = explained
    with live.client(None) as c:
        got = c.get(arm_url(DEFERRED)).json()
    conforms("ArmDetail", got)
    explanation = got["explanation"]
    assert (explanation["deferred"], explanation["loaded"]) == (12, 0)
    assert explanation["deferredText"] == "0 of 12 runs (0%)"
    assert dict(status_fields(live, DEFERRED))["Deferred, then loaded"] == "0 of 12 runs (0%)"


@pytest.mark.parametrize("arm_id", [HOSTILE, SLASHED])
def test_any_arm_id_round_trips(explained: tuple[Live, Path], arm_id: str) -> None:
    live, _ = explained
    with live.client(None) as c:
        got = c.get(arm_url(arm_id)).json()
    conforms("ArmDetail", got)
    assert got["armId"] == arm_id


def test_unknown_arms_and_learners_are_refused_and_reads_write_nothing(
    explained: tuple[Live, Path],
) -> None:
    live, path = explained
    before = rows(path)
    with live.client(None) as c:
        for arm_id in (FORECAST, DEFERRED, HOSTILE, "forecast"):
            assert c.get(arm_url(arm_id)).status_code == 200
        unknown = c.get(arm_url("tool:t:nothing-like-it"))
        assert unknown.status_code == 404 and "unknown arm" in unknown.json()["error"]
        nobody = c.get(arm_url(FORECAST), params={"learner": "nobody"})
        assert nobody.status_code == 404
        empty = c.get("/arms/")
        assert empty.status_code == 400 and "empty" in empty.json()["error"]
        assert "nobody" not in c.get("/learners").json()["learners"]
    assert rows(path) == before
