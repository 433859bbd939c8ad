"""The replay of a projection of going active (engine.projection): the active policy over
the usable runs, oldest first, with a fresh in-memory learner that learns as it goes as the
service does. Each run's selection is made by the service's own session code
(engine.session_selection's SessionSelector over an in-memory store of session sets) drawing
with engine.selection and the exploration bound on the replay's posteriors; each run is then
priced through a model of the provider's prompt cache, and observed as the service observes it
(posteriors, the session's cache reads, the tools it needed)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, cast

from learning_bot.engine.arms import ArmType
from learning_bot.engine.config import LearningConfig
from learning_bot.engine.cost import PriceTable, TokenPrices
from learning_bot.engine.projection_report import SessionTotals
from learning_bot.engine.projection_runs import RunInventory, UsableRun

if TYPE_CHECKING:  # numpy is imported on first use, not at start-up
    from learning_bot.engine.inventory import ArmSet, IntArray
    from learning_bot.engine.ports import Store
    from learning_bot.engine.selection import Selection
    from learning_bot.engine.session_sets import SessionDecisions, SessionSet


class _PromptCache:
    """engine.prompt_cache's model, kept per session as the last prompt's tools and the size
    of its rest, so a long session costs nothing per turn: the tools are one block each, the
    rest a conversation that grows (a smaller rest than the last one starts another)."""

    __slots__ = ("_last", "caching", "ttl_ms")

    def __init__(self, ttl_seconds: float, caching: bool) -> None:
        self.ttl_ms = ttl_seconds * 1000.0
        self.caching = caching
        self._last: dict[str, tuple[int, tuple[str, ...], int]] = {}

    def request(
        self, key: str, at: int, tools: tuple[str, ...], costs: list[int], rest: int
    ) -> tuple[int, int, int]:
        """(uncached input, cache read, cache write) of the prompt."""
        total = sum(costs) + rest
        if not self.caching:
            return total, 0, 0
        last = self._last.get(key)
        read = 0
        if last is not None:
            then, before, before_rest = last
            if 0 <= at - then <= self.ttl_ms:
                if before is tools or before == tools:
                    read = sum(costs)
                    if rest >= before_rest:
                        read += before_rest
                else:
                    for a, b, cost in zip(before, tools, costs, strict=False):
                        if a != b:
                            break
                        read += cost
        self._last[key] = (at, tools, rest)
        return 0, read, total - read


def _cost(usage: tuple[int, int, int], prices: TokenPrices) -> float:
    return usage[0] + usage[1] * prices.cache_read + usage[2] * prices.cache_write


class _MemorySessions:
    """The session sets of one replay, in memory: the SessionSets port as storage keeps it
    (a claim stores the set; a save is a compare-and-set on the version, which it raises)."""

    def __init__(self) -> None:
        self._sets: dict[str, SessionSet] = {}

    def session_set(self, learner_id: int, key: str) -> SessionSet | None:
        return self._sets.get(key)

    def claim_session_set(self, learner_id: int, candidate: SessionSet, idle_ms: int) -> SessionSet:
        held = self._sets.get(candidate.key)
        stored = replace(candidate, version=0 if held is None else held.version + 1)
        self._sets[candidate.key] = stored
        return stored

    def save_session_set(self, learner_id: int, changed: SessionSet) -> bool:
        held = self._sets.get(changed.key)
        if held is None or held.version != changed.version:
            return False
        self._sets[changed.key] = replace(changed, version=changed.version + 1)
        return True

    def session_decisions(self, learner_id: int) -> SessionDecisions:
        from learning_bot.engine.session_sets import SessionDecisions

        return SessionDecisions()  # status's count; a replay reports its own figures


class _ArraysView:
    """What a session review reads of the replay's learner (engine.session_review.LearnerView):
    its arrays' pulls and means, and the mean session length of the runs replayed so far."""

    def __init__(self, index: dict[str, int], alpha: Any, beta: Any, pulls: Any) -> None:
        self.index = index
        self.alpha = alpha
        self.beta = beta
        self.pulls_of = pulls
        self.runs = 0
        self.keys: set[str] = set()

    def pulls(self, arm_id: str) -> int:
        at = self.index.get(arm_id)
        return 0 if at is None else int(self.pulls_of[at])

    def mean(self, arm_id: str) -> float:
        at = self.index.get(arm_id)
        if at is None:
            return 0.5
        return float(self.alpha[at] / (self.alpha[at] + self.beta[at]))

    def observations(self) -> int:
        return int(self.pulls_of.sum())

    def mean_session_turns(self) -> float | None:
        return self.runs / len(self.keys) if self.keys else None


