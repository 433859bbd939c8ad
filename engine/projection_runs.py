"""The runs a projection of going active replays (engine.projection): the usable ones (naming
a session, full feedback, after the last full reset) within the bound of runs read, each with
its offer as an ArmSet of the projection's inventory, which arms the model used, and the
rest of its prompt beside the tools; and the runs left out, by why."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import TYPE_CHECKING

from learning_bot.engine.arms import Arm
from learning_bot.engine.config import LearningConfig, Phase
from learning_bot.engine.cost import PriceTable, TokenPrices
from learning_bot.engine.errors import InvalidInput
from learning_bot.engine.records import RunRecord
from learning_bot.engine.store_records import ResetRecord

if TYPE_CHECKING:  # numpy is imported on first use, not at start-up
    from learning_bot.engine.inventory import ArmSet, BoolArray, IntArray


@dataclass(slots=True)
class UsableRun:
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


class RunInventory:
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


def prepare(
    records: Iterable[RunRecord],
    inventory: RunInventory,
    config: LearningConfig,
    prices: PriceTable,
    resets: Sequence[ResetRecord],
    limit: int,
) -> tuple[list[UsableRun], dict[str, int], bool, list[tuple[int, tuple[str, ...]]]]:
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
    out: list[UsableRun] = []
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
            UsableRun(
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
