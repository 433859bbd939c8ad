"""Greedy packing under a token budget (engine.packing): the ranked arms are cut into buckets
instead of sorted, and whatever the ranks and costs the arms taken are those of the greedy
pass over the whole ranking."""

from __future__ import annotations

from unittest import mock

import numpy as np
import numpy.typing as npt
from hypothesis import given, settings
from hypothesis import strategies as st

from learning_bot.engine import packing


def _greedy_reference(rank: list[float], costs: list[int], room: int) -> set[int]:
    """Greedy packing over the whole ranking, best first, ties by position."""
    chosen: set[int] = set()
    for i in sorted(range(len(rank)), key=lambda i: (-rank[i], i)):
        if costs[i] <= room:
            chosen.add(i)
            room -= costs[i]
    return chosen


RANK_KINDS = ("uniform", "per_token", "tied", "skewed", "zeros", "signed", "wide")
"""How ranks spread in the packing tests: cheap arms first, many ties, most ranks near zero,
zeros, negative ranks, ranks many halvings apart."""


def costs_and_ranks(
    rng: np.random.Generator, n: int, kind: str
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """Lognormal token costs (some free) and ranks spread as `kind` (one of RANK_KINDS) says."""
    costs = np.clip(np.round(rng.lognormal(5.0, 1.2, n)), 0, 20_000).astype(np.int64)
    rank = {
        "uniform": lambda: rng.random(n),
        "per_token": lambda: rng.random(n) / np.maximum(costs, 1),
        "tied": lambda: np.round(rng.random(n) * 8) / 8,
        "skewed": lambda: rng.beta(0.3, 30.0, n),
        "zeros": lambda: np.where(rng.random(n) < 0.3, 0.0, rng.random(n)),
        "signed": lambda: rng.normal(0.0, 1.0, n),
        "wide": lambda: np.exp2(rng.uniform(-80.0, 0.0, n)),
    }[kind]()
    return costs, rank


def test_more_candidates_than_float_sums_hold_exactly_are_sorted_not_bucketed() -> None:
    """Bucket tokens are summed in float64; past BUCKETED_UP_TO candidates (sums that could
    pass 2**53) packing sorts instead, with the same result."""
    rng = np.random.default_rng(5)
    costs, rank = costs_and_ranks(rng, 600, "uniform")
    forced = rng.random(600) < 0.05
    budget = int(0.3 * costs.sum())
    candidates = np.flatnonzero(~forced)
    bucketed = packing.pack_ranked(candidates, rank, costs, budget)
    assert packing.pack_inventory(rank, forced, costs, budget) is not None
    with mock.patch.object(packing, "BUCKETED_UP_TO", 100):
        assert packing.pack_inventory(rank, forced, costs, budget) is None
        with mock.patch.object(packing, "_rank_buckets", side_effect=AssertionError):
            sorted_ = packing.pack_ranked(candidates, rank, costs, budget)
    assert sorted(int(i) for part in sorted_[0] for i in part) == sorted(
        int(i) for part in bucketed[0] for i in part
    )
    assert sorted_[1] == bucketed[1]


@settings(max_examples=120, deadline=None)
@given(
    n=st.integers(1, 3000),
    share=st.floats(-0.05, 1.2),
    forced_share=st.sampled_from([0.0, 0.02, 0.3, 1.0]),
    ranks=st.sampled_from(RANK_KINDS),
    seed=st.integers(0, 2**32 - 1),
)
def test_whole_inventory_packing_takes_the_forced_arms_then_the_greedy_pass(
    n: int, share: float, forced_share: float, ranks: str, seed: int
) -> None:
    """`pack_inventory` buckets the forced arms ahead of every rank: they are all taken,
    even over budget, and the rest are those of the greedy pass over the ranking in the room
    they leave (none when they are over budget)."""
    rng = np.random.default_rng(seed)
    costs, rank = costs_and_ranks(rng, n, ranks)
    forced = rng.random(n) < forced_share
    budget = int(share * costs.sum())
    with mock.patch.object(packing, "BUCKETED_FROM", 1):
        packed = packing.pack_inventory(rank, forced, costs, budget)
    if not rank.max() >= 2.0**-512:
        assert packed is None
        return
    assert packed is not None
    mask, used = packed
    forced_cost = int(costs[forced].sum())
    rest = np.flatnonzero(~forced).tolist()
    expected = set(np.flatnonzero(forced).tolist()) | {
        rest[j]
        for j in _greedy_reference(
            [float(rank[i]) for i in rest], [int(costs[i]) for i in rest], budget - forced_cost
        )
    }
    assert set(np.flatnonzero(mask).tolist()) == expected
    assert used == int(costs[mask].sum())


@settings(max_examples=120, deadline=None)
@given(
    n=st.integers(1, 3000),
    share=st.floats(-0.05, 1.2),
    ranks=st.sampled_from(RANK_KINDS),
    bucketed_from=st.sampled_from([2, 8, 256]),
    python_below=st.sampled_from([0, 5, 48, 10**6]),
    seed=st.integers(0, 2**32 - 1),
)
def test_bucketed_packing_equals_the_greedy_pass_over_the_full_ranking(
    n: int, share: float, ranks: str, bucketed_from: int, python_below: int, seed: int
) -> None:
    """From BUCKETED_FROM candidates on, the ranking is cut into buckets instead of sorted;
    whatever the room (negative included), however the ranks spread (cheap arms first, many
    ties, most ranks near zero, zeros, negative ranks, ranks many halvings apart), and
    whichever of the Python and numpy passes packs the small parts, the arms taken are
    those of the greedy pass over the whole ranking."""
    rng = np.random.default_rng(seed)
    costs, rank = costs_and_ranks(rng, n, ranks)
    room = int(share * costs.sum())
    candidates = np.flatnonzero(rng.random(n) < 0.9)
    with (
        mock.patch.object(packing, "BUCKETED_FROM", bucketed_from),
        mock.patch.object(packing, "SORT_IN_PYTHON_BELOW", python_below),
    ):
        taken, used = packing.pack_ranked(candidates, rank, costs, room)
    got = [int(i) for part in taken for i in part]
    assert len(got) == len(set(got))
    sub = candidates.tolist()
    expected = {
        sub[j]
        for j in _greedy_reference(
            [float(rank[i]) for i in sub], [int(costs[i]) for i in sub], room
        )
    }
    assert set(got) == expected
    assert used == sum(int(costs[i]) for i in got) <= max(room, 0)
