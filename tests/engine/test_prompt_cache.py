"""The prompt-prefix cache model: what a request reads, writes and sends uncached."""

from __future__ import annotations

import pytest

from learning_bot.engine.cost import ANTHROPIC, prompt_cost
from learning_bot.engine.errors import InvalidInput
from learning_bot.engine.prompt_cache import Block, PromptCache, shared_prefix_tokens
from learning_bot.engine.usage import Usage

TOOLS_AB = (Block("tool:a", 1_000), Block("tool:b", 3_000))
TOOLS_AC = (Block("tool:a", 1_000), Block("tool:c", 500))
TOOLS_CB = (Block("tool:c", 500), Block("tool:b", 3_000))
SYSTEM = Block("system", 1_200)


def turn(tools: tuple[Block, ...], history: int) -> list[Block]:
    """Tools, the system prompt, `history` earlier turns of 2,500 tokens, a 100-token message."""
    past = [Block(f"turn:{k}", 2_500) for k in range(history)]
    return [*tools, SYSTEM, *past, Block(f"message:{history}", 100)]


def test_the_first_request_writes_its_whole_prompt() -> None:
    cache = PromptCache()
    assert cache.request("s", 0.0, turn(TOOLS_AB, 0)) == Usage(cache_write=5_300)


def test_the_same_tools_next_turn_read_the_previous_prompt_and_write_the_new_history() -> None:
    cache = PromptCache()
    cache.request("s", 0.0, turn(TOOLS_AB, 0))
    # turn 1: tools + system (5,200) read; the new history (2,500) and message (100) written
    # (the previous message block is now part of turn:0, a different block)
    usage = cache.request("s", 60.0, turn(TOOLS_AB, 1))
    assert usage == Usage(cache_read=5_200, cache_write=2_600)
    usage = cache.request("s", 120.0, turn(TOOLS_AB, 2))
    assert usage == Usage(cache_read=7_700, cache_write=2_600)
    # 7,700 * 0.1 + 2,600 * 1.25 = 770 + 3,250
    assert prompt_cost(usage, ANTHROPIC) == pytest.approx(4_020.0)


def test_a_changed_first_tool_reads_nothing() -> None:
    cache = PromptCache()
    cache.request("s", 0.0, turn(TOOLS_AB, 0))
    usage = cache.request("s", 60.0, turn(TOOLS_CB, 1))
    assert usage == Usage(cache_read=0, cache_write=500 + 3_000 + 1_200 + 2_500 + 100)
    # the full miss: 7,300 * 1.25
    assert prompt_cost(usage, ANTHROPIC) == pytest.approx(9_125.0)


def test_a_change_later_in_the_tools_reads_the_tools_before_it() -> None:
    cache = PromptCache()
    cache.request("s", 0.0, turn(TOOLS_AB, 0))
    usage = cache.request("s", 60.0, turn(TOOLS_AC, 1))
    assert usage == Usage(cache_read=1_000, cache_write=500 + 1_200 + 2_500 + 100)


def test_a_tool_added_at_the_end_of_the_tools_rewrites_what_follows() -> None:
    cache = PromptCache()
    cache.request("s", 0.0, turn(TOOLS_AB, 0))
    usage = cache.request("s", 60.0, turn((*TOOLS_AB, Block("tool:c", 500)), 1))
    assert usage == Usage(cache_read=4_000, cache_write=500 + 1_200 + 2_500 + 100)


def test_a_gap_longer_than_the_lifetime_writes_everything_again() -> None:
    cache = PromptCache(ttl_seconds=300)
    cache.request("s", 0.0, turn(TOOLS_AB, 0))
    assert cache.request("s", 300.0, turn(TOOLS_AB, 1)).cache_read == 5_200  # just inside
    assert cache.request("s", 601.0, turn(TOOLS_AB, 2)) == Usage(cache_write=10_300)


def test_sessions_do_not_share_entries() -> None:
    cache = PromptCache()
    cache.request("s1", 0.0, turn(TOOLS_AB, 0))
    assert cache.request("s2", 1.0, turn(TOOLS_AB, 0)) == Usage(cache_write=5_300)
    cache.forget("s1")
    assert cache.request("s1", 2.0, turn(TOOLS_AB, 1)) == Usage(cache_write=7_800)


def test_without_caching_every_token_is_uncached_input() -> None:
    cache = PromptCache(enabled=False)
    cache.request("s", 0.0, turn(TOOLS_AB, 0))
    assert cache.request("s", 1.0, turn(TOOLS_AB, 1)) == Usage(input=7_800)


def test_blocks_and_lifetimes_are_checked() -> None:
    with pytest.raises(InvalidInput):
        Block("", 3)
    with pytest.raises(InvalidInput, match="tokens"):
        Block("x", -1)
    with pytest.raises(InvalidInput, match="ttl"):
        PromptCache(ttl_seconds=-1)
    assert shared_prefix_tokens([Block("a", 1), Block("b", 2)], [Block("a", 1)]) == 1
    assert shared_prefix_tokens([Block("a", 1)], [Block("a", 2)]) == 0
