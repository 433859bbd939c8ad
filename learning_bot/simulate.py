"""`learning-bot simulate`: a synthetic agent workload run through the real service, so a new
user can watch posteriors form without an agent.

Each run is selected, drawn and observed before the next is selected, as an agent's runs are,
and the inventory is larger than the token budget (as real agents' inventories are), so the
figures match the study's (bench/learning.py). With `sessions`, the runs are the turns of
multi-turn conversations (research.session_simulation) selected with their session keys and
reporting the usage a model of the provider's prompt cache bills, so status measures the
prompt-cost saving; the simulator's own figure is reported beside it. With a recall target
(the learner's `recallTarget`, or `recall_target` given to `simulate`, which sets it) the target
is reported beside the recall status estimates and the simulator's true recall over the same
runs."""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from learning_bot.engine.bounds import MAX_SEED
from learning_bot.engine.config import Phase
from learning_bot.engine.errors import Conflict, InvalidInput
from learning_bot.engine.inventory import ArmSet
from learning_bot.engine.posterior import now_ms
from learning_bot.engine.service import RECALL_WINDOW, LearningService
from learning_bot.engine.usage import Usage
from learning_bot.research.session_simulation import (
    EveryArm,
    ServiceTurns,
    Session,
    SessionRun,
    SimulatedClock,
    draw_sessions,
    run_sessions,
    true_saving,
)
from learning_bot.research.simulation import Workload, make_workload


@dataclass(frozen=True)
class SimulationResult:
    traces: int
    arms: int
    baseline_runs: int
    selected_runs: int
    switched_to_active: bool
    token_savings_percent: float | None
    inventory_tokens: int = 0
    """Token cost of every arm of the simulated inventory."""
    token_budget: int = 0
    prompt_savings_percent: float | None = None
    """What status reports: selected runs' prompt tokens against every offered arm's."""
    true_prompt_savings_percent: float | None = None
    """The same, counted by the simulation over this run's selected runs."""
    estimated_recall: float | None = None
    """What status reports (engine.metrics.estimated_recall)."""
    true_recall: float | None = None
    """The share of the arms the simulated model used on this run's latest selected runs
    (the window the estimate reads) that selection had included."""
    sessions: int = 0
    """Sessions the runs came in (0: runs without a session key)."""
    cost_savings_percent: float | None = None
    """What status reports: selected sessions' prompt cost per run against baseline ones'."""
    true_cost_savings_percent: float | None = None
    """The same, counted by the simulator over this run's sessions."""
    counterfactual_cost_savings_percent: float | None = None
    """The simulator's cost of the selected sessions against the same sessions sent with
    every component (research.session_simulation.true_saving)."""
    recall_target: float | None = None
    """The learner's recall target the runs were selected under (None: the token budget)."""

    def report_lines(self) -> list[str]:
        """The closing figures, with the simulator's truth next to each estimate."""
        target_percent = _percent(self.recall_target)
        lines = [
            f"Inventory: {self.arms} arms, {self.inventory_tokens:,} tokens; token budget "
            f"{self.token_budget:,}" + _known(target_percent, " (a cap); recall target {:g}%.", ".")
        ]
        if self.sessions:
            measured = _known(
                self.cost_savings_percent,
                "status measures {:.1f}% ",
                "status cannot measure it yet (too few sessions) ",
            )
            truth = _known(
                self.true_cost_savings_percent,
                "{:.1f}%",
                "unknown (no baseline or no selected session)",
            )
            against = _known(
                self.counterfactual_cost_savings_percent,
                "; against the same sessions with every component: {:.1f}%",
            )
            lines.append(
                f"Prompt cost under the prompt cache, selected sessions against baseline "
                f"sessions per run: {measured}(simulator: {truth}{against})."
            )
        if self.prompt_savings_percent is not None:
            truth = _known(self.true_prompt_savings_percent, " (simulator: {:.1f}%)")
            lines.append(
                f"Saved {self.prompt_savings_percent:.1f}% of prompt tokens compared with "
                f"sending every component{truth}."
            )
        if self.estimated_recall is not None:
            truth = _known(_percent(self.true_recall), "; the simulator's true recall is {:.1f}%")
            target = _known(target_percent, ", against a recall target of {:g}%")
            lines.append(
                f"Kept about {self.estimated_recall * 100:.1f}% of the components the model "
                f"used (estimated{truth}){target}."
            )
        if self.token_savings_percent is not None and not self.sessions:
            lines.append(
                f"Selected runs against baseline runs: {self.token_savings_percent:.1f}% tokens "
                "(both fill the same budget, so this stays near zero however well it learns)."
            )
        return lines


def _percent(share: float | None) -> float | None:
    return None if share is None else share * 100


