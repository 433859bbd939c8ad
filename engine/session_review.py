"""Whether a live session keeps its set, priced in money (docs/sessions.md).

A session keeps its tool set because the provider caches the prompt prefix, tools first. The
set is a decision, not a freeze: it is drawn again

- when the cached prefix is gone anyway (`cache_break`): two runs in a row whose usage
  showed the prefix was not read from the cache (one such run rewrote the prefix with the set
  it had, so one alone makes a change no cheaper), a compaction the runtime reported, a change
  of provider or model (the idle window, the cache's lifetime, is handled where the set is read);
- when it was provisional (`provisional_done`): drawn while arms were forced in for
  exploration (cold start, `min_pulls`), it is drawn again as soon as those arms have their
  pulls;
- when it pays (`priced`): the learner has learnt enough since the draw that the best set it
  knows of (`best_known_set`: under a recall target, by the first draw's calibrated rule)
  saves more over the session's expected remaining turns than
  rewriting the cached prompt costs.

Prices are ratios to the model's uncached input token (engine.cost), so every figure here is
in input-token units; a redraw needs an expected saving of REDRAW_MARGIN times the rewrite.
Per turn a set costs its definitions read from the cache, plus, for each arm it leaves out,
the chance the model needs that arm (its posterior mean) times adding its definition when it
does; a tool the session already asked for and lacks costs a round trip every turn (the prompt
read again from the cache and the tool's definition written). What a left-out tool costs in
answers is the budget's (or the recall target's) business, not the review's: the review
prices money only, so a set is rewritten for what it saves on the bill. Rewriting costs the
whole prompt written instead of read where a changed tool list invalidates the prefix, and
only the new definitions written where the provider takes tools mid-conversation
(engine.providers). The session's remaining turns are estimated as max(turns so far, the
learner's mean session length - turns so far, 1): a conversation that
has gone on for t turns is expected to go on about as long again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import compress
from typing import TYPE_CHECKING, Protocol

from learning_bot.engine.cost import TokenPrices
from learning_bot.engine.providers import Mechanics
from learning_bot.engine.session_sets import SessionSet

if TYPE_CHECKING:  # numpy is imported on first selection, not at start-up
    from learning_bot.engine.recall_target import RecallCalibration

REVIEW_EVERY = 4
"""Selects of a live session between two priced reviews (each review draws a candidate)."""

REDRAW_MARGIN = 2.0
"""A priced redraw needs an expected saving of this many times the rewrite: the saving is an
estimate from posterior means that keep moving, the rewrite a certain cost."""

CACHE_MISS_SHARE = 0.5
"""A run of a session whose set was read before counts as a cache miss when it read less than
this share of its tool definitions from the cache."""

# The short reasons a select gives (its `sessionReason`); the counts in status group by them.
FIRST = "first select of the session"
KEPT = "cached prefix kept"
KEPT_PRICED = "a new set would not pay for the rewrite"
IDLE = "idle past the cache lifetime"
PROVISIONAL = "arms forced in for exploration have their pulls"
MISSED_CACHE = "a run missed the cache"
COMPACTED = "compaction reported"
PROVIDER_CHANGED = "provider changed"
MODEL_CHANGED = "model changed"
PRICED = "a new set pays for the rewrite"
JOINED = "a needed tool joined"
BASELINE_DONE = "baseline turns done"

REDRAW_REASONS = (
    IDLE,
    PROVISIONAL,
    MISSED_CACHE,
    COMPACTED,
    PROVIDER_CHANGED,
    MODEL_CHANGED,
    PRICED,
    BASELINE_DONE,
)
"""Every reason a live session's set is drawn again, in the order status lists them."""


class LearnerView(Protocol):
    """What a review reads of the learner: each arm's pulls and posterior mean, its number of
    observations, and the mean length of its sessions (None: not known)."""

    def pulls(self, arm_id: str) -> int: ...

    def mean(self, arm_id: str) -> float: ...

    def observations(self) -> int: ...

    def mean_session_turns(self) -> float | None: ...


@dataclass(frozen=True, slots=True)
class Price:
    """A priced review: what a new set saves over the remaining turns, what the rewrite costs."""

    saving: float
    rewrite: float
    turns: float

    @property
    def pays(self) -> bool:
        return self.saving > REDRAW_MARGIN * self.rewrite


def cache_break(session: SessionSet, provider: str, model: str, compacted: bool) -> str:
    """Why the session's cached prefix is gone whatever the set does ("" when it is not)."""
    if session.broken:
        return session.broken
    if compacted:
        return COMPACTED
    if provider and session.provider and provider.lower() != session.provider.lower():
        return PROVIDER_CHANGED
    if model and session.model and model.lower() != session.model.lower():
        return MODEL_CHANGED
    return ""


def forced_arms(
    selected: Iterable[str], view: LearnerView, min_pulls: int, seeds: Iterable[str]
) -> tuple[str, ...]:
    """The arms of a draw that were in only because they lack `min_pulls` pulls (seed arms
    are always in: they make no set provisional)."""
    if min_pulls <= 0:
        return ()
    seed_ids = frozenset(seeds)
    return tuple(a for a in selected if a not in seed_ids and view.pulls(a) < min_pulls)


def provisional_done(session: SessionSet, view: LearnerView, min_pulls: int) -> bool:
    """Whether a provisional set's forced arms all have their pulls now."""
    return bool(session.provisional) and all(
        view.pulls(a) >= min_pulls for a in session.provisional
    )


def due(session: SessionSet, view: LearnerView) -> bool:
    """Whether a priced review is due: every REVIEW_EVERY selects once the learner has observed
    something since the last one, and at once for a tool the session asked for."""
    if session.is_baseline:
        return False
    if session.wanted:
        return True
    return session.turns % REVIEW_EVERY == 0 and view.observations() > session.reviewed


