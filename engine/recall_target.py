"""The recall target (SPEC section 4b, `recallTarget`): the least-cost set whose estimated
recall meets the target, instead of the set that fills a token budget.

The estimator. p_i is an arm's posterior mean usefulness for this request (under the
request's context when the context policy draws, else the learner-wide posterior, the pooled
one when the policy pools). The p_i rank well but are not calibrated probabilities (the
context-aware posterior sums evidence over a request's features, which dilutes it over common
words), so the stopping point is calibrated on what a runtime reports of baseline sessions,
which offer every arm. An arm's level is the means' total over its mean per token,
sum(p) x c_i / p_i (`arm_levels`): the arms by mean per token within a request, on one scale
across requests. A set holds the forced arms (seeds, under-explored arms, arms owed a try) and
every arm whose level is below a threshold t; for each arm a baseline session used, its level
at the session's opening is recorded, and the smallest t above the ceil((n + 1) x target)-th
smallest of the n latest levels keeps the target's share of the arms used (a split-conformal
bound, for sessions like the recorded ones). Until enough levels are recorded for a target
(n >= 1 / (1 - target) - 1), the set stops where its share of the means reaches the target
(`pack_to_target`), the uncalibrated estimate.

Where the provider has tool search, a used arm is recorded at the threshold above which it is
offered, kept or found by the search replayed on the baseline turn's request
(`search_levels`), or, replayed on the baseline session's turns so far, loaded by an earlier
search of the session, as a session's set grows with what its searches found
(`session_search_levels`): the estimate counts a deferred arm at the search's hit rate. Of
the thresholds that meet the target, the set takes the one of least estimated cost, kept
tokens and searches priced (`SearchPricing`, `RecallCalibration.priced_threshold`; a turn
costs one search where a tool it uses was not there when it began, `search_charges`).

A learner (`SessionLevels`) keeps each baseline session's ranking at its opening and, where
the provider has tool search, the search's index and the session's turns so far (each turn's
scores for its message and the arms it used), and prices the search from what its runs report
(`SessionTraffic`): the service's calibration and the study's learner
(research/context_simulation.py) record the same uses.
"""

from __future__ import annotations

import bisect
import math
import threading
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from learning_bot.engine.context import words
from learning_bot.engine.cost import TokenPrices
from learning_bot.engine.inventory import BoolArray, FloatArray, IntArray

if TYPE_CHECKING:
    from learning_bot.engine.bm25 import BM25Index

SLACK = 1e-12
"""Rounding allowed when the estimate is compared with the target."""
EVERY_ARM = math.inf
"""A threshold no level reaches: stop never (every arm of positive mean the budget allows)."""
CALIBRATION_LEVELS = 200
"""Levels of used arms a calibration keeps: the latest, since the ranking they measure improves
as the learner learns (older levels make the sets too large). 200 is about the uses of 35
baseline sessions on BFCL and 20 on the task-type workloads; 5,000 and 1,000 kept 0.02-0.08
more than the target on BFCL, 150 0.024 less at 0.90 (BENCHMARKS.md)."""
SEARCH_TOP = 5
"""Tools one tool search loads (the providers' documented default)."""
SEARCH_RESULT_TOKENS = 60
"""The search call and its result, beside the loaded definitions."""
SEARCH_CALL_TOKENS = 40
"""Output tokens of the model's search call (its query), priced at the output price."""
PRICED_SESSIONS = 200
"""Sessions whose turns price a search (`SessionTraffic`): the latest."""
PROMPT_WEIGHT = 0.05
"""Weight of the latest request in the running means of the prompts (`SessionTraffic`)."""
REPLAYED_TURNS = 16
"""Turns of a baseline session its search replay keeps, the latest (`SessionLevels`): a tool
loaded by an earlier search counts as loaded while that search's turn is among them."""


