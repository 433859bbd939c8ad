"""Thompson Sampling selection of arms under a token budget (SPEC section 4)."""

from __future__ import annotations

import unicodedata
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt

from engine.arms import Arm, ArmType, parse_arm_id
from engine.config import LearningConfig
from engine.errors import InvalidArmId, InvalidInput
from engine.posterior import Posterior, prior_parameters

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

MAX_GUIDANCE_NAME = 64


def as_generator(rng: np.random.Generator | int | None) -> np.random.Generator:
    """Accept a numpy Generator, an int seed, or None (fresh entropy)."""
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None or (isinstance(rng, int) and not isinstance(rng, bool)):
        return np.random.default_rng(rng)
    raise InvalidInput(f"rng must be a numpy Generator or an int seed, got {type(rng).__name__}")


class ArmSet:
    """An arm inventory compiled once into arrays, so repeated selections stay vectorised."""

    __slots__ = (
        "__dict__",
        "__weakref__",
        "arms",
        "costs",
        "ids",
        "index",
        "prior_alpha",
        "prior_beta",
    )

    def __init__(self, arms: Iterable[Arm]) -> None:
        self.arms: tuple[Arm, ...] = tuple(arms)
        for arm in self.arms:
            if not isinstance(arm, Arm):
                raise InvalidInput(f"expected Arm objects, got {type(arm).__name__}")
        self.ids: tuple[str, ...] = tuple(arm.id for arm in self.arms)
        self.index: dict[str, int] = {arm_id: i for i, arm_id in enumerate(self.ids)}
        if len(self.index) != len(self.ids):
            dupes = sorted(arm_id for arm_id, n in Counter(self.ids).items() if n > 1)
            raise InvalidInput(f"arm ids must be unique; repeated: {', '.join(dupes[:5])}")
        self.costs: IntArray = np.fromiter(
            (arm.token_cost for arm in self.arms), dtype=np.int64, count=len(self.arms)
        )
        priors = [prior_parameters(arm.type) for arm in self.arms]
        self.prior_alpha: FloatArray = np.array([p[0] for p in priors], dtype=np.float64)
        self.prior_beta: FloatArray = np.array([p[1] for p in priors], dtype=np.float64)
        self._seed_masks: dict[tuple[str, ...], BoolArray] = {}

    def __len__(self) -> int:
        return len(self.arms)

    @cached_property
    def id_array(self) -> npt.NDArray[np.object_]:
        return np.array(self.ids, dtype=object)

    @cached_property
    def total_cost(self) -> int:
        return int(self.costs.sum())

    @cached_property
    def per_token(self) -> FloatArray:
        """1 / token cost of each arm (infinity for a free arm), for packing by score per token."""
        out = np.full(len(self.arms), np.inf)
        np.divide(1.0, self.costs, out=out, where=self.costs > 0)
        return out

    def seed_mask(self, seed_arm_ids: tuple[str, ...]) -> BoolArray:
        mask = self._seed_masks.get(seed_arm_ids)
        if mask is None:
            mask = np.zeros(len(self.arms), dtype=bool)
            for arm_id in seed_arm_ids:
                i = self.index.get(arm_id)
                if i is not None:
                    mask[i] = True
            self._seed_masks[seed_arm_ids] = mask
        return mask

    def align(self, posteriors: Mapping[str, Posterior] | None) -> PosteriorArrays:
        """Posterior arrays in this set's order; arms without a posterior get their prior."""
        alpha = self.prior_alpha.copy()
        beta = self.prior_beta.copy()
        pulls = np.zeros(len(self.arms), dtype=np.int64)
        if posteriors:
            for i, arm_id in enumerate(self.ids):
                p = posteriors.get(arm_id)
                if p is not None:
                    alpha[i] = p.alpha
                    beta[i] = p.beta
                    pulls[i] = p.pulls
        return PosteriorArrays(alpha, beta, pulls)


@dataclass(frozen=True, slots=True)
class PosteriorArrays:
    """alpha, beta and pulls of every arm of an ArmSet, position for position."""

    alpha: FloatArray
    beta: FloatArray
    pulls: IntArray