def best_known_set(
    arm_ids: Sequence[str],
    costs: Mapping[str, int],
    view: LearnerView,
    budget: int,
    seeds: Iterable[str],
    per_token: bool,
    target: float | None = None,
    calibration: RecallCalibration | None = None,
) -> tuple[str, ...]:
    """The set a review weighs against the kept one: seed arms, then the arms by posterior mean
    (per token with per-token packing, or under a recall target) packed greedily into the
    budget, in inventory order. With a recall `target`, the rule of a first draw
    (engine.recall_target): the arms whose level is below the threshold `calibration` gives
    for this inventory, or, while it has too few uses for the target (or there is none), the
    arms until the share of the means kept reaches the target. A review compares what the
    learner knows, not a fresh Thompson draw: weighing draw after draw would keep finding one
    that looks better by chance."""
    seed_ids = frozenset(seeds)
    if target is not None and calibration is not None:
        calibrated = _below_threshold(arm_ids, costs, view, budget, seed_ids, target, calibration)
        if calibrated is not None:
            return calibrated
    chosen = {a for a in arm_ids if a in seed_ids}
    used = sum(costs[a] for a in chosen)
    means = {a: max(0.0, view.mean(a)) for a in arm_ids}
    total = sum(means.values())
    kept = sum(means[a] for a in chosen)

    def worth(arm_id: str) -> float:
        mean = means[arm_id]
        return mean / max(costs[arm_id], 1) if per_token or target is not None else mean

    for arm_id in sorted((a for a in arm_ids if a not in chosen), key=worth, reverse=True):
        if target is not None and total > 0 and kept >= target * total:
            break
        if used + costs[arm_id] <= budget:
            chosen.add(arm_id)
            used += costs[arm_id]
            kept += means[arm_id]
    return tuple(a for a in arm_ids if a in chosen)


def _below_threshold(
    arm_ids: Sequence[str],
    costs: Mapping[str, int],
    view: LearnerView,
    budget: int,
    seeds: frozenset[str],
    target: float,
    calibration: RecallCalibration,
) -> tuple[str, ...] | None:
    """The seed arms, then the arms whose level (from the posterior means) is below the
    threshold `calibration` gives for `target`, its search priced for these arms where it
    prices one (`RecallCalibration.priced_threshold`), under the budget as a cap, in inventory
    order; None while the calibration has too few uses for the target."""
    import numpy as np

    from learning_bot.engine.recall_target import arm_levels, pack_below, ranked

    means = np.array([max(0.0, view.mean(a)) for a in arm_ids], dtype=np.float64)
    tokens = np.array([costs[a] for a in arm_ids], dtype=np.int64)
    forced = np.array([a in seeds for a in arm_ids], dtype=bool)
    rank = ranked(means, tokens)
    threshold = calibration.priced_threshold(target, arm_levels(means, rank, forced), tokens)
    if threshold is None:
        return None
    mask, _ = pack_below(means, rank, tokens, forced, threshold, budget)
    return tuple(compress(arm_ids, mask.tolist()))


def remaining_turns(session: SessionSet, view: LearnerView) -> float:
    """The session's expected remaining turns (see the module's docstring)."""
    so_far = float(max(session.turns, 1))
    mean = view.mean_session_turns()
    return max(so_far, (mean or 0.0) - so_far, 1.0)


def priced(
    session: SessionSet,
    candidate: Iterable[str],
    costs: Mapping[str, int],
    view: LearnerView,
    prices: TokenPrices,
    mechanics: Mechanics,
    prompt_tokens: int,
) -> Price:
    """Whether `candidate` (arm ids, offered now) is worth rewriting the session's set for.
    `costs` holds every offered arm's tokens; `prompt_tokens` is the session's reported prompt
    size (0: unknown, the tools alone are counted)."""
    current = [a for a in (*session.included, *session.added) if a in costs]
    new = [a for a in candidate if a in costs]
    wanted = frozenset(session.wanted)
    tools = sum(costs[a] for a in current)
    prompt = max(prompt_tokens, tools)
    read, write = prices.cache_read, prices.cache_write

    def miss(arm_id: str, tokens: int) -> float:
        if arm_id in wanted:  # the session asked for it: a round trip each turn it lacks it
            return read * prompt + write * tokens
        # the chance the session needs it, times adding its definition when it does
        return min(1.0, max(0.0, view.mean(arm_id))) * write * tokens

    def per_turn(arms: Iterable[str]) -> float:
        kept = frozenset(arms)
        cost = read * sum(costs[a] for a in kept)
        for arm_id, tokens in costs.items():
            if arm_id not in kept:
                cost += miss(arm_id, tokens)
        return cost

    turns = remaining_turns(session, view)
    saving = (per_turn(current) - per_turn(new)) * turns
    if mechanics.mid_conversation_tools:
        have = frozenset(current)
        rewrite = write * sum(costs[a] for a in new if a not in have)
    else:
        rewrite = (write - read) * prompt
    return Price(saving, max(rewrite, 0.0), turns)


__all__ = [
    "BASELINE_DONE",
    "CACHE_MISS_SHARE",
    "COMPACTED",
    "FIRST",
    "IDLE",
    "JOINED",
    "KEPT",
    "KEPT_PRICED",
    "MISSED_CACHE",
    "MODEL_CHANGED",
    "PRICED",
    "PROVIDER_CHANGED",
    "PROVISIONAL",
    "REDRAW_MARGIN",
    "REDRAW_REASONS",
    "REVIEW_EVERY",
    "LearnerView",
    "Price",
    "best_known_set",
    "cache_break",
    "due",
    "forced_arms",
    "priced",
    "provisional_done",
    "remaining_turns",
]
