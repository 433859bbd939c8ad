"""Thompson Sampling selection of arms under a token budget (docs/learning.md): the `Selection`
result and `select_arms`, which draws the scores (engine.draws) and packs the arms
(engine.packing) of an inventory (engine.inventory)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from itertools import compress
from operator import not_
from typing import Any

import numpy as np

from learning_bot.engine.arms import Arm
from learning_bot.engine.config import LearningConfig, Phase
from learning_bot.engine.draws import as_generator, draw_scores
from learning_bot.engine.errors import InvalidInput
from learning_bot.engine.guidance import excluded_tools_guidance
from learning_bot.engine.inventory import (
    SMALL_INVENTORY,
    ArmSet,
    BoolArray,
    FloatArray,
    PosteriorArrays,
    Seeds,
    align_posteriors,
)
from learning_bot.engine.packing import Taken, pack, pack_inventory, pack_ranked
from learning_bot.engine.posterior import Posterior
from learning_bot.engine.recall_target import RecallCalibration


class Selection:
    """Which arms go into the next prompt, and what that costs.

    `selected` and `excluded` list arm ids in inventory order; `is_baseline`, `token_budget`,
    `used_tokens`, `over_budget`, `fallback` and `guidance` are plain attributes. A selection
    made by `select_arms` keeps which arms it chose (a mask, or a list of flags on the
    small-inventory path) and builds the id tuples and the guidance on first use, so large
    inventories do not pay for lists nobody reads.
    """

    __slots__ = (
        "_arm_set",
        "_excluded",
        "_flags",
        "_guidance",
        "_mask",
        "_selected",
        "added",
        "fallback",
        "is_baseline",
        "over_budget",
        "session",
        "session_reason",
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
        self._arm_set: ArmSet | None = None
        self._mask: BoolArray | None = None
        self._flags: list[bool] | None = None
        self._guidance: str | None = ""  # "": not built yet (a sentence is never empty)
        self.is_baseline = is_baseline
        self.token_budget = token_budget
        self.used_tokens = used_tokens
        self.over_budget = over_budget
        self.fallback = fallback
        """Why every arm was included without selecting (passive, disabled, storage down...)."""
        self.added: tuple[str, ...] = ()
        """Arms a session took on outside its cached prefix (docs/sessions.md): the runtime
        sends them as a mid-conversation addition, or leaves them to tool search; never in
        `selected` (the cached prefix) nor in `excluded`."""
        self.session: str | None = None
        """What a select naming a session did with its set: "new", "kept", "grown" or
        "redrawn" (None: no session)."""
        self.session_reason = ""
        """Why, in a few words (engine.session_review)."""

    @classmethod
    def _chosen(
        cls,
        arm_set: ArmSet,
        mask: BoolArray | None,
        flags: list[bool] | None,
        is_baseline: bool,
        token_budget: int,
        used_tokens: int,
        fallback: str | None,
    ) -> Selection:
        """A selection over `arm_set` given by a mask or by flags (one of the two)."""
        self = object.__new__(cls)
        self._selected = self._excluded = None
        self._arm_set = arm_set
        self._mask = mask
        self._flags = flags
        self._guidance = ""
        self.is_baseline = is_baseline
        self.token_budget = token_budget
        self.used_tokens = used_tokens
        self.over_budget = used_tokens > token_budget
        self.fallback = fallback
        self.added = ()
        self.session = None
        self.session_reason = ""
        return self

    @property
    def selected(self) -> tuple[str, ...]:
        if self._selected is None:
            arm_set = self._source()
            if self._flags is not None:
                self._selected = tuple(compress(arm_set.ids, self._flags))
            else:
                assert self._mask is not None
                self._selected = tuple(arm_set.id_array[self._mask].tolist())
        return self._selected

    @property
    def excluded(self) -> tuple[str, ...]:
        if self._excluded is None:
            arm_set = self._source()
            if self._flags is not None:
                self._excluded = tuple(compress(arm_set.ids, map(not_, self._flags)))
            else:
                assert self._mask is not None
                self._excluded = tuple(arm_set.id_array[~self._mask].tolist())
        return self._excluded

    @property
    def deferred(self) -> tuple[str, ...]:
        """The left-out tools, in inventory order: those a runtime with tool search can still
        offer as deferred (Anthropic `defer_loading`, OpenAI tool search), so they stay
        reachable without their definitions in the prompt (docs/context.md)."""
        arm_set = self._arm_set
        if arm_set is None:
            return tuple(a for a in self.excluded if _is_tool(a))
        if self._flags is not None:
            flags = self._flags
            return tuple(arm_set.ids[i] for i in arm_set.tool_positions if not flags[i])
        assert self._mask is not None
        return tuple(arm_set.id_array[arm_set.tool_mask & ~self._mask].tolist())

    @property
    def mask(self) -> BoolArray:
        """Which arms are selected, as booleans in inventory order (read-only).

        Only selections made by `select_arms` or `include_everything` carry it.
        """
        if self._mask is None:
            if self._flags is None:
                raise RuntimeError("this selection was built from id lists and has no arm mask")
            self._mask = np.array(self._flags, dtype=bool)
        view = self._mask.view()
        view.flags.writeable = False
        return view

    def _source(self) -> ArmSet:
        if self._arm_set is None:
            raise RuntimeError("selection has neither id tuples nor an arm set")
        return self._arm_set

    @property
    def guidance(self) -> str | None:
        """The system-prompt sentence naming excluded tools, or None."""
        if self._guidance == "":
            arm_set = self._arm_set
            if arm_set is None:
                self._guidance = excluded_tools_guidance(self.excluded)
            else:
                if self._flags is not None:
                    flags = self._flags
                    left_out = [i for i in arm_set.tool_positions if not flags[i]]
                else:
                    assert self._mask is not None
                    left_out = np.flatnonzero(arm_set.tool_mask & ~self._mask).tolist()
                self._guidance = arm_set.guidance_for(left_out)
        return self._guidance

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


def _is_tool(arm_id: str) -> bool:
    """Whether an id of a selection built from id lists names a tool (an id that is not an
    arm id names none)."""
    from learning_bot.engine.arms import ArmType, parse_arm_id

    try:
        return parse_arm_id(arm_id).type is ArmType.TOOL
    except InvalidInput:
        return False


Draw = Callable[[PosteriorArrays, LearningConfig, np.random.Generator], FloatArray]
"""A Thompson draw: one score per arm from the posteriors (engine.draws.draw_scores, or the
context-aware draw of engine.context_policy)."""


def include_everything(
    arms: Sequence[Arm] | ArmSet, config: LearningConfig, reason: str
) -> Selection:
    """Every arm in, nothing excluded; `reason` says why no selection took place."""
    arm_set = ArmSet.of(arms)
    mask = np.ones(len(arm_set), dtype=bool)
    return Selection._chosen(
        arm_set, mask, None, False, config.token_budget, arm_set.total_cost, reason
    )


def select_arms(
    arms: Sequence[Arm] | ArmSet,
    posteriors: Mapping[str, Posterior] | PosteriorArrays | None,
    config: LearningConfig,
    rng: np.random.Generator | int | None = None,
    *,
    draw: Draw | None = None,
    force: BoolArray | None = None,
    calibration: RecallCalibration | None = None,
) -> Selection:
    """Choose the arms of the next prompt (docs/learning.md, "Selection").

    Passive phase or disabled learning: everything is included. Otherwise a `baseline_rate`
    coin flip makes a baseline run (seeds, then every other arm in a random order from `rng`,
    greedy up to the budget); else each arm's score is drawn from its posterior in one
    vectorised draw, seeds and under-explored arms are always included, and the rest are
    packed greedily by score, highest first (ties in inventory order). Seeds are never
    excluded, not even in a baseline run.

    Four options of `config` change the Thompson runs only: `exploration` below 1 narrows
    the draw around each posterior mean, `pooled_prior` draws each score under a prior fitted
    to all arms' evidence (`engine.draws`) instead of the arm's own posterior alone,
    `packing="score_per_token"` ranks the rest by score / token cost instead of score, and
    `min_score` leaves out every arm of the rest whose score falls below it, however much
    budget is left. Their defaults are the seed algorithm's behaviour.

    `draw` replaces the Thompson draw (the context-aware policy passes its own); `force` marks
    arms included like seeds in a Thompson run (the exploration bound of engine.exploration
    passes those it owes a try). Neither changes a baseline run.

    With `config.recall_target` set, a Thompson run takes the least-cost set whose estimated
    recall meets the target instead (engine.recall_target), the stopping share given by
    `calibration` when one is passed.

    Inventories below SMALL_INVENTORY arms are ranked and packed in plain Python, larger ones
    with array operations; both take the same draws from `rng` in the same order and make the
    same selection.
    """
    arm_set = ArmSet.of(arms)
    if not config.enabled:
        return include_everything(arm_set, config, "learning is disabled")
    if config.phase is not Phase.ACTIVE:
        return include_everything(arm_set, config, "passive phase")
    gen = as_generator(rng)
    n = len(arm_set)
    if isinstance(posteriors, PosteriorArrays):
        post = posteriors
        if post.alpha.shape != (n,):
            raise InvalidInput(f"posterior arrays hold {post.alpha.shape[0]} arms, expected {n}")
    else:
        post = align_posteriors(arm_set, posteriors)
    if n == 0:
        return Selection._chosen(arm_set, None, [], False, config.token_budget, 0, None)
    if force is not None and force.shape != (n,):
        raise InvalidInput(f"force marks {force.shape[0]} arms, expected {n}")
    scorer = draw_scores if draw is None else draw
    if config.recall_target is not None:
        return _select_to_target(arm_set, post, config, gen, scorer, force, calibration)
    if n < SMALL_INVENTORY:
        return _select_small(arm_set, post, config, gen, scorer, force)
    return _select_vectorised(arm_set, post, config, gen, scorer, force)


def _select_vectorised(
    arm_set: ArmSet,
    post: PosteriorArrays,
    config: LearningConfig,
    gen: np.random.Generator,
    scorer: Draw,
    force: BoolArray | None,
) -> Selection:
    """select_arms with array operations, for large inventories."""
    costs = arm_set.costs
    seeds = arm_set.seed_info(config.seed_arm_ids)
    budget = config.token_budget
    if gen.random() < config.baseline_rate:
        return _baseline_run(arm_set, seeds, budget, gen)
    scores = scorer(post, config, gen)
    forced = forced_arms(arm_set, post, config, force)
    rank = scores if config.packing == "score" else scores * arm_set.per_token
    if config.min_score <= 0.0:
        whole = pack_inventory(rank, forced, costs, budget)
        if whole is not None:
            return Selection._chosen(arm_set, whole[0], None, False, budget, whole[1], None)
    eligible = ~forced
    if config.min_score > 0.0:
        eligible &= scores >= config.min_score
        rest = eligible.nonzero()[0]
        rest_costs = costs[rest]
        forced_cost = int(costs[forced].sum())
    else:
        rest = eligible.nonzero()[0]
        rest_costs = costs[rest]
        forced_cost = arm_set.total_cost - int(rest_costs.sum())
    taken, packed = pack_ranked(rest, rank, costs, budget - forced_cost, rest_costs)
    return _masked(arm_set, forced, taken, False, budget, forced_cost + packed)


def _select_to_target(
    arm_set: ArmSet,
    post: PosteriorArrays,
    config: LearningConfig,
    gen: np.random.Generator,
    scorer: Draw,
    force: BoolArray | None,
    calibration: RecallCalibration | None,
) -> Selection:
    """select_arms under a recall target (engine.recall_target): the same baseline coin and
    baseline run; otherwise the forced arms, then the arms by posterior mean per token until
    the share of the means kept reaches the share `calibration` gives for the target (the
    target itself without one), under the budget as a cap."""
    from learning_bot.engine.recall_target import arm_levels, pack_below, pack_to_target, ranked

    assert config.recall_target is not None
    costs = arm_set.costs
    seeds = arm_set.seed_info(config.seed_arm_ids)
    budget = config.token_budget
    if gen.random() < config.baseline_rate:
        return _baseline_run(arm_set, seeds, budget, gen)
    means = target_means(post, config, scorer, gen)
    forced = forced_arms(arm_set, post, config, force)
    rank = ranked(means, costs)
    threshold = (
        None
        if calibration is None
        else calibration.priced_threshold(
            config.recall_target, arm_levels(means, rank, forced), costs
        )
    )
    if threshold is None:  # uncalibrated: the target's share of the means
        mask, used, _ = pack_to_target(means, rank, costs, forced, config.recall_target, budget)
    else:
        mask, used = pack_below(means, rank, costs, forced, threshold, budget)
    return Selection._chosen(arm_set, mask, None, False, budget, used, None)


def target_means(
    post: PosteriorArrays, config: LearningConfig, scorer: Draw, gen: np.random.Generator
) -> FloatArray:
    """Each arm's posterior mean usefulness under the draw `scorer` makes (the context-aware
    one for a request with context): the draw at exploration 0, which takes nothing from
    `gen`."""
    return scorer(post, replace(config, exploration=0.0), gen)


def opening_ranks(
    arm_set: ArmSet,
    post: PosteriorArrays,
    config: LearningConfig,
    draw: Draw | None,
    force: BoolArray | None,
    gen: np.random.Generator,
) -> tuple[FloatArray, FloatArray, BoolArray]:
    """(means, ranks, forced arms) as a selection under a recall target reads them: what a
    baseline session's uses are measured against (engine.recall_target.inclusion_levels). The
    forced arms are those `calibration_forced` names."""
    from learning_bot.engine.recall_target import ranked

    means = target_means(post, config, draw_scores if draw is None else draw, gen)
    return means, ranked(means, arm_set.costs), calibration_forced(arm_set, config, force)


def calibration_forced(
    arm_set: ArmSet, config: LearningConfig, force: BoolArray | None
) -> BoolArray:
    """The forced arms a baseline session's uses are calibrated with: seeds and those `force`
    marks (the exploration bound's owed tries, forced at a steady rate), not the arms under
    minPulls. Their forcing ends after their first pulls, so a use of one counts at its
    level: counted at 0 (offered at any threshold), the uses of a cold learner's baseline
    sessions would calibrate a threshold below every level, and the sets chosen once those
    arms have their pulls would keep little but seeds until the uses left the window."""
    seeds = arm_set.seed_info(config.seed_arm_ids)
    forced = seeds.mask.copy() if seeds.positions else np.zeros(len(arm_set), dtype=bool)
    if force is not None:
        forced |= force
    return forced


def forced_arms(
    arm_set: ArmSet, post: PosteriorArrays, config: LearningConfig, force: BoolArray | None
) -> BoolArray:
    """The arms a Thompson run includes whatever their score: seeds, under-explored arms
    (pulls < minPulls) and those `force` marks."""
    forced = post.pulls < config.min_pulls
    seeds = arm_set.seed_info(config.seed_arm_ids)
    if seeds.positions:
        forced |= seeds.mask
    if force is not None:
        forced |= force
    return forced


def _baseline_run(
    arm_set: ArmSet, seeds: Seeds, budget: int, gen: np.random.Generator
) -> Selection:
    """A baseline run (the baseline coin came up): the seed arms, then the others in a random
    order while the budget lasts."""
    costs = arm_set.costs
    forced = seeds.mask
    rest = (~forced).nonzero()[0]
    rest = rest[gen.permutation(rest.size)]
    forced_cost = int(costs[forced].sum()) if seeds.positions else 0
    taken, packed = pack(rest, costs, budget - forced_cost)
    return _masked(arm_set, forced, taken, True, budget, forced_cost + packed)


def _masked(
    arm_set: ArmSet, forced: BoolArray, taken: Taken, is_baseline: bool, budget: int, used: int
) -> Selection:
    mask = forced.copy()
    for chosen in taken:
        mask[chosen] = True
    return Selection._chosen(arm_set, mask, None, is_baseline, budget, used, None)


def _select_small(
    arm_set: ArmSet,
    post: PosteriorArrays,
    config: LearningConfig,
    gen: np.random.Generator,
    scorer: Draw,
    force: BoolArray | None,
) -> Selection:
    """select_arms for a small inventory: the same draws as `_select_vectorised`, then
    ranking and greedy packing over Python lists (a stable sort: ties in inventory order)."""
    n = len(arm_set.ids)
    costs = arm_set.cost_list
    seeds = arm_set.seed_info(config.seed_arm_ids)
    budget = config.token_budget
    flags = [False] * n
    room = budget
    for i in seeds.positions:
        flags[i] = True
        room -= costs[i]
    is_baseline = bool(gen.random() < config.baseline_rate)
    if is_baseline:
        rest = list(compress(range(n), map(not_, flags)))
        rest = [rest[j] for j in gen.permutation(len(rest)).tolist()]
    else:
        scores = scorer(post, config, gen)
        if force is not None:
            for i in np.flatnonzero(force).tolist():
                if not flags[i]:
                    flags[i] = True
                    room -= costs[i]
        if config.packing == "score":
            rank: list[float] = scores.tolist()
        else:
            weighted = scores * arm_set.per_token
            if arm_set.has_free_arm:
                # a free arm scored 0 ranks NaN (0 * inf): last, where numpy's sort puts it
                weighted = np.where(np.isnan(weighted), -np.inf, weighted)
            rank = weighted.tolist()
        min_pulls = config.min_pulls
        if min_pulls > 0:
            for i, pulls in enumerate(post.pulls.tolist()):
                if pulls < min_pulls and not flags[i]:
                    flags[i] = True
                    room -= costs[i]
        rest = list(compress(range(n), map(not_, flags)))
        if config.min_score > 0.0:
            below = (scores < config.min_score).tolist()
            rest = [i for i in rest if not below[i]]
        rest.sort(key=rank.__getitem__, reverse=True)
    cheapest = arm_set.cheapest
    if room >= cheapest:
        for i in rest:
            cost = costs[i]
            if cost <= room:
                flags[i] = True
                room -= cost
                if room < cheapest:
                    break
    return Selection._chosen(arm_set, None, flags, is_baseline, budget, budget - room, None)