class Selection:
    """Which arms go into the next prompt, and what that costs.

    `selected` and `excluded` list arm ids in inventory order. A selection made by
    `select_arms` keeps them as a mask over the inventory and builds the tuples on first use,
    so large inventories do not pay for id lists nobody reads.
    """

    __slots__ = (
        "_excluded",
        "_ids",
        "_mask",
        "_selected",
        "fallback",
        "is_baseline",
        "over_budget",
        "token_budget",
        "used_tokens",
    )

    def __init__(
        self,
        selected: Sequence[str],
        excluded: Sequence[str],
        is_baseline: bool,
        token_budget: int,
        used_tokens: int,
        over_budget: bool,
        fallback: str | None = None,
    ) -> None:
        self._selected: tuple[str, ...] | None = tuple(selected)
        self._excluded: tuple[str, ...] | None = tuple(excluded)
        self._ids: npt.NDArray[np.object_] | None = None
        self._mask: BoolArray | None = None
        self.is_baseline = is_baseline
        self.token_budget = token_budget
        self.used_tokens = used_tokens
        self.over_budget = over_budget
        self.fallback = fallback
        """Why every arm was included without selecting (passive, disabled, storage down...)."""

    @classmethod
    def _from_mask(
        cls,
        ids: npt.NDArray[np.object_],
        mask: BoolArray,
        is_baseline: bool,
        token_budget: int,
        used_tokens: int,
        fallback: str | None,
    ) -> Selection:
        self = cls((), (), is_baseline, token_budget, used_tokens, used_tokens > token_budget)
        self._selected = self._excluded = None
        self._ids, self._mask = ids, mask
        self.fallback = fallback
        return self

    @property
    def selected(self) -> tuple[str, ...]:
        if self._selected is None:
            ids, mask = self._source()
            self._selected = tuple(ids[mask].tolist())
        return self._selected

    @property
    def excluded(self) -> tuple[str, ...]:
        if self._excluded is None:
            ids, mask = self._source()
            self._excluded = tuple(ids[~mask].tolist())
        return self._excluded

    @property
    def mask(self) -> BoolArray:
        """Which arms are selected, as booleans in inventory order (read-only).

        Only selections made by `select_arms` or `include_everything` carry it.
        """
        if self._mask is None:
            raise RuntimeError("this selection was built from id lists and has no arm mask")
        view = self._mask.view()
        view.flags.writeable = False
        return view

    def _source(self) -> tuple[npt.NDArray[np.object_], BoolArray]:
        if self._ids is None or self._mask is None:
            raise RuntimeError("selection has neither id tuples nor a mask")
        return self._ids, self._mask

    @property
    def guidance(self) -> str | None:
        """The system-prompt sentence naming excluded tools, or None."""
        return excluded_tools_guidance(self.excluded)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Selection):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def _key(self) -> tuple[Any, ...]:
        return (
            self.selected,
            self.excluded,
            self.is_baseline,
            self.token_budget,
            self.used_tokens,
            self.over_budget,
            self.fallback,
        )

    def __repr__(self) -> str:
        return (
            f"Selection(selected={len(self.selected)} arms, excluded={len(self.excluded)} arms, "
            f"is_baseline={self.is_baseline}, token_budget={self.token_budget}, "
            f"used_tokens={self.used_tokens}, over_budget={self.over_budget}, "
            f"fallback={self.fallback!r})"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "selected": list(self.selected),
            "excluded": list(self.excluded),
            "isBaseline": self.is_baseline,
            "tokenBudget": self.token_budget,
            "usedTokens": self.used_tokens,
            "overBudget": self.over_budget,
            "fallback": self.fallback,
            "guidance": self.guidance,
        }


def _pack(order: IntArray, costs: IntArray, room: int) -> tuple[list[IntArray], int]:
    """Greedy packing in `order`: take each arm that still fits, skip the ones that do not.

    Vectorised: take the longest prefix that fits, skip the first arm that does not, and drop
    every later arm dearer than what is left (it can never fit again: room only shrinks).
    Returns the chosen index arrays and the tokens they use.
    """
    taken: list[IntArray] = []
    used = 0
    cand = order
    left = costs[cand]
    while cand.size and room >= 0:
        csum = np.cumsum(left)
        fit = int(np.searchsorted(csum, room, side="right"))
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


