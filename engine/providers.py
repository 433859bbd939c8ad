"""How each provider treats a tool set that changes within a conversation (docs/sessions.md).

A session keeps its tool set because providers cache the prompt prefix and the tool
definitions come first in it. Whether a change to the tools costs a rewrite of that cached
prefix depends on the provider and the model:

- Anthropic, Claude 4 models and later: tools may be added or removed between the turns of a
  conversation without invalidating the cached prefix (mid-conversation tool changes), and
  tool search (`tool_search_tool_*`, `defer_loading`) is generally available. Claude 3 models
  rewrite the prefix when the tool list changes. Cache lifetime 5 minutes (1 hour on request);
  smallest cacheable prefix 1,024 tokens (2,048 on Haiku models). Source: Anthropic's
  documentation, "Prompt caching" and "Tool search tool", read 2026-11.
- OpenAI, GPT-5.4 and later: tool search defers functions and namespaces and appends the tools
  it loads at the end of the context, so the cached prefix holds; tools sent in the ordinary
  `tools` list are part of the prefix (a change rewrites it). Earlier models have no tool
  search. Cache lifetime 5 to 10 minutes in memory; smallest cacheable prefix 1,024 tokens.
  Source: OpenAI's documentation, "Prompt caching" and "Tool search", read 2026-11.
- Amazon Bedrock: its Claude models as Anthropic's, without tool search; others rewrite.
- Any other provider, or none named: a change to the tools rewrites the prefix (the safe
  assumption), no tool search.

What a rewrite costs is priced by engine.cost (cache read and write ratios per model).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Mechanics:
    """What one provider's model does with a tool set that changes between turns."""

    mid_conversation_tools: bool = False
    """Tools added or removed between turns leave the cached prefix valid (only the added
    definitions are written)."""
    tool_search: bool = False
    """Deferred tools can be found and loaded by the model without a prefix rewrite."""
    cache_ttl_seconds: int = 300
    """How long the provider keeps a cached prefix after its last use (the default tier)."""
    min_cacheable_tokens: int = 1024
    """The shortest prompt prefix the provider caches."""


REWRITES = Mechanics()
"""A provider whose prefix is rewritten by any change to the tools (the default)."""

_ENTRIES: tuple[tuple[str, str, Mechanics], ...] = (
    ("anthropic", "", Mechanics(True, True, 300, 1024)),
    ("anthropic", "claude-3", Mechanics(False, False, 300, 1024)),
    ("anthropic", "claude-3-haiku", Mechanics(False, False, 300, 2048)),
    ("anthropic", "claude-3-5-haiku", Mechanics(False, False, 300, 2048)),
    ("anthropic", "claude-haiku", Mechanics(True, True, 300, 2048)),
    ("openai", "", Mechanics(False, False, 300, 1024)),
    ("openai", "gpt-5.4", Mechanics(False, True, 300, 1024)),
    ("openai", "gpt-5.5", Mechanics(False, True, 300, 1024)),
    ("openai", "gpt-5.6", Mechanics(False, True, 300, 1024)),
    ("openai", "gpt-6", Mechanics(False, True, 300, 1024)),
    ("bedrock", "", REWRITES),
    ("bedrock", "anthropic.claude", Mechanics(True, False, 300, 1024)),
    ("bedrock", "anthropic.claude-3", REWRITES),
    ("amazon-bedrock", "", REWRITES),
    ("amazon-bedrock", "anthropic.claude", Mechanics(True, False, 300, 1024)),
    ("amazon-bedrock", "anthropic.claude-3", REWRITES),
)
"""(provider, model prefix, mechanics): the longest matching prefix wins."""


def mechanics_for(provider: str, model: str) -> Mechanics:
    """The mechanics of `model` at `provider` (case-insensitive; Bedrock's cross-region ids
    such as `us.anthropic.claude-...` match after their region)."""
    provider = provider.strip().lower()
    model = model.strip().lower()
    _, dot, regional = model.partition(".")
    best: tuple[int, Mechanics] | None = None
    for name, prefix, mechanics in _ENTRIES:
        if name != provider:
            continue
        matches = model.startswith(prefix) or (dot and regional.startswith(prefix))
        if matches and (best is None or len(prefix) >= best[0]):
            best = (len(prefix), mechanics)
    return best[1] if best is not None else REWRITES


__all__ = ["REWRITES", "Mechanics", "mechanics_for"]
