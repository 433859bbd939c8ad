"""A run's token usage as the runtime reports it (the prompt's uncached, cache-read and
cache-written parts, and the output); engine.observation's run report carries one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from learning_bot.engine.bounds import MAX_COUNT, check_count


@dataclass(frozen=True, slots=True)
class Usage:
    """Token usage of one run; `total` defaults to the sum of the parts.

    `input` is the uncached prompt; `cache_read` the prompt read from the provider's prefix
    cache and `cache_write` the prompt written to it (Anthropic's cache_creation_input_tokens),
    priced apart by `engine.cost`. `cache_write` follows `total` so positional callers keep
    their meaning."""

    input: int = 0
    output: int = 0
    cache_read: int = 0
    total: int = -1
    cache_write: int = 0

    def __post_init__(self) -> None:
        for name in ("input", "output", "cache_read", "cache_write"):
            check_usage_count(f"usage.{name}", getattr(self, name))
        if self.total == -1:
            parts = self.input + self.output + self.cache_read + self.cache_write
            object.__setattr__(self, "total", parts)
        check_usage_count("usage.total", self.total)

    def to_dict(self) -> dict[str, int]:
        return {
            "input": self.input,
            "output": self.output,
            "cacheRead": self.cache_read,
            "cacheWrite": self.cache_write,
            "total": self.total,
        }


def check_usage_count(name: str, value: Any) -> None:
    """A whole number from 0 to MAX_COUNT (the usual case answered without a call)."""
    if type(value) is not int or value < 0 or value > MAX_COUNT:
        check_count(name, value)