PARTIAL_SORT_FROM = 4096
"""From this many candidates on, `_pack_ranked` sorts only the best ones the budget can hold."""


def _pack_ranked(
    candidates: IntArray, rank: FloatArray, costs: IntArray, room: int
) -> tuple[list[IntArray], int]:
    """`_pack` over `candidates` in descending `rank`, without sorting all of them.

    The greedy pass takes a prefix of the ranking until an arm does not fit; after that only
    arms no dearer than what is left can still go in. So: partition out the best `k` arms
    (enough to fill the room at their average cost, with a margin), sort and pack those, then
    sort and pack only the rest that still fit. Every arm of the first part ranks at least as
    high as every arm of the second, so the result is the greedy pass over the full order; a
    `k` too small costs time, never a different selection."""
    n = candidates.size
    k = n
    if n >= PARTIAL_SORT_FROM and room > 0:
        k = int(1.25 * room / max(float(costs[candidates].mean()), 1.0)) + 256
    if k >= n * 3 // 4:  # few candidates, or the budget holds most of them: sort them all
        return _pack(candidates[np.argsort(-rank[candidates])], costs, room)
    split = np.argpartition(-rank[candidates], k - 1)
    best, others = candidates[split[:k]], candidates[split[k:]]
    taken, used = _pack(best[np.argsort(-rank[best])], costs, room)
    left = room - used
    others = others[costs[others] <= left]
    if others.size:
        more, extra = _pack(others[np.argsort(-rank[others])], costs, left)
        taken.extend(more)
        used += extra
    return taken, used


def _scores(post: PosteriorArrays, exploration: float, gen: np.random.Generator) -> FloatArray:
    """One Thompson score per arm: a Beta(alpha/e, beta/e) draw, or the mean when e is 0."""
    if exploration == 1.0:
        return gen.beta(post.alpha, post.beta)
    if exploration == 0.0:
        return post.alpha / (post.alpha + post.beta)
    return gen.beta(post.alpha / exploration, post.beta / exploration)


POOLED_GRID = 64
"""Points of the usage-probability grid of the pooled prior (cell midpoints of [0, 1])."""
POOLED_ITERATIONS = 20
"""EM steps fitting the pooled prior to the arms' evidence, per selection."""
POOLED_FLOOR = 0.3
"""Share of the pooled prior spread evenly over the grid, so that no usage probability is
ruled out by the fit and an arm whose first observations were unlucky is still drawn high."""

_GRID = (np.arange(POOLED_GRID, dtype=np.float64) + 0.5) / POOLED_GRID
_LOG_GRID = np.log(_GRID)
_LOG_1M_GRID = np.log1p(-_GRID)


