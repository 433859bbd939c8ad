"""What going active would have kept and saved, from recorded runs (SPEC section 4b).

A passive learner includes every component in every run, and each recorded run says which
components the model used (referenced): full feedback. `project` replays the active policy over
such runs, oldest first, with a fresh in-memory learner that learns as it goes as the service
does: each run's selection is made by the service's own session code (engine.session_selection's
SessionSelector over an in-memory store: sets kept, grown, reviewed and redrawn as the service
does, idle windows counted in the runs' own time) drawing with engine.selection and the
exploration bound on the replay's posteriors; each included arm of an unguarded run is
rewarded 1 when the model used it, else 0, forgetting by the settings' half-life; and the run
is reported back to the session code with the usage the replay priced (a cache miss, a tool
the model needed). It reports, per token budget:

- recall: the share of the components the model used that the replayed prompt had;
- prompt tokens and prompt cost saved against the same runs with every component, the cost
  under the provider's prompt cache: each run's prompt is its tools in the session's order,
  then the rest of the prompt (its recorded prompt tokens less the recorded tools' tokens),
  which grows turn by turn as a conversation does; a run within `cache_ttl_seconds` of its
  session's previous one reads the prefix the two share and writes the rest (the model of
  engine.prompt_cache), priced per provider and model (engine.cost) as engine.savings prices
  sessions; when no run reports cache usage, every token is priced as uncached input;

each with a 95% interval over sessions (the unit the study randomises: a ratio of sums with its
variance by linearisation). Figures are those of the replay's selected sessions: its baseline
sessions (the `baselineRate` share) offer every component, as status leaves them out of what
it reports as kept.

Which runs: only runs that name a session (the saving is measured per session), and only
full-feedback ones: runs of the passive phase and runs of the baseline group (a selected run of
an active learner says nothing of the components it left out). Runs before the last full reset
are left out; a reset of some arms starts their posteriors again when the replay reaches it.
The latest `limit` runs are read, a session cut by that bound losing its runs up to its next
idle gap (its cached prefix would not be known). Reads nothing but its arguments and writes
nothing; memory is bounded by `limit` runs; `cancel` and `deadline` are checked per session.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from operator import itemgetter
from typing import TYPE_CHECKING, Any, cast

from learning_bot.engine.arms import Arm, ArmType
from learning_bot.engine.config import LearningConfig, Phase
from learning_bot.engine.cost import PriceTable, TokenPrices
from learning_bot.engine.errors import InvalidInput
from learning_bot.engine.ports import ResetRecord
from learning_bot.engine.records import RunRecord

if TYPE_CHECKING:  # numpy is imported on first use, not at start-up
    from learning_bot.engine.inventory import ArmSet, BoolArray, IntArray
    from learning_bot.engine.ports import Store
    from learning_bot.engine.selection import Selection
    from learning_bot.engine.session_sets import SessionDecisions, SessionSet

DEFAULT_RUNS = 2_000
"""Runs a projection reads at most: the latest this many, sessions kept together."""
MAX_RUNS = 100_000
MIN_RUNS = 100
MIN_SESSIONS = 20
"""Runs and sessions a projection needs before it gives figures."""
RECALL_GOAL = 0.95
"""The recall the suggested setting reaches."""
BUDGET_FACTORS = (0.5, 0.75, 1.5, 2.0)
"""The alternative budgets, as multiples of the current one."""
Z95 = 1.959963984540054


@dataclass(frozen=True, slots=True)
class SettingProjection:
    """The figures of one setting: recall as a fraction, savings in percent, each with its 95%
    interval over sessions. `cost_savings_percent` and its interval are None when the runs
    report no prompt tokens."""

    token_budget: int
    recall: float
    recall_low: float
    recall_high: float
    cost_savings_percent: float | None
    cost_low: float | None
    cost_high: float | None
    token_savings_percent: float
    tokens_low: float
    tokens_high: float
    current: bool = False

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "tokenBudget": self.token_budget,
            "recall": _round(self.recall, 4),
            "recallLow": _round(self.recall_low, 4),
            "recallHigh": _round(self.recall_high, 4),
            "promptCostSavingsPercent": _round(self.cost_savings_percent, 1),
            "costLow": _round(self.cost_low, 1),
            "costHigh": _round(self.cost_high, 1),
            "tokenSavingsPercent": _round(self.token_savings_percent, 1),
            "tokensLow": _round(self.tokens_low, 1),
            "tokensHigh": _round(self.tokens_high, 1),
        }
        if self.current:
            out["current"] = True
        return out

    @classmethod
    def from_json(cls, data: Any) -> SettingProjection:
        """A setting as `to_json` wrote it (a projection stored at the switch to active)."""
        if not isinstance(data, dict):
            raise InvalidInput("projection setting must be an object")

        def number(key: str) -> float | None:
            value = data.get(key)
            if value is None:
                return None
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise InvalidInput(f"projection setting {key} must be a number")
            return float(value)

        budget = data.get("tokenBudget")
        if isinstance(budget, bool) or not isinstance(budget, int):
            raise InvalidInput("projection setting tokenBudget must be a whole number")
        return cls(
            budget,
            number("recall") or 0.0,
            number("recallLow") or 0.0,
            number("recallHigh") or 0.0,
            number("promptCostSavingsPercent"),
            number("costLow"),
            number("costHigh"),
            number("tokenSavingsPercent") or 0.0,
            number("tokensLow") or 0.0,
            number("tokensHigh") or 0.0,
            bool(data.get("current", False)),
        )


@dataclass(frozen=True, slots=True)
class Projection:
    """The settings' figures over `runs` runs in `sessions` sessions (oldest first), or
    `reason` instead of them; `left_out` counts the runs read but not used, by why."""

    runs: int
    sessions: int
    settings: tuple[SettingProjection, ...] = ()
    suggested: SettingProjection | None = None
    reason: str | None = None
    left_out: tuple[tuple[str, int], ...] = ()

    @property
    def current(self) -> SettingProjection | None:
        return next((s for s in self.settings if s.current), None)

    def to_json(self) -> dict[str, Any]:
        """`{"runs", "sessions", "settings": [...], "suggested": {...} | null}` (the shape of
        `GET .../phase`'s `projection`), `leftOut` beside them."""
        return {
            "runs": self.runs,
            "sessions": self.sessions,
            "settings": [s.to_json() for s in self.settings],
            "suggested": self.suggested.to_json() if self.suggested is not None else None,
            "leftOut": dict(self.left_out),
        }


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


# -- the runs ----------------------------------------------------------------------------------


@dataclass(slots=True)
class _Run:
    """One usable run, as the replays read it."""

    key: str
    at: int
    """ms since the epoch."""
    arm_set: ArmSet
    positions: IntArray
    """Each offered arm's position in the projection's inventory."""
    referenced: BoolArray
    """Which offered arms the model used (all False for a guarded run)."""
    learns: bool
    """Whether the run updates posteriors (no guard: not aborted, errored or conversational)."""
    rest: int
    """Prompt tokens beside the tools."""
    prices: TokenPrices
    provider: str
    model: str


LEFT_OUT_WHY = {
    "noSession": "name no session",
    "selected": "are selected runs of the active phase (they say nothing of what they left out)",
    "beforeReset": "come before the last full reset",
    "cut": "belong to a session the bound of runs cut",
    "noArms": "offer no component",
}


def _window(
    runs: Iterable[RunRecord], limit: int, idle_ms: int, counts: dict[str, int]
) -> list[RunRecord]:
    """The latest `limit` runs, less those that continue a session whose earlier runs were
    cut (up to the session's next idle gap)."""
    kept: deque[RunRecord] = deque()
    evicted: dict[str, int] = {}
    last_at: int | None = None
    for run in runs:
        if last_at is not None and run.timestamp < last_at:
            raise InvalidInput("runs must come in time order (oldest first)")
        last_at = run.timestamp
        kept.append(run)
        if len(kept) > limit:
            old = kept.popleft()
            evicted[old.session_key] = old.timestamp
    out = []
    for run in kept:
        cut = evicted.get(run.session_key)
        if cut is not None:
            if run.timestamp - cut <= idle_ms:
                evicted[run.session_key] = run.timestamp
                counts["cut"] = counts.get("cut", 0) + 1
                continue
            del evicted[run.session_key]
        out.append(run)
    return out


_ARM_ID = itemgetter(0)
_INCLUDED = itemgetter(2)
_REFERENCED = itemgetter(3)
_TOKEN_COST = itemgetter(4)
"""Fields of an ArmOutcomeRecord (a NamedTuple), read at C speed."""


class _Inventory:
    """The arms of the projection (the inventory given, then any other a run offered) and
    the ArmSets the runs offered (one per distinct offer)."""

    def __init__(self, arms: Sequence[Arm] | None) -> None:
        self.arms: list[Arm] = []
        self.index: dict[str, int] = {}
        self._sets: dict[tuple[tuple[str, ...], tuple[int, ...]], tuple[ArmSet, IntArray]] = {}
        for arm in arms or ():
            self._add(arm)

    def _add(self, arm: Arm) -> int:
        at = self.index.get(arm.id)
        if at is None:
            at = self.index[arm.id] = len(self.arms)
            self.arms.append(arm)
        return at

    def offer(self, record: RunRecord) -> tuple[ArmSet, IntArray, tuple[int, ...] | None]:
        """The ArmSet of the arms `record` included, their positions, and which of the
        record's arms they are (None: all of them)."""
        import numpy as np

        from learning_bot.engine.inventory import ArmSet

        arms = record.arms
        ids = tuple(map(_ARM_ID, arms))
        which: tuple[int, ...] | None = None
        if all(map(_INCLUDED, arms)) and len(frozenset(ids)) == len(ids):
            key = (ids, tuple(map(_TOKEN_COST, arms)))  # every arm offered: the usual run
        else:
            seen: set[str] = set()
            chosen = []
            for i, a in enumerate(arms):
                if a.included and a.arm_id not in seen:
                    seen.add(a.arm_id)
                    chosen.append(i)
            which = tuple(chosen)
            key = (tuple(ids[i] for i in which), tuple(arms[i].token_cost for i in which))
        found = self._sets.get(key)
        if found is None:
            made = []
            for arm_id, cost in zip(*key, strict=True):
                known = self.index.get(arm_id)
                arm = self.arms[known] if known is not None else None
                if arm is None or arm.token_cost != cost:
                    arm = Arm(arm_id, cost, arm.label if arm is not None else "")
                made.append(arm)
                if known is None:
                    self._add(arm)
            arm_set = ArmSet(made)
            positions = np.array([self.index[a] for a in key[0]], dtype=np.int64)
            found = self._sets[key] = (arm_set, positions)
        return found[0], found[1], which


def _prepare(
    records: Iterable[RunRecord],
    inventory: _Inventory,
    config: LearningConfig,
    prices: PriceTable,
    resets: Sequence[ResetRecord],
    limit: int,
) -> tuple[list[_Run], dict[str, int], bool, list[tuple[int, tuple[str, ...]]]]:
    """The usable runs, the runs left out by why, whether any run reported cache usage, and
    the partial resets to replay (time, arm ids)."""
    import numpy as np

    counts: dict[str, int] = {}
    live = [r for r in resets if not r.undone]
    full_at = max((r.at for r in live if r.all_arms), default=None)
    partial = sorted((r.at, r.arm_ids) for r in live if not r.all_arms)
    idle_ms = max(0, config.session_idle_seconds) * 1000

    def usable(stream: Iterable[RunRecord]) -> Iterable[RunRecord]:
        for run in stream:
            why = None
            if not run.session_key:
                why = "noSession"
            elif not any(a.included for a in run.arms):
                why = "noArms"
            elif full_at is not None and run.timestamp < full_at:
                why = "beforeReset"
            elif run.phase is Phase.ACTIVE and not run.is_baseline:
                why = "selected"
            if why is None:
                yield run
            else:
                counts[why] = counts.get(why, 0) + 1

    price_cache: dict[tuple[str, str], TokenPrices] = {}

    def price_of(provider: str, model: str) -> TokenPrices:
        found = price_cache.get((provider, model))
        if found is None:
            found = price_cache[(provider, model)] = prices.prices_for(provider, model)
        return found

    cached = False
    out: list[_Run] = []
    for record in _window(usable(records), limit, idle_ms, counts):
        arm_set, positions, which = inventory.offer(record)
        learns = record.guard is None and not record.aborted and record.error is None
        count = len(arm_set)
        if not learns:
            referenced = np.zeros(count, dtype=bool)
        elif which is None:
            referenced = np.fromiter(map(_REFERENCED, record.arms), dtype=bool, count=count)
        else:
            arms = record.arms
            referenced = np.fromiter((arms[i].referenced for i in which), bool, count=count)
        usage = record.usage
        cached = cached or usage.cache_read > 0 or usage.cache_write > 0
        prompt = usage.input + usage.cache_read + usage.cache_write
        rest = max(0, prompt - arm_set.total_cost) if prompt else 0
        out.append(
            _Run(
                record.session_key,
                record.timestamp,
                arm_set,
                positions,
                referenced,
                learns,
                rest,
                price_of(record.provider, record.model),
                record.provider,
                record.model,
            )
        )
    return out, counts, cached, partial


# -- the cache ---------------------------------------------------------------------------------


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


# -- the replay --------------------------------------------------------------------------------


@dataclass(slots=True)
class _Totals:
    used: int = 0
    kept: int = 0
    cost: float = 0.0
    full_cost: float = 0.0
    tokens: int = 0
    full_tokens: int = 0
    baseline: bool = False


class _Stopped(Exception):
    pass


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


def _replay(
    runs: Sequence[_Run],
    inventory: _Inventory,
    config: LearningConfig,
    partial: Sequence[tuple[int, tuple[str, ...]]],
    *,
    seed: int,
    ttl_seconds: float,
    caching: bool,
    check: Callable[[], None],
    prices: PriceTable,
) -> dict[str, _Totals]:
    """Per session key, what the policy of `config` would have kept and cost: each run's
    selection made by the service's own session code (engine.session_selection's
    SessionSelector over an in-memory store and the replay's posteriors), then observed as
    the service observes it (posteriors, the session's cache reads, the tools it needed)."""
    import numpy as np

    from learning_bot.engine.exploration import ExplorationBound, OwedTries
    from learning_bot.engine.forgetting import keep_factor
    from learning_bot.engine.inventory import ArmSet, PosteriorArrays
    from learning_bot.engine.observation import ReportedArm, RunReport, ToolCall, Usage
    from learning_bot.engine.selection import select_arms
    from learning_bot.engine.session_review import CACHE_MISS_SHARE
    from learning_bot.engine.session_selection import SessionRequest, SessionSelector

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
    totals: dict[str, _Totals] = {}
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
            total = totals[key] = _Totals(
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


def _ratio(num: Sequence[float], den: Sequence[float]) -> tuple[float, float, float]:
    """sum(num) / sum(den) over sessions, with its 95% interval (linearisation)."""
    total = sum(den)
    if not total:
        return 1.0, 1.0, 1.0
    r = sum(num) / total
    m = len(den)
    if m < 2:
        return r, r, r
    mean = total / m
    spread = sum(((x - r * d) / mean) ** 2 for x, d in zip(num, den, strict=True))
    se = math.sqrt(spread / (m * (m - 1)))
    return r, r - Z95 * se, r + Z95 * se


def _figures(
    budget: int, totals: Iterable[_Totals], current: bool, priced: bool
) -> SettingProjection:
    chosen = [t for t in totals if not t.baseline]
    recall, r_low, r_high = _ratio([t.kept for t in chosen], [t.used for t in chosen])
    cost, c_low, c_high = _ratio([t.cost for t in chosen], [t.full_cost for t in chosen])
    tokens, t_low, t_high = _ratio([t.tokens for t in chosen], [t.full_tokens for t in chosen])
    return SettingProjection(
        budget,
        recall,
        max(0.0, r_low),
        min(1.0, r_high),
        100.0 * (1.0 - cost) if priced else None,
        100.0 * (1.0 - c_high) if priced else None,
        100.0 * (1.0 - c_low) if priced else None,
        100.0 * (1.0 - tokens),
        100.0 * (1.0 - t_high),
        100.0 * (1.0 - t_low),
        current,
    )


def _nice(value: float) -> int:
    """A budget near `value` that reads well: to 2 significant figures."""
    if value < 10:
        return max(1, round(value))
    step = 10 ** (int(math.log10(value)) - 1)
    return int(round(value / step) * step)


def alternative_budgets(current: int, largest_offer: int) -> list[int]:
    """The budgets a projection compares: the current one and BUDGET_FACTORS of it, less
    those above the largest offer (they keep everything, as the largest one below does)."""
    out = {current}
    for factor in BUDGET_FACTORS:
        budget = _nice(current * factor)
        if budget >= 1 and (budget <= largest_offer or factor < 1):
            out.add(budget)
    return sorted(out)


def project(
    runs: Iterable[RunRecord],
    arms: Sequence[Arm] | None,
    config: LearningConfig,
    *,
    budgets: Sequence[int] | None = None,
    prices: PriceTable | None = None,
    resets: Sequence[ResetRecord] = (),
    limit: int = DEFAULT_RUNS,
    seed: int = 0,
    cache_ttl_seconds: float = 300.0,
    cancel: threading.Event | None = None,
    deadline: float | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> Projection:
    """Replay the active policy of `config` over `runs` (oldest first) at its token budget
    and at `budgets` (None: BUDGET_FACTORS of it), each replay with the same `seed`.

    `arms`: the inventory (None: the arms the runs offered, as recorded); `prices`: the price
    table (None: the built-in one); `resets`: the learner's resets (the last full one drops the
    runs before it, the others restart their arms' posteriors when reached); `limit`: the
    latest runs read; `cache_ttl_seconds`: the provider's cache lifetime. Stops, giving a
    `reason`, when `cancel` is set or `clock()` passes `deadline` (checked per session)."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_RUNS:
        raise InvalidInput(f"limit must be a whole number from 1 to {MAX_RUNS:,}")
    if not cache_ttl_seconds >= 0:
        raise InvalidInput("cache_ttl_seconds must be >= 0")
    for b in budgets or ():
        if isinstance(b, bool) or not isinstance(b, int) or b < 1:
            raise InvalidInput(f"budgets must be whole numbers >= 1, got {b!r}")
    prices = prices if prices is not None else PriceTable()
    inventory = _Inventory(arms)
    usable, counts, cached, partial = _prepare(runs, inventory, config, prices, resets, limit)
    left_out = tuple(sorted(counts.items()))
    keys = {run.key for run in usable}
    if len(usable) < MIN_RUNS or len(keys) < MIN_SESSIONS:
        why = "; ".join(f"{n:,} {LEFT_OUT_WHY[k]}" for k, n in left_out)
        return Projection(
            len(usable),
            len(keys),
            reason=(
                f"only {len(usable):,} usable runs in {len(keys):,} sessions so far; a "
                f"projection needs {MIN_RUNS} runs in {MIN_SESSIONS} sessions recorded with "
                "every component (passive phase or baseline sessions)"
                + (f" (left out: {why})" if why else "")
            ),
            left_out=left_out,
        )

    def check() -> None:
        if cancel is not None and cancel.is_set():
            raise _Stopped("cancelled")
        if deadline is not None and clock() > deadline:
            raise _Stopped("stopped at its time limit")

    active = replace(config, phase=Phase.ACTIVE, enabled=True)
    current = config.token_budget
    largest = max(run.arm_set.total_cost for run in usable)
    chosen = sorted({current, *budgets} if budgets else alternative_budgets(current, largest))
    priced = any(run.rest for run in usable)
    settings = []
    try:
        for budget in chosen:
            totals = _replay(
                usable,
                inventory,
                replace(active, token_budget=budget),
                partial,
                seed=seed,
                ttl_seconds=cache_ttl_seconds,
                caching=cached,
                check=check,
                prices=prices,
            )
            settings.append(_figures(budget, totals.values(), budget == current, priced))
    except _Stopped as stop:
        return Projection(
            len(usable), len(keys), reason=f"the projection was {stop}", left_out=left_out
        )
    reaching = [s for s in settings if s.recall >= RECALL_GOAL]
    suggested = max(
        reaching,
        key=lambda s: (
            s.cost_savings_percent
            if s.cost_savings_percent is not None
            else s.token_savings_percent
        ),
        default=None,
    )
    return Projection(len(usable), len(keys), tuple(settings), suggested, left_out=left_out)