def ranked(means: FloatArray, costs: IntArray) -> FloatArray:
    """The order of the arms that are not forced in: posterior mean per token of cost,
    highest first (a free arm first when useful)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        rank = means / costs
    return np.where(np.isnan(rank), -np.inf, rank)


def pack_to_target(
    means: FloatArray,
    rank: FloatArray,
    costs: IntArray,
    forced: BoolArray,
    share: float,
    budget: int,
    eligible: BoolArray | None = None,
) -> tuple[BoolArray, int, float]:
    """(the chosen arms, their tokens, their share of the means): the forced arms, then the
    others by `rank` (highest first, ties in inventory order) while the share of `means` kept
    stays below `share`, each that fits under `budget` with the arms chosen before it. Arms
    whose mean is 0, and arms outside `eligible` when it is given, are never added (the
    former add cost and no recall)."""
    mask = forced.copy()
    used = int(costs[mask].sum())
    total = float(means.sum())
    if total <= 0.0:
        return mask, used, 1.0
    goal = share * total
    kept = float(means[mask].sum())
    if kept + SLACK * total >= goal:
        return mask, used, kept / total
    candidates = ~mask & (means > 0.0)
    if eligible is not None:
        candidates &= eligible
    rest = np.flatnonzero(candidates)
    order = rest[np.argsort(-rank[rest], kind="stable")]
    for i, cost, mean in zip(
        order.tolist(), costs[order].tolist(), means[order].tolist(), strict=True
    ):
        if used + cost > budget:
            continue
        mask[i] = True
        used += cost
        kept += mean
        if kept + SLACK * total >= goal:
            break
    return mask, used, kept / total


def arm_levels(means: FloatArray, rank: FloatArray, forced: BoolArray) -> FloatArray:
    """Each arm's level: the means' total over the arm's mean per token (`rank`), the inverse of
    its share of the means per token of cost; 0 for a forced arm, math.inf for an arm of mean
    0. A set below threshold t holds the forced arms and every arm of level below t: the same
    order as `ranked` within a request, one scale across requests (a request whose means are
    spread over many arms keeps fewer of them than one whose means are concentrated)."""
    total = float(means.sum())
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where((rank > 0.0) & (means > 0.0), total / rank, math.inf)
    out[forced] = 0.0
    return out


def inclusion_levels(
    means: FloatArray, rank: FloatArray, forced: BoolArray, used: Sequence[int]
) -> list[float]:
    """For each arm in `used`: its level (`arm_levels`). A set that stops below threshold t
    (no budget cap, `pack_below`) holds exactly the used arms whose level is below t."""
    if float(means.sum()) <= 0.0:
        return [0.0 if forced[i] else math.inf for i in used]
    levels = arm_levels(means, rank, forced)
    return [float(levels[i]) for i in used]


def search_levels(
    levels: FloatArray, scores: FloatArray, used: Sequence[int], top: int
) -> list[float]:
    """For each arm in `used`, with tool search over the deferred arms: the threshold above
    which it is offered, in the prompt or found. `levels` are every arm's (`arm_levels`),
    `scores` the search's score of every arm for the turn's request (BM25 over the message,
    as the providers document it), `top` the tools a search returns. Below threshold t the
    arms of level >= t are deferred; the search returns the `top` best-scoring deferred arms
    with a score above 0 (ties in inventory order), so a deferred used arm is found when
    fewer than `top` deferred arms rank before it: for t above the `top`-th highest level of
    the arms that outrank it. The arm is offered for t above the lower of that and its own
    level (kept), a threshold that only grows with the deferred set: the estimate counts a
    deferred arm the search would find at the search's hit rate on the recorded requests."""
    n = len(levels)
    position = np.arange(n)
    out = []
    for i in used:
        own = float(levels[i])
        if scores[i] <= 0.0:
            out.append(own)
            continue
        ahead = (scores > scores[i]) | ((scores == scores[i]) & (position < i))
        rivals = np.sort(levels[ahead])[::-1]
        found_above = float(rivals[top - 1]) if len(rivals) >= top else 0.0
        out.append(min(own, found_above))
    return out