def _pooled_scores(
    post: PosteriorArrays, exploration: float, gen: np.random.Generator
) -> FloatArray:
    """One score per arm under a prior fitted to every arm's evidence (empirical Bayes).

    Each arm's posterior Beta(alpha, beta) is read as alpha - 1 uses and beta - 1 non-uses
    (its likelihood over a flat reference). Usage probabilities live on a grid of
    `POOLED_GRID` cells; the population distribution g over the grid is the maximum of the
    binomial marginal likelihood of all arms' evidence (EM, `POOLED_ITERATIONS` steps from
    uniform), then mixed with `POOLED_FLOOR` of the uniform distribution. Each arm's posterior
    on the grid is g times its likelihood, tempered by 1 / exploration (exploration < 1 narrows
    it as Beta(alpha/e, beta/e) does); a cell is drawn from it and the score is a uniform point
    of that cell. With exploration 0 the score is the posterior mean.
    """
    hits = np.maximum(post.alpha - 1.0, 0.0)
    misses = np.maximum(post.beta - 1.0, 0.0)
    loglik = np.multiply.outer(hits, _LOG_GRID) + np.multiply.outer(misses, _LOG_1M_GRID)
    loglik -= loglik.max(axis=1, keepdims=True)
    lik = np.exp(loglik)
    prior = np.full(POOLED_GRID, 1.0 / POOLED_GRID)
    for _ in range(POOLED_ITERATIONS):
        weights = lik * prior
        weights /= weights.sum(axis=1, keepdims=True)
        prior = weights.mean(axis=0)
    prior = (1.0 - POOLED_FLOOR) * prior + POOLED_FLOOR / POOLED_GRID
    weights = lik * prior
    weights /= weights.sum(axis=1, keepdims=True)
    if exploration == 0.0:
        out: FloatArray = weights @ _GRID
        return out
    if exploration != 1.0:
        logw = np.log(np.maximum(weights, np.finfo(np.float64).tiny)) / exploration
        logw -= logw.max(axis=1, keepdims=True)
        weights = np.exp(logw)
        weights /= weights.sum(axis=1, keepdims=True)
    n = weights.shape[0]
    cumulative = np.cumsum(weights, axis=1)
    cell = np.minimum((cumulative < gen.random(n)[:, None]).sum(axis=1), POOLED_GRID - 1)
    scores: FloatArray = (cell + gen.random(n)) / POOLED_GRID
    return scores


def discounted(
    posteriors: PosteriorArrays,
    prior_alpha: FloatArray,
    prior_beta: FloatArray,
    elapsed: float | FloatArray | IntArray,
    half_life: float,
) -> PosteriorArrays:
    """Posteriors after `elapsed` observations of forgetting: evidence halves every `half_life`.

    Each arm keeps its posterior mean while the weight of what it learned beyond its prior,
    (alpha + beta) - (prior_alpha + prior_beta), is scaled by 0.5 ** (elapsed / half_life):
    the posterior widens, so Thompson draws try the arm again and new observations outweigh
    old ones, but an arm the learner has seen to be rarely used is not pushed back up to its
    (optimistic) prior mean. A posterior no stronger than its prior is left as it is. `pulls`
    still counts observations (confidence and `min_pulls` read it) and is returned unchanged.
    Applying it for k observations and then m equals applying it once for k + m. `elapsed`
    may be one number for every arm or an array with one per arm (each arm's observations
    since its posterior was last brought up to date).
    """
    if isinstance(half_life, bool) or not half_life > 0 or not np.isfinite(half_life):
        raise InvalidInput(f"half_life must be a positive number, got {half_life!r}")
    if isinstance(elapsed, bool):
        raise InvalidInput(f"elapsed must be a number >= 0, got {elapsed!r}")
    steps = np.asarray(elapsed, dtype=np.float64)
    if not (np.isfinite(steps).all() and (steps >= 0).all()):
        raise InvalidInput(f"elapsed must be a number >= 0 (or one per arm), got {elapsed!r}")
    keep = 0.5 ** (steps / float(half_life))
    total = posteriors.alpha + posteriors.beta
    floor = prior_alpha + prior_beta
    weight = np.where(total > floor, floor + (total - floor) * keep, total)
    mean = posteriors.alpha / total
    return PosteriorArrays(mean * weight, (1.0 - mean) * weight, posteriors.pulls.copy())


def _result(
    arm_set: ArmSet,
    mask: BoolArray,
    config: LearningConfig,
    is_baseline: bool,
    fallback: str | None = None,
    used: int | None = None,
) -> Selection:
    if used is None:
        used = int(arm_set.costs[mask].sum())
    return Selection._from_mask(
        arm_set.id_array, mask, is_baseline, config.token_budget, used, fallback
    )


def include_everything(
    arms: Sequence[Arm] | ArmSet, config: LearningConfig, reason: str
) -> Selection:
    """Every arm in, nothing excluded; `reason` says why no selection took place."""
    arm_set = arms if isinstance(arms, ArmSet) else ArmSet(arms)
    return _result(arm_set, np.ones(len(arm_set), dtype=bool), config, False, reason)


