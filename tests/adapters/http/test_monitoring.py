"""Operators' routes: Prometheus metrics at /metrics, /livez and /readyz, and the access log
(plain, or one JSON object per line)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from learning_bot.adapters.http.logs import JsonFormatter, ServerHandler, configure_logging

from .conftest import Live, start_server, stop_server

ARM = {"armId": "tool:fs:Read", "tokenCost": 10}
SELECT = "/__openclaw__/api/learning/select"
OBSERVE = "/__openclaw__/api/learning/observe"


def scrape(live: Live) -> dict[str, Any]:
    """family name -> {(sample name, sorted labels): value}."""
    text = httpx.get(live.url + "/metrics").text
    return {
        family.name: {(s.name, tuple(sorted(s.labels.items()))): s.value for s in family.samples}
        for family in text_string_to_metric_families(text)
    }


def requests_of(families: dict[str, Any], route: str, status: str = "200") -> float:
    samples = families.get("learning_bot_http_requests", {})
    return sum(
        value
        for (name, labels), value in samples.items()
        if name == "learning_bot_http_requests_total"
        and dict(labels).get("route") == route
        and dict(labels).get("status") == status
    )


def test_metrics_count_requests_by_route_and_read_the_spool_and_cache(
    live: Live, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "learning_bot.access")
    before = scrape(live)
    with live.client() as c:
        observed = c.post(
            "/observe",
            json={"traceId": "m-1", "arms": [ARM], "toolCalls": [{"name": "Read"}]},
        )
        assert observed.status_code == 200
        # a select reads the posteriors the observe's new arm made stale
        assert c.post("/select", json={"arms": [ARM]}).status_code == 200
        assert c.get("/traces/does-not-exist").status_code == 404
    after = scrape(live)
    assert requests_of(after, SELECT) == requests_of(before, SELECT) + 1
    assert requests_of(after, OBSERVE) == requests_of(before, OBSERVE) + 1
    # a path no route matches is one series, not one per path
    assert requests_of(after, "unmatched", "404") >= 1
    assert not any("does-not-exist" in str(k) for k in after["learning_bot_http_requests"])
    for counter in ("learning_bot_selects", "learning_bot_observes"):
        total = f"{counter}_total"
        assert after[counter][(total, ())] == before[counter][(total, ())] + 1
    latency = after["learning_bot_http_request_duration_seconds"]
    assert latency[("learning_bot_http_request_duration_seconds_count", (("route", SELECT),))]
    assert after["learning_bot_spool_pending_runs"]
    assert after["learning_bot_spool_dead_letters"]
    (age,) = after["learning_bot_posterior_cache_age_seconds"].values()
    assert age >= 0
    lines = [r for r in caplog.records if r.name == "learning_bot.access"]
    assert any(r.__dict__.get("path") == SELECT and r.__dict__["status"] == 200 for r in lines)


def test_livez_and_readyz_answer_without_reloading_posteriors(
    live: Live, monkeypatch: pytest.MonkeyPatch
) -> None:
    service = live.app.bus.services.get("default")

    def no_reload(*_: Any) -> Any:
        raise AssertionError("readyz must not reload posteriors")

    monkeypatch.setattr(service.store, "load_arms", no_reload)
    livez = httpx.get(live.url + "/livez")
    assert livez.status_code == 200 and livez.json() == {"status": "ok"}
    readyz = httpx.get(live.url + "/readyz")
    assert readyz.status_code == 200, readyz.text
    assert readyz.json()["status"] == "ready"


def test_readyz_is_503_with_the_reason_while_the_database_is_gone(tmp_path: Path) -> None:
    path = tmp_path / "served.sqlite"
    live = start_server(f"sqlite:///{path}", token=None)
    try:
        assert httpx.get(live.url + "/readyz").status_code == 200
        path.rename(tmp_path / "aside.sqlite")
        readyz = httpx.get(live.url + "/readyz")
        assert readyz.status_code == 503
        assert readyz.json()["status"] == "unavailable" and readyz.json()["reason"]
        assert httpx.get(live.url + "/livez").status_code == 200
        (tmp_path / "aside.sqlite").rename(path)
        assert httpx.get(live.url + "/readyz").status_code == 200
    finally:
        stop_server(live)


def test_json_log_lines_carry_the_access_fields() -> None:
    record = logging.LogRecord(
        "learning_bot.access", logging.INFO, __file__, 1, "%s %s %d", ("GET", "/livez", 200), None
    )
    record.__dict__.update(method="GET", path="/livez", status=200, ms=0.42)
    line = json.loads(JsonFormatter().format(record))
    assert line["level"] == "INFO" and line["logger"] == "learning_bot.access"
    assert line["message"] == "GET /livez 200"
    fields = (line["method"], line["path"], line["status"], line["ms"])
    assert fields == ("GET", "/livez", 200, 0.42)
    assert line["time"].endswith("+00:00")


def test_json_format_is_the_root_handlers_and_installing_twice_keeps_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", list(root.handlers))
    monkeypatch.setattr(root, "level", root.level)
    monkeypatch.setenv("LEARNING_BOT_LOG_FORMAT", "json")
    configure_logging("info")
    configure_logging("info")
    ours = [h for h in root.handlers if isinstance(h, ServerHandler)]
    assert len(ours) == 1 and isinstance(ours[0].formatter, JsonFormatter)
    assert root.level == logging.INFO


def test_request_counts_expose_what_prometheus_clients_counter_and_histogram_would() -> None:
    """The request series are kept as plain counts; scraped, they read as a labelled Counter
    and Histogram fed the same requests do (a value on a bucket's bound counts in it)."""
    from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

    from learning_bot.adapters.http.metrics import BUCKETS, HttpMetrics

    def unavailable() -> Any:
        raise RuntimeError("no service")

    ours = HttpMetrics(unavailable)
    registry = CollectorRegistry()
    requests = Counter("learning_bot_http_requests", "r", ["route", "method", "status"],
                       registry=registry)  # fmt: skip
    latency = Histogram("learning_bot_http_request_duration_seconds", "l", ["route"],
                        registry=registry)  # fmt: skip
    selects = Counter("learning_bot_selects", "s", registry=registry)
    observes = Counter("learning_bot_observes", "o", registry=registry)
    seen = [
        (SELECT, "POST", 200, 0.0004),
        (SELECT, "POST", 200, BUCKETS[0]),
        (SELECT, "POST", 422, 0.3),
        (OBSERVE, "POST", 200, BUCKETS[-2]),
        (OBSERVE, "POST", 503, 12.0),
        ("unmatched", "GET", 404, 0.02),
    ]
    for route, method, status, seconds in seen:
        ours.record(route, method, status, seconds)
        requests.labels(route, method, str(status)).inc()
        latency.labels(route).observe(seconds)
        if status == 200:
            (selects if route == SELECT else observes).inc()

    def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        return {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
            if not s.name.endswith("_created")
        }

    assert samples(ours.exposition().decode()) == samples(generate_latest(registry).decode())