def session_search_levels(
    levels: FloatArray,
    turns: Sequence[tuple[FloatArray, Sequence[int]]],
    top: int,
) -> tuple[list[float], list[float]]:
    """For each arm the last of `turns` used, with tool search over the deferred arms and the
    session's set growing with what its searches found (found tools stay loaded for the rest
    of the session): (the threshold above which it is offered at that turn, kept, loaded by an
    earlier search or found by this turn's; the threshold above which it is there when the
    turn begins, kept or loaded, so that the turn needs no search for it). `levels` are every
    arm's at the session's opening (`arm_levels`); `turns` the session's turns so far, each
    the search's score of every arm for the turn's request (BM25 over its message) and the
    arms the turn used. Below threshold t the arms of level >= t are deferred; a turn that
    used an arm not there searches once, which returns the `top` best-scoring deferred arms
    with a score above 0 (ties in inventory order). The session is replayed at every
    threshold at which the set changes; a turn's search depends on what earlier turns loaded,
    so an arm offered at t may not be at a higher t (an earlier search no longer ran): the
    threshold returned is the lowest above which it is offered at every threshold. With one
    turn, the first is `search_levels`."""
    finite = np.unique(levels[np.isfinite(levels) & (levels > 0.0)])
    points = np.append(finite, math.inf)  # the set below t is the set below the next point
    kept = levels[None, :] < points[:, None]  # one row per threshold
    there = offered = kept
    for scores, used in turns:
        hits = np.flatnonzero(scores > 0.0)
        order = hits[np.argsort(-scores[hits], kind="stable")]
        deferred = ~kept[:, order]  # the search runs over every arm the prompt does not keep
        found = np.zeros_like(kept)
        found[:, order] = deferred & (np.cumsum(deferred, axis=1) <= top)
        need = np.zeros(len(levels), dtype=bool)
        need[list(used)] = True
        there = offered  # what earlier turns loaded stays
        searched: BoolArray = np.asarray((need[None, :] & ~there).any(axis=1))
        offered = there | (found & searched[:, None])
    last = list(turns[-1][1]) if turns else []

    def above(present: BoolArray) -> float:
        missing = np.flatnonzero(~present)
        return float(points[missing[-1]]) if missing.size else 0.0

    return [above(offered[:, i]) for i in last], [above(there[:, i]) for i in last]


def search_charges(there: Sequence[float]) -> list[float]:
    """One turn's uses as the searches they cost, from the thresholds above which each is
    there when the turn begins (`session_search_levels`): the turn runs one search below the
    highest of them, charged to the first use at it; its other uses cost none (0). Counted
    over the recorded uses, the uses charged at or above threshold t are the turns that
    search below it (`RecallCalibration.priced_threshold`)."""
    out = [0.0] * len(there)
    if out:
        first = max(range(len(there)), key=lambda i: (there[i], -i))
        out[first] = float(there[first])
    return out


def pack_below(
    means: FloatArray,
    rank: FloatArray,
    costs: IntArray,
    forced: BoolArray,
    threshold: float,
    budget: int,
) -> tuple[BoolArray, int]:
    """(the chosen arms, their tokens): the forced arms, then the others by `rank` (highest
    first, ties in inventory order) while their level (`arm_levels`) is below `threshold`,
    each that fits under `budget` with the arms chosen before it."""
    mask = forced.copy()
    used = int(costs[mask].sum())
    levels = arm_levels(means, rank, forced)
    rest = np.flatnonzero(~forced & (levels < threshold))
    order = rest[np.argsort(-rank[rest], kind="stable")]
    for i, cost in zip(order.tolist(), costs[order].tolist(), strict=True):
        if used + cost > budget:
            continue
        mask[i] = True
        used += cost
    return mask, used


@dataclass(frozen=True, slots=True)
class SearchPricing:
    """What deferring costs, in uncached input tokens, where the provider has tool search: a
    token of tool definition kept in the prompt costs `keep` over a session (written to the
    cache once, read on each later turn), a search `search` (its round trip re-reading the
    prompt from the cache, the call at the output price, the result and the definitions it
    loads appended to the conversation)."""

    keep: float
    search: float

    @classmethod
    def of(
        cls,
        prices: TokenPrices,
        turns: float,
        prompt_tokens: float,
        appended_tokens: float,
        call_tokens: float,
    ) -> SearchPricing:
        """The prices for sessions of `turns` turns whose prompt reads `prompt_tokens`, a search
        appending `appended_tokens` and writing a call of `call_tokens` output tokens."""
        keep = prices.cache_write + prices.cache_read * max(0.0, turns - 1.0)
        search = (
            prices.cache_read * prompt_tokens
            + prices.cache_write * appended_tokens
            + prices.cache_read * appended_tokens * max(0.0, turns - 1.0) / 2.0
            + prices.output * call_tokens
        )
        return cls(keep, search)


