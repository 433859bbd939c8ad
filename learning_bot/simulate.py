"""`learning-bot simulate`: a synthetic agent workload run through the real service, so a new
user can watch posteriors form without an agent."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from engine.config import Phase
from engine.errors import Conflict, InvalidInput
from engine.posterior import now_ms
from engine.selection import ArmSet
from engine.service import LearningService
from engine.simulation import make_workload

BATCH = 50


@dataclass(frozen=True)
class SimulationResult:
    traces: int
    arms: int
    baseline_runs: int
    selected_runs: int
    switched_to_active: bool
    token_savings_percent: float | None


def simulate(
    service: LearningService,
    *,
    traces: int = 300,
    arms: int = 30,
    seed: int = 0,
    force: bool = False,
    progress: Callable[[int], None] | None = None,
) -> SimulationResult:
    """Run `traces` simulated agent runs over `arms` arms: select, run, observe."""
    if not 1 <= traces <= 1_000_000:
        raise InvalidInput("--traces must be from 1 to 1,000,000")
    if not 1 <= arms <= 10_000:
        raise InvalidInput("--arms must be from 1 to 10,000")
    page, total = service.traces(limit=1)
    if total and page and page[0].provider != "simulated" and not force:
        raise Conflict(
            f"learner '{service.learner}' already holds traces from a real agent; simulate "
            "into another learner (--learner demo) or pass --force"
        )
    switched = False
    if service.phase() is Phase.PASSIVE:
        service.set_phase(Phase.ACTIVE, actor="simulate", bootstrap=True)
        switched = True
    workload = make_workload(arms, seed=seed)
    arm_set = ArmSet(workload.arms)
    rng = np.random.default_rng(seed)
    start = now_ms() - traces * 60_000
    nonce = now_ms()
    batch = []
    baseline = 0
    for step in range(traces):
        selection = service.select(arm_set)
        baseline += selection.is_baseline
        conversational, used = workload.draw_usage(step, rng)
        batch.append(
            workload.report(
                f"sim-{nonce}-{step}",
                selection.selected,
                used,
                conversational,
                is_baseline=selection.is_baseline,
                conversation="sim:general",
                timestamp=start + step * 60_000,
            )
        )
        if len(batch) >= BATCH or step == traces - 1:
            service.observe_many(batch)
            if progress is not None:
                progress(len(batch))
            batch = []
    summary = service.summary()
    return SimulationResult(
        traces,
        arms,
        baseline,
        traces - baseline,
        switched,
        summary.token_savings_percent,
    )


def progress_bar(total: int) -> Callable[[int], None]:
    """A tqdm bar on stderr (silent when stderr is not a terminal)."""
    from tqdm import tqdm

    bar = tqdm(total=total, unit="run", file=sys.stderr, disable=not sys.stderr.isatty())

    def step(n: int) -> None:
        bar.update(n)
        if bar.n >= total:
            bar.close()

    return step
