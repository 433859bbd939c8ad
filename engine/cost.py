"""What a run's tokens cost, in units of its model's uncached input-token price (docs/sessions.md).

Providers cache the prompt prefix: a cache read costs a fraction of an input token, a cache
write (Anthropic, Bedrock's Claude models) a little more than one. Prices are kept as ratios to
the input price, per provider and model, so runs of different models compare and the simulator
(engine.prompt_cache) and real runs are priced by the same `prompt_cost`.

Defaults, from the providers' price lists (each line says when it was read):

- Anthropic, Claude models: cache read 0.1, 5-minute cache write 1.25 (a 1-hour write is
  2.0: `ONE_HOUR_CACHE_WRITE`), output 5 (Anthropic pricing, "Prompt caching", read 2025-12).
  Claude Opus 5.5 and Sonnet 5.5 read the cache at 0.05 (Anthropic pricing, read 2026-11).
- OpenAI: before GPT-5.6 no write surcharge (writes cost an input token); cached input 0.5 for
  gpt-4o, gpt-4o-mini and o1, 0.25 for gpt-4.1 and o3/o4-mini, 0.1 for gpt-5 and later;
  output 4 (gpt-5: 8) (OpenAI pricing, read 2025-12). From GPT-5.6 on cache writes are billed
  at 1.25 (OpenAI pricing, read 2026-11).
- Amazon Bedrock: Claude models as Anthropic's; Nova models cache read 0.25, no write
  surcharge, output 4. Model ids may start with a cross-region prefix (`us.`, `eu.`, ...).
- Anything else: Anthropic's ratios, the provider whose caching the product is tuned for.

A configuration may override or add entries (`PriceTable.from_json`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from learning_bot.engine.bounds import check_finite, check_text
from learning_bot.engine.errors import InvalidConfig, InvalidInput
from learning_bot.engine.usage import Usage

MAX_RATIO = 1000.0
"""Largest price ratio accepted (output tokens of the dearest models are about 8x input)."""
MAX_NAME_CHARS = 256
"""Longest provider name or model prefix."""
ONE_HOUR_CACHE_WRITE = 2.0
"""Anthropic's price of a cache write kept for one hour instead of five minutes."""


_KEYS = (("cacheRead", "cache_read"), ("cacheWrite", "cache_write"), ("output", "output"))
"""The JSON key of each ratio and its attribute."""


def _ratio(name: str, value: Any) -> float:
    try:
        number = check_finite(name, value)
    except InvalidInput as exc:
        raise InvalidConfig(name, str(exc).removeprefix(f"{name} ")) from None
    if not 0.0 <= number <= MAX_RATIO:
        raise InvalidConfig(name, f"must be from 0 to {MAX_RATIO:g}, got {number!r}")
    return number


def _name(field: str, value: Any, required: bool = False) -> str:
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value.strip()):
        raise InvalidConfig(field, f"must be a non-empty string, got {value!r}")
    try:
        return check_text(field, value, MAX_NAME_CHARS).strip().lower()
    except InvalidInput as exc:
        raise InvalidConfig(field, str(exc).removeprefix(f"{field} ")) from None


def _prices(where: str, raw: Any, base: TokenPrices) -> TokenPrices:
    if not isinstance(raw, Mapping):
        raise InvalidConfig(where, "must be an object")
    if where.endswith(".default"):
        extra = set(raw) - {"cacheRead", "cacheWrite", "output"}
        if extra:
            raise InvalidConfig(f"{where}.{sorted(extra)[0]}", "is not a known key")
    values = {}
    for key, attr in (
        ("cacheRead", "cache_read"),
        ("cacheWrite", "cache_write"),
        ("output", "output"),
    ):
        values[attr] = _ratio(f"{where}.{key}", raw[key]) if key in raw else getattr(base, attr)
    return TokenPrices(**values)


@dataclass(frozen=True, slots=True)
class TokenPrices:
    """One model's token prices as ratios to its uncached input-token price (which is 1)."""

    cache_read: float = 0.1
    cache_write: float = 1.25
    output: float = 5.0

    def __post_init__(self) -> None:
        for name in ("cache_read", "cache_write", "output"):
            object.__setattr__(self, name, _ratio(name, getattr(self, name)))

    def to_json(self) -> dict[str, float]:
        return {"cacheRead": self.cache_read, "cacheWrite": self.cache_write, "output": self.output}


@dataclass(frozen=True, slots=True)
class ModelPrices:
    """The prices of a provider's models whose name starts with `model_prefix` ("" = all)."""

    provider: str
    model_prefix: str
    prices: TokenPrices

    def __post_init__(self) -> None:
        for name in ("provider", "model_prefix"):
            value = getattr(self, name)
            try:
                check_text(name, value, MAX_NAME_CHARS)
            except InvalidInput as exc:
                raise InvalidConfig(name, str(exc).removeprefix(f"{name} ")) from None
            object.__setattr__(self, name, value.strip().lower())
        if not self.provider:
            raise InvalidConfig("provider", "must not be empty")
        if not isinstance(self.prices, TokenPrices):
            raise InvalidConfig("prices", "must be TokenPrices")

    def matches(self, provider: str, model: str) -> bool:
        """Same provider, and the model name (or, for Bedrock's cross-region ids such as
        `us.anthropic.claude-...`, the name after its region) starts with the prefix."""
        if provider != self.provider:
            return False
        if model.startswith(self.model_prefix):
            return True
        _, dot, rest = model.partition(".")
        return bool(dot) and rest.startswith(self.model_prefix)