class SessionTraffic:
    """What a learner's runs tell the price of a search (`SearchPricing`): the turns of its
    latest `sessions` sessions, a running mean of the prompts its selected sessions' requests
    read (the input tokens billed: uncached, cache read and cache write), and, for the
    prompt's estimate before any is reported, one of the tool tokens its selected sets keep and
    one of what a baseline session's request read beside the tools it offered (the system
    prompt and the conversation: its reported prompt less every tool's tokens)."""

    def __init__(self, sessions: int = PRICED_SESSIONS, weight: float = PROMPT_WEIGHT) -> None:
        self._sessions = sessions
        self._weight = weight
        self._turns: dict[str, int] = {}
        self._prompt: float | None = None
        self._offered: float | None = None
        self._rest: float | None = None

    def ran(
        self,
        key: str,
        prompt_tokens: float = 0.0,
        selected: bool = True,
        offered_tokens: float = 0.0,
    ) -> None:
        """A run of session `key` whose request read `prompt_tokens` (0: not reported); a
        baseline session's (`selected` false) offers every tool, `offered_tokens` of them
        (0: not known), so its prompt says nothing of the selected sessions' but, less those
        tools, tells what the rest of a request reads."""
        self._turns[key] = self._turns.get(key, 0) + 1
        while len(self._turns) > self._sessions:
            del self._turns[next(iter(self._turns))]
        if prompt_tokens <= 0.0:
            return
        if selected:
            self._prompt = _running(self._prompt, prompt_tokens, self._weight)
        elif offered_tokens > 0.0:
            rest = max(prompt_tokens - offered_tokens, 0.0)
            self._rest = _running(self._rest, rest, self._weight)

    def selected(self, tool_tokens: float) -> None:
        """A set was selected (not a baseline one) keeping `tool_tokens` of tool definitions."""
        self._offered = _running(self._offered, tool_tokens, self._weight)

    def pricing(
        self, prices: TokenPrices, costs: IntArray, history_tokens: float = 0.0
    ) -> SearchPricing:
        """What deferring costs for an inventory of these arm `costs`: sessions of the mean
        turns seen (1 before any), a search re-reading the mean prompt of the selected
        sessions' requests (before any is reported, the mean set selected and the rest of a
        baseline session's request, or `history_tokens` before one is reported either) and
        appending SEARCH_TOP definitions of the inventory's mean cost."""
        turns = float(np.mean(list(self._turns.values()))) if self._turns else 1.0
        mean_cost = float(costs.mean()) if len(costs) else 0.0
        prompt = self._prompt
        if prompt is None:
            rest = self._rest if self._rest is not None else history_tokens
            prompt = rest + (self._offered or 0.0)
        return SearchPricing.of(
            prices,
            turns,
            prompt,
            SEARCH_RESULT_TOKENS + SEARCH_TOP * mean_cost,
            SEARCH_CALL_TOKENS,
        )


def _running(seen: float | None, value: float, weight: float) -> float:
    """An exponentially weighted running mean: `value` first, then moved by `weight`."""
    return value if seen is None else seen + weight * (value - seen)


class RecordedUse(NamedTuple):
    """One use a calibration recorded: the arm's level (`session_search_levels` with tool
    search, else `inclusion_levels`), its own level (with tool search the search its turn
    runs, charged to one of the turn's uses, `search_charges`: below it the turn searches;
    without, `inclusion_levels`) and the session that used it."""

    level: float
    own: float
    session: str


