"""Prometheus metrics of one application, in a registry of its own: requests and latency by
route template (counted by `RequestLog`), and the default learner's spool and posterior cache,
read at scrape time."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from learning_bot.engine.service import LearningService

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

_Series = tuple[Counter, Histogram, Counter | None]
"""A request's count, its latency and, for an answered select or observe, that count."""


class ServiceCollector(Collector):
    """Spool depth, dead letters and the posterior cache's age of the default learner, read
    when scraped (nothing is reported for what cannot be read)."""

    def __init__(self, service: Callable[[], LearningService]) -> None:
        self.service = service

    def collect(self) -> Iterator[Metric]:
        try:
            service = self.service()
        except Exception:
            return
        spool = service.spool_health()
        if spool is not None:
            yield GaugeMetricFamily(
                "learning_bot_spool_pending_runs",
                "Runs waiting in the local spool for storage to answer",
                value=spool["pending"],
            )
            yield GaugeMetricFamily(
                "learning_bot_spool_bytes", "Size of the local spool in bytes", value=spool["bytes"]
            )
            yield GaugeMetricFamily(
                "learning_bot_spool_full", "1 when the spool is full", value=int(spool["full"])
            )
            yield GaugeMetricFamily(
                "learning_bot_spool_dead_letters",
                "Spooled runs storage refused (kept in the dead-letter file)",
                value=spool["deadLetters"],
            )
        age = service.cache_age()
        if age is not None:
            yield GaugeMetricFamily(
                "learning_bot_posterior_cache_age_seconds",
                "Seconds since the cached posteriors were read or checked against storage",
                value=age,
            )


class HttpMetrics:
    """The application's registry and the series the request log feeds."""

    def __init__(self, service: Callable[[], LearningService]) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "learning_bot_http_requests",
            "HTTP requests by route template, method and status",
            ["route", "method", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "learning_bot_http_request_duration_seconds",
            "HTTP request latency by route template",
            ["route"],
            registry=self.registry,
        )
        self.selects = Counter(
            "learning_bot_selects", "Selections answered (2xx)", registry=self.registry
        )
        self.observes = Counter(
            "learning_bot_observes", "Observe requests accepted (2xx)", registry=self.registry
        )
        self.registry.register(ServiceCollector(service))
        self._series: dict[tuple[str, str, int], _Series] = {}

    def record(self, route: str, method: str, status: int, seconds: float) -> None:
        """Count one finished request (a select or observe by its route's last segment)."""
        key = (route, method, status)
        series = self._series.get(key)
        if series is None:
            series = self._series[key] = self._labelled(route, method, status)
        requests, latency, answered = series
        requests.inc()
        latency.observe(seconds)
        if answered is not None:
            answered.inc()

    def _labelled(self, route: str, method: str, status: int) -> _Series:
        """The series one (route, method, status) feeds, looked up once: `labels` takes a
        lock and builds its key on every call."""
        answered = None
        if 200 <= status < 300 and method == "POST":
            if route.endswith("/select"):
                answered = self.selects
            elif route.endswith("/observe"):
                answered = self.observes
        return (
            self.requests.labels(route, method, str(status)),
            self.latency.labels(route),
            answered,
        )

    def exposition(self) -> bytes:
        """What `GET /metrics` answers: the text exposition format."""
        return generate_latest(self.registry)
