"""Usage's cache write: read from either key style, zero when a run does not report it, and
carried through the record's JSON unchanged."""

from __future__ import annotations

from typing import Any

import pytest

from learning_bot.engine.config import LearningConfig, Phase
from learning_bot.engine.errors import InvalidInput
from learning_bot.engine.observation import rewards_for_run
from learning_bot.engine.records import (
    record_from_json,
    record_from_report,
    record_to_json,
)
from learning_bot.engine.report_json import report_from_json


def body(usage: dict[str, Any]) -> dict[str, Any]:
    return {"traceId": "t1", "arms": [{"armId": "tool:fs:Read", "tokenCost": 10}], "usage": usage}


@pytest.mark.parametrize("key", ["cacheWrite", "cache_write"])
def test_a_report_reads_the_cache_write_in_either_key_style(key: str) -> None:
    usage = report_from_json(body({"input": 10, "cacheRead": 200, key: 300})).usage
    assert (usage.input, usage.cache_read, usage.cache_write) == (10, 200, 300)
    assert usage.total == 510


def test_a_report_without_a_cache_write_is_valid_and_writes_nothing() -> None:
    usage = report_from_json(body({"input": 10, "output": 5, "total": 15})).usage
    assert usage.cache_write == 0
    assert usage.total == 15


def test_a_negative_cache_write_is_refused_by_name() -> None:
    with pytest.raises(InvalidInput, match="cache_write"):
        report_from_json(body({"cacheWrite": -1}))


def test_the_record_json_keeps_the_cache_write() -> None:
    report = report_from_json(body({"input": 10, "cacheRead": 200, "cacheWrite": 300}))
    config = LearningConfig()
    record = record_from_report(report, rewards_for_run(report, config), Phase.PASSIVE, None)
    data = record_to_json(record)
    assert data["usage"]["cacheWrite"] == 300
    assert record_from_json(data).usage == report.usage


def test_a_stored_record_from_before_the_cache_write_reads_zero() -> None:
    report = report_from_json(body({"input": 10}))
    outcome = rewards_for_run(report, LearningConfig())
    record = record_from_report(report, outcome, Phase.PASSIVE, None)
    data = record_to_json(record)
    del data["usage"]["cacheWrite"]
    assert record_from_json(data).usage.cache_write == 0
    data["usage"] = [10, 0, 7, 17]  # the list form: input, output, cacheRead, total
    assert record_from_json(data).usage.cache_read == 7
    data["usage"] = [10, 0, 7, 20, 3]  # with the cache write last
    assert record_from_json(data).usage.cache_write == 3
