"""Prometheus metrics of one application, in a registry of its own: requests and latency by
route template (counted by `RequestLog`), and the default learner's spool and posterior cache,
read at scrape time."""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections.abc import Callable, Iterator
from itertools import accumulate

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from learning_bot.engine.service import LearningService

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

BUCKETS = Histogram.DEFAULT_BUCKETS
"""The latency histogram's upper bounds in seconds (prometheus_client's defaults, +Inf last)."""
_LE = tuple("+Inf" if bound == float("inf") else repr(bound) for bound in BUCKETS)


class _Latency:
    __slots__ = ("buckets", "total")

    def __init__(self) -> None:
        self.buckets = [0] * len(BUCKETS)
        self.total = 0.0


class RequestCounts:
    """Requests by (route template, method, status), latency by route, and the answered
    selects and observes, as counts."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests: dict[tuple[str, str, int], int] = {}
        self.latency: dict[str, _Latency] = {}
        self.selects = 0
        self.observes = 0

    def record(self, route: str, method: str, status: int, seconds: float) -> None:
        key = (route, method, status)
        with self._lock:
            self.requests[key] = self.requests.get(key, 0) + 1
            latency = self.latency.get(route)
            if latency is None:
                latency = self.latency[route] = _Latency()
            latency.buckets[bisect_left(BUCKETS, seconds)] += 1  # le: a bound counts in
            latency.total += seconds
            if 200 <= status < 300 and method == "POST":
                if route.endswith("/select"):
                    self.selects += 1
                elif route.endswith("/observe"):
                    self.observes += 1

    def families(self) -> list[Metric]:
        """The counts as the metric families of a labelled Counter, a Histogram and two
        Counters would expose them (without their `_created` samples)."""
        requests = CounterMetricFamily(
            "learning_bot_http_requests",
            "HTTP requests by route template, method and status",
            labels=["route", "method", "status"],
        )
        latency = HistogramMetricFamily(
            "learning_bot_http_request_duration_seconds",
            "HTTP request latency by route template",
            labels=["route"],
        )
        with self._lock:
            for (route, method, status), n in self.requests.items():
                requests.add_metric([route, method, str(status)], n)
            for route, seen in self.latency.items():
                cumulative = accumulate(seen.buckets)
                latency.add_metric([route], list(zip(_LE, cumulative, strict=True)), seen.total)
            selects, observes = self.selects, self.observes
        return [
            requests,
            latency,
            CounterMetricFamily("learning_bot_selects", "Selections answered (2xx)", selects),
            CounterMetricFamily(
                "learning_bot_observes", "Observe requests accepted (2xx)", observes
            ),
        ]


class RequestCollector(Collector):
    def __init__(self, counts: RequestCounts) -> None:
        self.counts = counts

    def collect(self) -> Iterator[Metric]:
        yield from self.counts.families()


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
    """The application's registry and the request series `RequestLog` feeds.

    The request series are plain counts kept here and turned into metric families when
    scraped (`RequestCollector`): one lock and a few additions a request, where
    prometheus_client's labelled Counter and Histogram take a lock per value and walk the
    buckets in Python (a fair share of a small select's time)."""

    def __init__(self, service: Callable[[], LearningService]) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = RequestCounts()
        self.registry.register(RequestCollector(self.requests))
        self.registry.register(ServiceCollector(service))

    def record(self, route: str, method: str, status: int, seconds: float) -> None:
        """Count one finished request (a select or observe by its route's last segment)."""
        self.requests.record(route, method, status, seconds)

    def exposition(self) -> bytes:
        """What `GET /metrics` answers: the text exposition format."""
        return generate_latest(self.registry)