ANTHROPIC = TokenPrices(cache_read=0.1, cache_write=1.25, output=5.0)
DEFAULT_PRICES = ANTHROPIC
"""The prices of a provider and model no entry matches."""

DEFAULT_MODELS: tuple[ModelPrices, ...] = (
    ModelPrices("anthropic", "", ANTHROPIC),
    ModelPrices("anthropic", "claude-opus-5-5", TokenPrices(0.05, 1.25, 5.0)),
    ModelPrices("anthropic", "claude-sonnet-5-5", TokenPrices(0.05, 1.25, 5.0)),
    ModelPrices("openai", "", TokenPrices(0.5, 1.0, 4.0)),
    ModelPrices("openai", "gpt-4o", TokenPrices(0.5, 1.0, 4.0)),
    ModelPrices("openai", "o1", TokenPrices(0.5, 1.0, 4.0)),
    ModelPrices("openai", "gpt-4.1", TokenPrices(0.25, 1.0, 4.0)),
    ModelPrices("openai", "o3", TokenPrices(0.25, 1.0, 4.0)),
    ModelPrices("openai", "o4-mini", TokenPrices(0.25, 1.0, 4.0)),
    ModelPrices("openai", "gpt-5", TokenPrices(0.1, 1.0, 8.0)),
    ModelPrices("openai", "gpt-5.6", TokenPrices(0.1, 1.25, 8.0)),
    ModelPrices("openai", "gpt-6", TokenPrices(0.1, 1.25, 8.0)),
    ModelPrices("bedrock", "", ANTHROPIC),
    ModelPrices("bedrock", "anthropic.", ANTHROPIC),
    ModelPrices("bedrock", "amazon.nova", TokenPrices(0.25, 1.0, 4.0)),
    ModelPrices("amazon-bedrock", "", ANTHROPIC),
    ModelPrices("amazon-bedrock", "anthropic.", ANTHROPIC),
    ModelPrices("amazon-bedrock", "amazon.nova", TokenPrices(0.25, 1.0, 4.0)),
)
"""Built-in entries; `amazon-bedrock` is the name some runtimes give Bedrock."""


@dataclass(frozen=True, slots=True)
class PriceTable:
    """Token prices by provider and model: the entry with the longest matching model prefix
    wins, and entries given later (a configuration's) win ties over earlier ones."""

    models: tuple[ModelPrices, ...] = DEFAULT_MODELS
    default: TokenPrices = DEFAULT_PRICES

    def __post_init__(self) -> None:
        object.__setattr__(self, "models", tuple(self.models))
        if any(not isinstance(m, ModelPrices) for m in self.models):
            raise InvalidConfig("prices.models", "must hold ModelPrices")
        if not isinstance(self.default, TokenPrices):
            raise InvalidConfig("prices.default", "must be TokenPrices")

    def prices_for(self, provider: str, model: str) -> TokenPrices:
        """The prices of a run of `model` at `provider` (names compared case-insensitively)."""
        provider = provider.strip().lower()
        model = model.strip().lower()
        best: ModelPrices | None = None
        for entry in self.models:
            if entry.matches(provider, model) and (
                best is None or len(entry.model_prefix) >= len(best.model_prefix)
            ):
                best = entry
        return best.prices if best is not None else self.default

    @classmethod
    def from_json(cls, data: Any, name: str = "prices") -> PriceTable:
        """The built-in table with a configuration's entries on top:
        `{"default": {cacheRead, cacheWrite, output}, "models": [{provider, model, cacheRead,
        cacheWrite, output}, ...]}` (every key optional; an entry's missing ratios are those of
        the built-in entry it overrides). Raises InvalidConfig naming the bad field."""
        if not isinstance(data, Mapping):
            raise InvalidConfig(name, "must be an object")
        unknown = set(data) - {"default", "models"}
        if unknown:
            raise InvalidConfig(f"{name}.{sorted(unknown)[0]}", "is not a known key")
        base = cls()
        default = base.default
        if data.get("default") is not None:
            default = _prices(f"{name}.default", data["default"], default)
        raw_models = data.get("models")
        raw_models = [] if raw_models is None else raw_models
        if not isinstance(raw_models, list):
            raise InvalidConfig(f"{name}.models", "must be a list")
        models = list(base.models)
        for i, raw in enumerate(raw_models):
            where = f"{name}.models[{i}]"
            if not isinstance(raw, Mapping):
                raise InvalidConfig(where, "must be an object")
            extra = set(raw) - {"provider", "model", "cacheRead", "cacheWrite", "output"}
            if extra:
                raise InvalidConfig(f"{where}.{sorted(extra)[0]}", "is not a known key")
            provider = _name(f"{where}.provider", raw.get("provider"), required=True)
            prefix = _name(f"{where}.model", raw.get("model", ""))
            inherited = cls(tuple(models), default).prices_for(provider, prefix)
            models.append(ModelPrices(provider, prefix, _prices(where, raw, inherited)))
        return cls(tuple(models), default)


def prompt_cost(usage: Usage, prices: TokenPrices) -> float:
    """The prompt's cost in input-token units: uncached input at 1, cache reads and writes at
    their ratios. Output is priced apart (`output_cost`): it does not depend on the prompt."""
    return (
        usage.input + usage.cache_read * prices.cache_read + usage.cache_write * prices.cache_write
    )


def output_cost(usage: Usage, prices: TokenPrices) -> float:
    """The output's cost in input-token units."""
    return usage.output * prices.output