def select_arms(
    arms: Sequence[Arm] | ArmSet,
    posteriors: Mapping[str, Posterior] | PosteriorArrays | None,
    config: LearningConfig,
    rng: np.random.Generator | int | None = None,
) -> Selection:
    """Choose the arms of the next prompt (SPEC section 4).

    Passive phase or disabled learning: everything is included. Otherwise a `baseline_rate`
    coin flip makes a baseline run (inventory order, greedy up to the budget); else each arm's
    score is drawn from its posterior in one vectorised draw, seeds and under-explored arms are
    always included, and the rest are packed greedily by score, highest first.
    Seeds are never excluded, not even in a baseline run.

    Four options of `config` change the Thompson runs only: `exploration` below 1 narrows
    the draw around each posterior mean, `pooled_prior` draws each score under a prior fitted
    to all arms' evidence (`_pooled_scores`) instead of the arm's own posterior alone,
    `packing="score_per_token"` ranks the rest by score / token cost instead of score, and
    `min_score` leaves out every arm of the rest whose score falls below it, however much
    budget is left. Their defaults are the SPEC behaviour.
    """
    arm_set = arms if isinstance(arms, ArmSet) else ArmSet(arms)
    if not config.enabled:
        return include_everything(arm_set, config, "learning is disabled")
    if not config.is_active:
        return include_everything(arm_set, config, "passive phase")
    gen = as_generator(rng)
    n = len(arm_set)
    if n == 0:
        return _result(arm_set, np.zeros(0, dtype=bool), config, False)
    if isinstance(posteriors, PosteriorArrays):
        post = posteriors
        if post.alpha.shape != (n,):
            raise InvalidInput(f"posterior arrays hold {post.alpha.shape[0]} arms, expected {n}")
    else:
        post = arm_set.align(posteriors)
    costs = arm_set.costs
    seeds = arm_set.seed_mask(config.seed_arm_ids)
    is_baseline = bool(gen.random() < config.baseline_rate)
    if is_baseline:
        forced = seeds
        rest = np.flatnonzero(~forced)
    else:
        if config.pooled_prior:
            scores = _pooled_scores(post, config.exploration, gen)
        else:
            scores = _scores(post, config.exploration, gen)
        forced = seeds | (post.pulls < config.min_pulls)
        rank = scores if config.packing == "score" else scores * arm_set.per_token
        eligible = ~forced
        if config.min_score > 0.0:
            eligible &= scores >= config.min_score
        rest = np.flatnonzero(eligible)
    forced_cost = int(costs[forced].sum())
    room = config.token_budget - forced_cost
    if is_baseline:
        taken, packed_cost = _pack(rest, costs, room)
    else:
        taken, packed_cost = _pack_ranked(rest, rank, costs, room)
    mask = forced.copy()
    for chosen in taken:
        mask[chosen] = True
    return _result(arm_set, mask, config, is_baseline, used=forced_cost + packed_cost)


_CONTROL_CATEGORIES = ("Cc", "Cf", "Zl", "Zp")


def _strip_controls(text: str) -> str:
    return "".join(ch for ch in text if unicodedata.category(ch) not in _CONTROL_CATEGORIES)


def _clean_name(name: str) -> str:
    return _strip_controls(name).strip()[:MAX_GUIDANCE_NAME]


def excluded_tools_guidance(excluded_ids: Iterable[str]) -> str | None:
    """A sentence for the system prompt naming unavailable tools, or None when none is excluded."""
    names: list[str] = []
    seen: set[str] = set()
    for arm_id in excluded_ids:
        if not isinstance(arm_id, str):
            continue
        try:
            parsed = parse_arm_id(_strip_controls(arm_id))
        except InvalidArmId:
            continue
        if parsed.type is not ArmType.TOOL:
            continue
        name = _clean_name(parsed.name)
        if name and name not in seen:
            seen.add(name)
            names.append(name)
    if not names:
        return None
    listed = ", ".join(names)
    return (
        f"The following tools are not available for this request: {listed}. "
        "If the user asks for something that needs one of them, explain that the capability "
        "is temporarily unavailable and suggest an alternative."
    )
