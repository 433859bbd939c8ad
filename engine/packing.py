"""Greedy packing of ranked arms into a token budget: take each arm that still fits, best
rank first (ties in position order), sorting only where the budget runs out."""

from __future__ import annotations

import math

import numpy as np

from learning_bot.engine.bounds import MAX_TOKEN_COST
from learning_bot.engine.inventory import BoolArray, FloatArray, IntArray

Taken = list[IntArray | list[int]]
"""Index arrays (or lists) of the arms a packing pass took."""

PACK_IN_PYTHON_BELOW = 48
"""`pack` finishes in a plain loop once this few candidates are left."""


def pack(order: IntArray, costs: IntArray, room: int) -> tuple[Taken, int]:
    """Greedy packing in `order`: take each arm that still fits, skip the ones that do not.

    Vectorised: take the longest prefix that fits, skip the first arm that does not, and drop
    every later arm dearer than what is left (it can never fit again: room only shrinks); the
    last few candidates go through a plain loop. Returns the chosen indices and their tokens.
    """
    taken: Taken = []
    used = 0
    cand = order
    left = costs[cand]
    while cand.size and room >= 0:
        if cand.size < PACK_IN_PYTHON_BELOW:
            picked = []
            for i, cost in zip(cand.tolist(), left.tolist(), strict=True):
                if cost <= room:
                    picked.append(i)
                    room -= cost
                    used += cost
            taken.append(picked)
            break
        csum = left.cumsum()
        fit = int(csum.searchsorted(room, "right"))
        if fit:
            taken.append(cand[:fit])
            spent = int(csum[fit - 1])
            room -= spent
            used += spent
        if fit + 1 >= cand.size:
            break
        keep = left[fit + 1 :] <= room
        cand = cand[fit + 1 :][keep]
        left = left[fit + 1 :][keep]
    return taken, used


def _ascending(key: FloatArray) -> IntArray:
    """argsort of `key` with ties in index order. numpy's stable sort of floats costs several
    times its default sort, and Thompson draws rarely tie: sort fast, and sort again stably
    only when two neighbours are equal."""
    order = key.argsort()
    ranked = key[order]
    if (ranked[1:] == ranked[:-1]).any():
        order = np.argsort(key, kind="stable")
    return order


BUCKETED_FROM = 256
"""From this many candidates on, `pack_ranked` sorts them into rank buckets instead of
sorting them (measured: bench/select.py)."""

BUCKET_OCTAVES = 32
"""Rank buckets cover this many halvings below the best rank; lower ranks share the last."""

_LOWEST_BUCKETED_TOP = 2.0**-512
"""`pack_ranked` buckets only when the best rank is at least this (and finite)."""

BUCKETED_UP_TO = 2**53 // MAX_TOKEN_COST
"""The most candidates `pack_ranked` buckets: the tokens per bucket are summed in float64,
exact while the sum of every candidate's cost stays below 2**53."""

SORT_IN_PYTHON_BELOW = 48
"""`_greedy` sorts and packs in plain Python below this many arms."""


def _greedy(
    cand: IntArray, rank: FloatArray, cand_costs: IntArray, costs: IntArray, room: int, taken: Taken
) -> int:
    """The greedy pass over `cand` in descending `rank` (ties in position order): appends the
    arms taken to `taken` and returns their tokens. `rank` and `cand_costs` are per
    candidate, `costs` per arm."""
    if cand.size >= SORT_IN_PYTHON_BELOW:
        more, used = pack(cand[_ascending(-rank)], costs, room)
        taken.extend(more)
        return used
    ids = cand.tolist()
    tokens = cand_costs.tolist()
    ranks = rank.tolist()
    picked = []
    used = 0
    cheapest = min(tokens, default=0)
    # sorted(reverse=True) keeps equal keys in their original order
    for k in sorted(range(len(ids)), key=ranks.__getitem__, reverse=True):
        cost = tokens[k]
        if cost <= room:
            picked.append(ids[k])
            room -= cost
            used += cost
            if room < cheapest:
                break
    taken.append(picked)
    return used


def _rank_buckets(rank: FloatArray, best: np.float64, first: int = 0) -> tuple[IntArray, int]:
    """Each rank's bucket (see `pack_ranked`), counted from `first` for `best` (the highest
    rank, finite and at least _LOWEST_BUCKETED_TOP), and the number of the last bucket."""
    fine = min(max(rank.size.bit_length() - 7, 0), 9)
    shift = 52 - fine
    last = (BUCKET_OCTAVES << fine) + first
    # unsigned: a negative rank's bits wrap to a difference beyond the last bucket
    bucket = np.subtract(int(best.view(np.uint64)) + (first << shift), rank.view(np.uint64))
    bucket >>= shift
    np.minimum(bucket, last, out=bucket)
    return bucket.view(np.int64), last