def replay_policy(
    runs: Sequence[UsableRun],
    inventory: RunInventory,
    config: LearningConfig,
    partial: Sequence[tuple[int, tuple[str, ...]]],
    *,
    seed: int,
    ttl_seconds: float,
    caching: bool,
    check: Callable[[], None],
    prices: PriceTable,
) -> dict[str, SessionTotals]:
    """Per session key, what the policy of `config` would have kept and cost: each run's
    selection made by the service's own session code (engine.session_selection's
    SessionSelector over an in-memory store and the replay's posteriors), then observed as
    the service observes it (posteriors, the session's cache reads, the tools it needed)."""
    import numpy as np

    from learning_bot.engine.exploration import ExplorationBound, OwedTries
    from learning_bot.engine.forgetting import keep_factor
    from learning_bot.engine.inventory import ArmSet, PosteriorArrays
    from learning_bot.engine.observation import ReportedArm, RunReport, ToolCall
    from learning_bot.engine.selection import select_arms
    from learning_bot.engine.session_review import CACHE_MISS_SHARE
    from learning_bot.engine.session_selection import SessionRequest, SessionSelector
    from learning_bot.engine.usage import Usage

    everything = ArmSet(inventory.arms)
    prior_alpha = np.array(everything.prior_alpha, dtype=np.float64)
    prior_beta = np.array(everything.prior_beta, dtype=np.float64)
    alpha = prior_alpha.copy()
    beta = prior_beta.copy()
    pulls = np.zeros(len(everything), dtype=np.int64)
    keep = keep_factor(config.half_life or None)
    rng = np.random.default_rng(seed)
    owed = OwedTries(ExplorationBound())
    cache = _PromptCache(ttl_seconds, caching)
    full_cache = _PromptCache(ttl_seconds, caching)
    view = _ArraysView(inventory.index, alpha, beta, pulls)
    now = [0]
    selector = SessionSelector(
        cast("Store", _MemorySessions()),
        lambda: 0,
        0.0,
        lambda: 0.0,
        lambda: now[0],
        view,
        lambda: prices,
    )
    totals: dict[str, SessionTotals] = {}
    resets = list(partial)
    positions_of: dict[int, IntArray] = {}
    for run in runs:
        positions_of[id(run.arm_set)] = run.positions
    answers: dict[tuple[int, tuple[str, ...], tuple[str, ...]], tuple[Any, ...]] = {}
    """Per inventory, cached ids and added ids: the cached ids' costs, the mask of both, the
    arms as reported, the added ids' tokens."""

    def draw(arm_set: ArmSet, settings: LearningConfig) -> Selection:
        g = positions_of.get(id(arm_set))
        if g is None:
            g = positions_of[id(arm_set)] = np.array(
                [inventory.index[a] for a in arm_set.ids], dtype=np.int64
            )
        post = PosteriorArrays(alpha[g], beta[g], pulls[g])
        chosen = select_arms(arm_set, post, settings, rng, force=owed.mask(arm_set))
        owed.included(arm_set, chosen.mask)
        return chosen

    for n, run in enumerate(runs):
        while resets and resets[0][0] <= run.at:
            _, arm_ids = resets.pop(0)
            gone = [inventory.index[a] for a in arm_ids if a in inventory.index]
            alpha[gone] = beta[gone] = prior_alpha[gone] = prior_beta[gone] = 1.0
            pulls[gone] = 0
        key = run.key
        arm_set = run.arm_set
        total = totals.get(key)
        if total is None or n % 256 == 0:
            check()
        now[0] = run.at
        selection = selector.select(
            key, arm_set, config, draw, request=SessionRequest(run.provider, run.model)
        )
        ids = tuple(selection.selected)
        added = tuple(selection.added)
        found = answers.get((id(arm_set), ids, added))
        if found is None:
            index = arm_set.index
            mask = np.zeros(len(arm_set), dtype=bool)
            mask[[index[a] for a in (*ids, *added)]] = True
            cost_list = arm_set.cost_list
            reported = tuple(ReportedArm(arm_set.arms[index[a]]) for a in (*ids, *added))
            found = (
                [cost_list[index[a]] for a in ids],
                mask,
                reported,
                sum(cost_list[index[a]] for a in added),
            )
            answers[(id(arm_set), ids, added)] = found
        costs, mask, reported, joined = found
        if total is None:
            total = totals[key] = SessionTotals(
                baseline=selection.is_baseline and config.session_idle_seconds > 0
            )
            view.keys.add(key)
        view.runs += 1
        # tools that joined apart from the cached prefix (`added`) are in the conversation,
        # after the turn they joined on: written once, read from then on
        usage = cache.request(key, run.at, ids, costs, run.rest + joined)
        full = full_cache.request(key, run.at, arm_set.ids, arm_set.cost_list, run.rest)
        total.cost += _cost(usage, run.prices)
        total.full_cost += _cost(full, run.prices)
        total.tokens += sum(usage)
        total.full_tokens += sum(full)
        referenced = run.referenced
        calls: tuple[ToolCall, ...] = ()
        if run.learns:
            total.used += int(referenced.sum())
            total.kept += int((referenced & mask).sum())
            g = run.positions[mask]
            r = referenced[mask].astype(np.float64)
            alpha[g] = alpha[g] * keep + prior_alpha[g] * (1.0 - keep) + r
            beta[g] = beta[g] * keep + prior_beta[g] * (1.0 - keep) + (1.0 - r)
            pulls[g] += 1
            arms = arm_set.arms
            calls = tuple(
                ToolCall(arms[i].name)
                for i in np.flatnonzero(referenced).tolist()
                if arms[i].type is ArmType.TOOL
            )
        # the session code reads a run's arms for a cache miss (less of the tools read than
        # CACHE_MISS_SHARE, something written) and for the tools it needed: only then are they
        # listed (a run's report is checked as it is built, arm by arm)
        listed = calls or (usage[2] > 0 and usage[1] < CACHE_MISS_SHARE * sum(costs))
        report = RunReport(
            f"{key}-{n}",
            (reported if listed else reported[:1]) or (ReportedArm(arm_set.arms[0], False),),
            tool_calls=calls,
            usage=Usage(input=usage[0], cache_read=usage[1], cache_write=usage[2]),
            session_key=key,
            provider=run.provider,
            model=run.model,
        )
        selector.note_runs((report,))
        if calls:
            selector.grow((report,), config)
    return totals