def _known(figure: float | None, text: str, otherwise: str = "") -> str:
    """`text` with `figure` in it ("{:.1f}"), or `otherwise` when the figure is not known."""
    return otherwise if figure is None else text.format(figure)


def check_options(traces: int, arms: int, seed: int, recall_target: float | None) -> None:
    """InvalidInput for options a simulation cannot run with, before it changes anything (a
    command line checks them before it opens or creates the learner)."""
    if not 1 <= traces <= 1_000_000:
        raise InvalidInput("--traces must be from 1 to 1,000,000")
    if not 1 <= arms <= 10_000:
        raise InvalidInput("--arms must be from 1 to 10,000")
    if not 0 <= seed <= MAX_SEED:
        raise InvalidInput(f"--seed must be from 0 to {MAX_SEED:,}, got {seed}")
    if recall_target is not None and not (
        math.isfinite(recall_target) and 0.0 < recall_target <= 1.0
    ):
        raise InvalidInput(f"--recall-target must be a share in (0, 1], got {recall_target}")


def simulate(
    service: LearningService,
    *,
    traces: int = 300,
    arms: int = 40,
    seed: int = 0,
    force: bool = False,
    progress: Callable[[int], None] | None = None,
    sessions: bool = False,
    phase: Phase = Phase.ACTIVE,
    clock: SimulatedClock | None = None,
    recall_target: float | None = None,
) -> SimulationResult:
    """Run `traces` simulated agent runs over `arms` arms: select, run, observe. With
    `sessions`, the runs are the turns of multi-turn conversations selected with their session
    key, each run's usage billed through a model of the provider's prompt cache. `phase`
    passive records the runs with every arm (the data `/learning phase` projects from), and
    needs a passive learner; active switches a passive learner to active first. `clock`: the
    sessions' own time, to be given to a service made with it as its `wall_clock` (so session
    idle windows are counted as the sessions go, as they would be live). `recall_target` sets
    the learner's `recallTarget`, and its `tokenBudget` to the inventory's tokens so that the
    target alone decides the sets (a learner's own target keeps its own budget as the cap)."""
    check_options(traces, arms, seed, recall_target)
    page, total = service.traces(limit=1)
    if total and page and page[0].provider != "simulated" and not force:
        raise Conflict(
            f"learner '{service.learner}' already holds traces from a real agent; simulate "
            "into another learner (--learner demo) or pass --force"
        )
    switched = False
    phase = Phase(phase)
    if phase is Phase.PASSIVE and service.phase() is Phase.ACTIVE:
        raise Conflict(
            f"learner '{service.learner}' is in the active phase; simulate the passive phase "
            "into another learner (--learner demo)"
        )
    workload = make_workload(arms, seed=seed)
    if recall_target is not None:  # refused (the seed policy) before the phase changes
        service.set_settings(
            {"recallTarget": recall_target, "tokenBudget": int(workload.costs.sum())},
            actor="simulate",
        )
    if phase is Phase.ACTIVE and service.phase() is Phase.PASSIVE:
        service.set_phase(Phase.ACTIVE, actor="simulate", bootstrap=True)
        switched = True
    service.seed_draws(seed)  # the same seed, the same runs and the same selections
    if sessions:
        return _simulate_sessions(
            service, workload, traces, seed, switched, progress, clock or SimulatedClock()
        )
    arm_set = ArmSet(workload.arms)
    rng = np.random.default_rng(seed)
    start = now_ms() - traces * 60_000
    nonce = now_ms()
    costs = workload.costs
    baseline = 0
    offered = kept = 0
    hits: list[tuple[int, int]] = []  # selected runs: (used and included, used)
    for step in range(traces):
        selection = service.select(arm_set)
        conversational, used = workload.draw_usage(step, rng)
        service.observe(
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
        if selection.is_baseline:
            baseline += 1
        else:
            mask = selection.mask
            offered += int(costs.sum())
            kept += int(costs[mask].sum())
            if not conversational:
                hits.append((int((used & mask).sum()), int(used.sum())))
        if progress is not None:
            progress(1)
    summary = service.summary()
    window = hits[-RECALL_WINDOW:]
    used_total = sum(u for _, u in window)
    return SimulationResult(
        traces,
        arms,
        baseline,
        traces - baseline,
        switched,
        summary.token_savings_percent,
        inventory_tokens=int(costs.sum()),
        token_budget=service.config.token_budget,
        prompt_savings_percent=summary.prompt_savings_percent,
        true_prompt_savings_percent=100.0 * (1.0 - kept / offered) if offered else None,
        estimated_recall=summary.estimated_recall,
        true_recall=sum(h for h, _ in window) / used_total if used_total else None,
        recall_target=service.config.recall_target,
    )


def _simulate_sessions(
    service: LearningService,
    workload: Workload,
    traces: int,
    seed: int,
    switched: bool,
    progress: Callable[[int], None] | None,
    clock: SimulatedClock,
) -> SimulationResult:
    """`traces` runs as the turns of sessions (research.session_simulation), through the service
    with their session keys and the prompt-cache usage the model bills."""
    rng = np.random.default_rng(seed)
    drawn = []
    turns = 0
    for session in draw_sessions(workload, traces, rng):
        if turns >= traces:
            break
        keep = min(session.turns, traces - turns)  # the last conversation ends at `traces` runs
        if keep < session.turns:
            session = replace(
                session,
                times=session.times[:keep],
                conversational=session.conversational[:keep],
                used=session.used[:keep],
            )
        drawn.append(session)
        turns += keep
    nonce = now_ms()
    span = int(drawn[-1].times[-1] * 1000)
    start = nonce - span - 60_000
    policy = _CountedTurns(
        service,
        workload,
        clock,
        start_ms=start,
        per_session=True,
        provider="simulated",
        model="sim-1",
        trace_prefix=f"sim-{nonce}-",
    )
    run = run_sessions(workload, drawn, policy)
    full = run_sessions(workload, drawn, EveryArm(len(workload.arms)))
    if progress is not None:
        progress(turns)
    summary = service.summary()
    savings = summary.prompt_cost_savings
    baseline = int(run.turns[run.baseline].sum())
    return SimulationResult(
        turns,
        len(workload.arms),
        baseline,
        turns - baseline,
        switched,
        summary.token_savings_percent,
        inventory_tokens=int(workload.costs.sum()),
        token_budget=service.config.token_budget,
        prompt_savings_percent=summary.prompt_savings_percent,
        true_prompt_savings_percent=_tool_token_saving(run, float(workload.costs.sum())),
        estimated_recall=summary.estimated_recall,
        true_recall=policy.recall(RECALL_WINDOW),
        sessions=len(drawn),
        cost_savings_percent=savings.percent if savings is not None else None,
        true_cost_savings_percent=group_saving(run),
        counterfactual_cost_savings_percent=true_saving(run, full),
        recall_target=service.config.recall_target,
    )


class _CountedTurns(ServiceTurns):
    """ServiceTurns that also counts, per selected run, the arms its turn used and how many of
    them its prompt had: the simulator's truth for the runs status estimates recall over."""

    def __init__(
        self, service: LearningService, workload: Workload, clock: SimulatedClock, **options: Any
    ) -> None:
        super().__init__(service, workload, clock, **options)
        self.selected: list[tuple[int, int] | None] = []
        """Per selected run, in order: (used and kept, used); None for a conversational run
        (status leaves those out, but they fill its window)."""

    def observe(self, session: Session, turn: int, included: Sequence[int], usage: Usage) -> None:
        if not self.is_baseline():
            if session.conversational[turn]:
                self.selected.append(None)
            else:
                used = np.flatnonzero(session.used[turn])
                kept = int(np.isin(used, np.asarray(included, dtype=np.int64)).sum())
                self.selected.append((kept, int(used.size)))
        super().observe(session, turn, included, usage)

    def recall(self, window: int) -> float | None:
        """The share of the arms used that the prompt had, over the latest `window` selected
        runs (the window status reads); None when they used none."""
        counted = [c for c in self.selected[-window:] if c is not None]
        used = sum(u for _, u in counted)
        return sum(k for k, _ in counted) / used if used else None


def _tool_token_saving(run: SessionRun, inventory_tokens: float) -> float | None:
    """The simulator's share of tool tokens the selected sessions' turns did not send, against
    every component on each of those turns (what status's prompt-token saving counts)."""
    selected = ~run.baseline
    offered = inventory_tokens * float(run.turns[selected].sum())
    if not offered:
        return None
    return 100.0 * (1.0 - float(run.tool_tokens[selected].sum()) / offered)


def group_saving(run: SessionRun) -> float | None:
    """The simulator's saving of selected sessions' prompt cost per run against baseline
    sessions' (what status measures), in percent; None without both kinds of session."""
    base = run.baseline
    if base.all() or not base.any():
        return None
    selected = run.prompt_cost[~base].sum() / run.turns[~base].sum()
    baseline = run.prompt_cost[base].sum() / run.turns[base].sum()
    return float(100.0 * (1.0 - selected / baseline))


def progress_bar(total: int) -> Callable[[int], None]:
    """A tqdm bar on stderr (silent when stderr is not a terminal)."""
    from tqdm import tqdm

    bar = tqdm(total=total, unit="run", file=sys.stderr, disable=not sys.stderr.isatty())

    def step(n: int) -> None:
        bar.update(n)
        if bar.n >= total:
            bar.close()

    return step