class RecallCalibration:
    """The levels (`inclusion_levels`, or `session_search_levels` where the provider has tool
    search) of the arms baseline sessions used, the latest `keep`, and the threshold for a
    recall target."""

    def __init__(
        self, keep: int = CALIBRATION_LEVELS, pricing: SearchPricing | None = None
    ) -> None:
        self._levels: deque[float] = deque(maxlen=keep)
        self._own: deque[float] = deque(maxlen=keep)
        self._sessions: deque[str] = deque(maxlen=keep)
        self._sorted: list[float] | None = []
        self._own_sorted: list[float] | None = []
        self.pricing = pricing
        """Where the provider has tool search: what deferring costs (`priced_threshold`)."""

    def __len__(self) -> int:
        return len(self._levels)

    def levels(self) -> list[float]:
        """The recorded levels, oldest first (what a learner stores to keep its calibration)."""
        return list(self._levels)

    def own_levels(self) -> list[float]:
        """The recorded uses' own levels (`RecordedUse.own`), oldest first."""
        return list(self._own)

    def recorded(self) -> list[RecordedUse]:
        """Every recorded use, oldest first: what a learner stores to keep its calibration
        across restarts and replicas (`replace` takes it back)."""
        return [
            RecordedUse(level, own, session)
            for level, own, session in zip(self._levels, self._own, self._sessions, strict=True)
        ]

    def replace(self, uses: Iterable[RecordedUse]) -> None:
        """Forget the recorded uses and record `uses` (oldest first) instead: a calibration
        read back from storage. Only the latest `keep` stay."""
        self._levels.clear()
        self._own.clear()
        self._sessions.clear()
        for use in uses:
            self._levels.append(use.level)
            self._own.append(use.own)
            self._sessions.append(use.session)
        self._sorted = None
        self._own_sorted = None

    def record(
        self, levels: Iterable[float], own: Iterable[float] | None = None, session: str = ""
    ) -> list[RecordedUse]:
        """The levels of the arms one baseline session (or one of its turns) used, and with tool
        search their own levels (`RecordedUse.own`) beside the levels at which they are
        offered (`session_search_levels`); `session` names the session (searches are priced
        per session recorded). Returns the uses recorded."""
        mine = list(levels)
        theirs = mine if own is None else list(own)
        if len(theirs) != len(mine):
            raise ValueError(f"{len(mine)} levels but {len(theirs)} own levels")
        self._levels.extend(mine)
        self._own.extend(theirs)
        self._sessions.extend([session] * len(mine))
        self._sorted = None
        self._own_sorted = None
        return [RecordedUse(a, b, session) for a, b in zip(mine, theirs, strict=True)]

    def priced_threshold(self, target: float, levels: FloatArray, costs: IntArray) -> float | None:
        """With tool search (`pricing` set): of the thresholds whose calibrated recall meets
        `target` (`threshold`), the one of least estimated cost for this request's arms
        (`levels`, `costs`): the tokens kept at `pricing.keep`, plus the searches at
        `pricing.search`, one per recorded use charged a search (own level at or above the
        threshold, `search_charges`: one per turn that lacks a tool it uses) per recorded
        session. Without pricing, `threshold`."""
        least = self.threshold(target)
        if least is None or self.pricing is None or not self._own:
            return least
        if self._own_sorted is None:
            self._own_sorted = sorted(self._own)
        own = self._own_sorted
        uses = len(own) / max(1, len(set(self._sessions)))
        finite = np.isfinite(levels) & (levels >= least)
        order = np.flatnonzero(finite)
        order = order[np.argsort(levels[order], kind="stable")]
        best, best_cost = least, math.inf
        kept = float(costs[levels < least].sum())
        candidates = [least, *(float(levels[i]) * (1.0 + 1e-9) + 1e-12 for i in order)]
        extra = [0.0, *(float(c) for c in costs[order])]
        for t, add in zip(candidates, extra, strict=True):
            kept += add
            deferred = (len(own) - bisect.bisect_left(own, t)) / len(own)
            cost = self.pricing.keep * kept + self.pricing.search * uses * deferred
            if cost < best_cost - 1e-9:
                best, best_cost = t, cost
        return best

    def threshold(self, target: float) -> float | None:
        """The threshold below which a set keeps `target` of the arms used, by the recorded
        levels (split conformal: above the ceil((n + 1) x target)-th smallest level;
        EVERY_ARM when that level is one no set reaches); None while too few levels are
        recorded for it (the caller falls back to the uncalibrated estimate)."""
        n = len(self._levels)
        k = math.ceil((n + 1) * target - 1e-9)
        if n == 0 or k > n:
            return None
        if self._sorted is None:
            self._sorted = sorted(self._levels)
        level = self._sorted[k - 1]
        if not math.isfinite(level):
            return EVERY_ARM
        return level * (1.0 + 1e-9) + 1e-12


