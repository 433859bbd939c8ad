"""What going active would have kept and saved, from recorded runs (SPEC section 4b).

A passive learner includes every component in every run, and each recorded run says which
components the model used: full feedback. `project` replays the active policy over such runs,
in time order, learning as it goes, and reports per setting (token budget) the recall of the
components the model used, the prompt tokens and the prompt cost under the provider's cache that
selection would have given, each with a 95% interval over sessions.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from engine.arms import Arm
from engine.config import LearningConfig
from engine.cost import PriceTable
from engine.ports import ResetRecord
from engine.records import RunRecord

DEFAULT_RUNS = 2_000
"""Runs a projection reads at most: the latest this many, sessions kept together."""
MIN_RUNS = 100
MIN_SESSIONS = 20
"""Runs and sessions a projection needs before it gives figures."""
RECALL_GOAL = 0.95
"""The recall the suggested setting reaches."""


@dataclass(frozen=True, slots=True)
class SettingProjection:
    """The figures of one setting: fractions for recall, percents for savings."""

    token_budget: int
    recall: float
    recall_low: float
    recall_high: float
    cost_savings_percent: float | None
    cost_low: float | None
    cost_high: float | None
    token_savings_percent: float
    current: bool = False

    def to_json(self) -> dict[str, Any]:
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class Projection:
    """The settings' figures over `runs` runs in `sessions` sessions, or `reason` instead."""

    runs: int
    sessions: int
    settings: tuple[SettingProjection, ...] = ()
    suggested: SettingProjection | None = None
    reason: str | None = None
    left_out: dict[str, int] | None = None

    def to_json(self) -> dict[str, Any]:
        raise NotImplementedError


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
    """Replay the active policy of `config` over `runs` (oldest first)."""
    raise NotImplementedError