def pack_ranked(
    candidates: IntArray,
    rank: FloatArray,
    costs: IntArray,
    room: int,
    candidate_costs: IntArray | None = None,
) -> tuple[Taken, int]:
    """`pack` over `candidates` in descending `rank` (ties in index order), without sorting
    them. `candidate_costs`, when given, is `costs[candidates]`.

    The greedy pass takes every arm of a run of best arms that fits the room together, in
    whatever order they come; only where the room runs out does the order matter. So the
    ranks go into buckets of constant ratio below the best one: a non-negative float's bit
    pattern, read as an integer, grows with the float and its top bits are its binary
    logarithm, so `(bits(best) - bits(rank)) >> shift` is the bucket (0 holds the best
    rank, 2**fine buckets per halving, everything BUCKET_OCTAVES halvings down, zero and
    negative ranks included, in the last). A better rank never lands in a later bucket.
    The tokens per bucket, summed in order, show the first bucket that does not fit whole:
    every arm before it is taken, that bucket is packed exactly (sorted), and after it only
    the arms of later buckets no dearer than the room left can still go in; they are packed
    the same way. A best rank that is infinite, NaN, zero or negative (a free arm ranked by
    score per token) falls back to sorting."""
    taken: Taken = []
    used = 0
    cand = candidates
    rk = rank[cand]
    cc = costs[cand] if candidate_costs is None else candidate_costs
    while BUCKETED_FROM <= cand.size <= BUCKETED_UP_TO and room >= 0:
        best = rk.max()
        if not _LOWEST_BUCKETED_TOP <= best < math.inf:
            break
        bucket, last = _rank_buckets(rk, best)
        through = np.bincount(bucket, cc, last + 1).cumsum()
        if through[-1] <= room:  # everything fits
            taken.append(cand)
            return taken, used + int(through[-1])
        first = int(through.searchsorted(room, "right"))
        if first:
            spent = int(through[first - 1])
            taken.append(cand[bucket < first])
            used += spent
            room -= spent
        at = (bucket == first).nonzero()[0]
        spent = _greedy(cand[at], rk[at], cc[at], costs, room, taken)
        used += spent
        room -= spent
        fits = cc <= room
        fits &= bucket > first
        later = fits.nonzero()[0]
        cand, rk, cc = cand[later], rk[later], cc[later]
    if cand.size and room >= 0:
        used += _greedy(cand, rk, cc, costs, room, taken)
    return taken, used


def pack_inventory(
    rank: FloatArray, forced: BoolArray, costs: IntArray, budget: int
) -> tuple[BoolArray, int] | None:
    """The array path of `select_arms` packs in one pass over the whole inventory: the forced arms
    go into a bucket of their own ahead of every rank bucket, so they are taken first
    whatever their rank and the rest are packed as `pack_ranked` packs them, without
    gathering the candidates first. Returns the mask of the arms taken and their tokens, or
    None when the ranks cannot be bucketed."""
    if not BUCKETED_FROM <= rank.size <= BUCKETED_UP_TO:
        return None
    best = rank.max()
    if not _LOWEST_BUCKETED_TOP <= best < math.inf:
        return None
    bucket, last = _rank_buckets(rank, best, first=1)
    bucket[forced] = 0
    through = np.bincount(bucket, costs, last + 1).cumsum()
    if through[-1] <= budget:  # everything fits
        return np.ones(rank.size, dtype=bool), int(through[-1])
    first = int(through.searchsorted(budget, "right"))
    if not first:  # the forced arms alone are over budget: nothing else fits
        return forced.copy(), int(through[0])
    mask = bucket < first
    used = int(through[first - 1])
    room = budget - used
    taken: Taken = []
    at = (bucket == first).nonzero()[0]
    spent = _greedy(at, rank[at], costs[at], costs, room, taken)
    used += spent
    room -= spent
    fits = costs <= room
    fits &= bucket > first
    later = fits.nonzero()[0]
    if later.size:
        more, extra = pack_ranked(later, rank, costs, room)
        taken.extend(more)
        used += extra
    for chosen in taken:
        mask[chosen] = True
    return mask, used
