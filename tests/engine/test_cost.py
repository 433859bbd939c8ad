"""Token prices as ratios to the input price, by provider and model, and the prompt's cost."""

from __future__ import annotations

from typing import Any

import pytest

from learning_bot.engine.cost import (
    ANTHROPIC,
    DEFAULT_PRICES,
    PriceTable,
    TokenPrices,
    output_cost,
    prompt_cost,
)
from learning_bot.engine.errors import InvalidConfig
from learning_bot.engine.usage import Usage


def test_prompt_cost_prices_reads_and_writes_at_their_ratios() -> None:
    usage = Usage(input=100, output=50, cache_read=10_000, cache_write=2_000)
    # 100 * 1 + 10,000 * 0.1 + 2,000 * 1.25 = 100 + 1,000 + 2,500
    assert prompt_cost(usage, ANTHROPIC) == pytest.approx(3_600.0)
    assert output_cost(usage, ANTHROPIC) == pytest.approx(250.0)
    assert prompt_cost(Usage(input=7), TokenPrices(0.0, 0.0, 0.0)) == 7


def test_a_run_without_cache_fields_costs_its_input() -> None:
    assert prompt_cost(Usage(input=1_234, output=99), ANTHROPIC) == 1_234


@pytest.mark.parametrize(
    ("provider", "model", "expected"),
    [
        ("anthropic", "claude-sonnet-4-5", (0.1, 1.25, 5.0)),
        ("Anthropic", "CLAUDE-OPUS-4-1", (0.1, 1.25, 5.0)),
        ("openai", "gpt-4o-mini", (0.5, 1.0, 4.0)),
        ("openai", "gpt-4.1-nano", (0.25, 1.0, 4.0)),
        ("openai", "gpt-5-mini", (0.1, 1.0, 8.0)),
        ("openai", "some-future-model", (0.5, 1.0, 4.0)),
        ("bedrock", "anthropic.claude-3-5-sonnet-20241022-v2:0", (0.1, 1.25, 5.0)),
        ("bedrock", "us.amazon.nova-pro-v1:0", (0.25, 1.0, 4.0)),
        ("amazon-bedrock", "eu.anthropic.claude-sonnet-4", (0.1, 1.25, 5.0)),
        ("somewhere", "model-x", (0.1, 1.25, 5.0)),
        ("", "", (0.1, 1.25, 5.0)),
    ],
)
def test_default_prices_by_provider_and_model_prefix(
    provider: str, model: str, expected: tuple[float, float, float]
) -> None:
    prices = PriceTable().prices_for(provider, model)
    assert (prices.cache_read, prices.cache_write, prices.output) == expected


def test_configured_entries_override_and_inherit() -> None:
    table = PriceTable.from_json(
        {
            "default": {"cacheRead": 0.3},
            "models": [
                {"provider": "anthropic", "cacheWrite": 2.0},
                {"provider": "openai", "model": "gpt-4o", "cacheRead": 0.4},
                {"provider": "local", "model": "llama", "cacheRead": 0, "output": 0},
            ],
        }
    )
    # a one-hour cache: writes at 2x, the rest as built in
    assert table.prices_for("anthropic", "claude-haiku-4-5") == TokenPrices(0.1, 2.0, 5.0)
    assert table.prices_for("openai", "gpt-4o-2024-08-06") == TokenPrices(0.4, 1.0, 4.0)
    assert table.prices_for("openai", "gpt-5") == TokenPrices(0.1, 1.0, 8.0)
    # a new provider's entry inherits the (configured) default's ratios it does not give
    assert table.prices_for("local", "llama-3") == TokenPrices(0.0, 1.25, 0.0)
    assert table.prices_for("local", "qwen") == TokenPrices(0.3, 1.25, 5.0)
    assert PriceTable.from_json({}) == PriceTable()
    assert PriceTable().default == DEFAULT_PRICES


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ([], "prices"),
        ({"models": {}}, "prices.models"),
        ({"currency": "usd"}, "prices.currency"),
        ({"default": {"cacheRead": -0.1}}, "prices.default.cacheRead"),
        ({"default": {"cacheRead": "cheap"}}, "prices.default.cacheRead"),
        ({"default": {"output": float("nan")}}, "prices.default.output"),
        ({"default": {"cache_read": 0.1}}, "prices.default.cache_read"),
        ({"models": [5]}, "prices.models[0]"),
        ({"models": [{"model": "gpt"}]}, "prices.models[0].provider"),
        ({"models": [{"provider": "x", "cacheWrite": 1e9}]}, "prices.models[0].cacheWrite"),
        ({"models": [{"provider": "x", "model": 3}]}, "prices.models[0].model"),
        ({"models": [{"provider": "x", "ttl": 3600}]}, "prices.models[0].ttl"),
        ({"models": [{"provider": "x\x00"}]}, "prices.models[0].provider"),
    ],
)
def test_bad_price_settings_name_the_field(data: Any, field: str) -> None:
    with pytest.raises(InvalidConfig) as caught:
        PriceTable.from_json(data)
    assert caught.value.field == field


def test_token_prices_check_their_ratios() -> None:
    with pytest.raises(InvalidConfig, match="cache_write"):
        TokenPrices(cache_write=-1.0)
    with pytest.raises(InvalidConfig, match="output"):
        TokenPrices(output=True)