@dataclass(slots=True)
class _Opening:
    """A baseline session's ranking at its opening and, with tool search, its replay."""

    position: dict[str, int]
    means: FloatArray
    rank: FloatArray
    forced: BoolArray
    search: BM25Index | None
    levels: FloatArray | None
    tokens: float
    """Every offered arm's tokens: what the session's requests offered beside the rest."""
    turns: deque[tuple[IntArray, FloatArray, list[int]]] = field(
        default_factory=lambda: deque(maxlen=REPLAYED_TURNS)
    )
    """The turns replayed so far: the arms the search scored above 0 for the turn's message,
    their scores, and the arms the turn used."""


class SessionLevels:
    """A learner's calibration and the baseline sessions waiting to report what they used:
    each one's ranking at its opening (arm ids, means, ranks, forced arms), by session key,
    the latest `keep` sessions (at 1,000 arms about 24 KB each; with tool search about 8 KB
    more, and the latest REPLAYED_TURNS turns of the session's search replay). `traffic`
    prices the search from the runs reported."""

    def __init__(self, keep: int = 256) -> None:
        self.calibration = RecallCalibration()
        self.traffic = SessionTraffic()
        self._keep = keep
        self._open: dict[str, _Opening] = {}
        self._lock = threading.Lock()

    def opened(
        self,
        key: str,
        ids: Sequence[str],
        means: FloatArray,
        rank: FloatArray,
        forced: BoolArray,
        search: BM25Index | None = None,
        tokens: float = 0.0,
    ) -> None:
        """A baseline session `key` was decided: how its arms ranked at its opening, and where
        the provider has tool search, the search's index of the arms (BM25 over their texts,
        as the providers document it) to replay it on the session's turns; `tokens`, its
        arms' tokens (every one offered)."""
        levels = arm_levels(means, rank, forced) if search is not None else None
        position = {a: i for i, a in enumerate(ids)}
        opening = _Opening(position, means, rank, forced, search, levels, tokens)
        with self._lock:
            self._open.pop(key, None)
            self._open[key] = opening
            while len(self._open) > self._keep:
                del self._open[next(iter(self._open))]

    def observed(
        self, key: str, used: Iterable[str], message: str | None = None
    ) -> list[RecordedUse]:
        """A run of session `key` used these arms: when the session is an open baseline
        session, their levels calibrate the target. Opened with tool search and given the
        turn's `message`, the turn joins the session's replay and each use is recorded at the
        threshold above which the session's searches offer it, and its turn's search charged
        (`session_search_levels`, `search_charges`); else at its level (`inclusion_levels`).
        Returns the uses recorded."""
        hit = self._open.get(key)
        if hit is None:
            return []
        mine = [hit.position[a] for a in used if a in hit.position]
        if not mine:
            return []
        if hit.search is None or hit.levels is None or message is None:
            levels = inclusion_levels(hit.means, hit.rank, hit.forced, mine)
            return self.calibration.record(levels, session=key)
        scores = hit.search.scores(words(message))
        hits = np.flatnonzero(scores > 0.0)
        with self._lock:
            hit.turns.append((hits, scores[hits], sorted(mine)))
            replayed = list(hit.turns)
        size = len(hit.levels)
        turns: list[tuple[FloatArray, Sequence[int]]] = []
        for where, values, turn_used in replayed:
            dense = np.zeros(size)
            dense[where] = values
            turns.append((dense, turn_used))
        reached, there = session_search_levels(hit.levels, turns, SEARCH_TOP)
        return self.calibration.record(reached, search_charges(there), key)

    def ran(self, key: str, prompt_tokens: float = 0.0, baseline: bool = False) -> None:
        """A run of session `key` whose request read `prompt_tokens` (`SessionTraffic.ran`):
        a baseline session's when the run says so or this learner opened it as one."""
        with self._lock:
            opened = self._open.get(key)
            selected = not baseline and opened is None
            offered = opened.tokens if opened is not None else 0.0
            self.traffic.ran(key, prompt_tokens, selected, offered)
