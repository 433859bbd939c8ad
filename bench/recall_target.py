"""Is the recall target calibrated, and what does it cost against a fixed budget, the oracle
and provider tool search at its best? The context-aware policy, session-stable, under the
product's defaults (minPulls 5, baseline sessions 10%), given `recallTarget` 0.90, 0.95, 0.97
and 0.99 (token budget: the whole inventory, so no cap), without and with deferral (the tools
left out deferred behind the provider's tool search, the target counting a used tool the
session's searches would find or have loaded, engine.recall_target.session_search_levels), on
BFCL multi-turn (800 sessions, real
messages and gold calls) and on task-type workloads (research.context_simulation). Every row
gives searches and round trips per session beside its cost.

The learner runs through the sessions in time order (BFCL: one seeded order) and keeps learning
throughout, as the product does; figures are measured on the sessions after the first
`--train` share only, each served before anything was learnt from it. Recall is over the
selected sessions (a baseline session offers every tool, recall 1 by construction) and counts
each tool a turn needs once. The same policy at fixed budgets (shares of the inventory's tokens;
with deferral, the tools beyond the budget deferred behind the search, searches priced)
gives, for each target, the budget reaching the target's achieved recall (interpolated between
the two budgets of the sweep around it) and its cost; the oracle offers each session the tools
it will use.

    pip install --no-deps bfcl-eval
    .venv/bin/python -m bench.recall_target [--package-dir DIR] [--seed N] [--train SHARE]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from bench.bfcl_context import bfcl_study_inputs, product_config
from bench.table import print_table
from learning_bot.engine import Arm
from learning_bot.research.context_simulation import ContextSession, StudyRun, run_study
from learning_bot.research.task_types import task_type_workload

TARGETS = (0.90, 0.95, 0.97, 0.99)
SHARES = (0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5, 0.6, 0.7, 0.85, 1.0)


@dataclass(frozen=True)
class Measured:
    recall: float
    cost: float
    """Prompt cost of the measured selected sessions against the same sessions with every tool."""
    tokens: float
    """Tool tokens per turn of the measured selected sessions."""
    sessions: int
    spread: float
    """Standard deviation of the per-session recall of sessions that used a tool."""
    searches: float
    """Tool searches per measured session (each an extra round trip)."""
    round_trips: float
    """Requests per measured session: one per turn, one more per search."""


def measure(run: StudyRun, full: StudyRun, start: int) -> Measured:
    n = len(run.kept)
    mask = np.zeros(n, dtype=bool)
    mask[start:] = True
    if run.baseline:
        mask &= ~np.array(run.baseline, dtype=bool)
    used = run.used[mask]
    per = run.kept[mask][used > 0] / used[used > 0]
    return Measured(
        float(run.kept[mask].sum() / max(1.0, used.sum())),
        float(run.prompt_cost[mask].sum() / full.prompt_cost[mask].sum()),
        float(run.tool_tokens[mask].sum() / run.turns[mask].sum()),
        int(mask.sum()),
        float(per.std()) if len(per) else 0.0,
        float(run.searches[mask].mean()),
        float(run.round_trips[mask].mean()),
    )


def same_recall(
    sweep: Sequence[tuple[float, Measured]], recall: float
) -> tuple[float, float] | None:
    """(budget share, cost) of a fixed budget reaching `recall`: interpolated linearly between
    the two budgets of the sweep around it (None when no budget of the sweep reaches it)."""
    below: tuple[float, Measured] | None = None
    for share, m in sweep:
        if m.recall >= recall:
            if below is None or m.recall == below[1].recall:
                return share, m.cost
            w = (recall - below[1].recall) / (m.recall - below[1].recall)
            return (
                below[0] + w * (share - below[0]),
                below[1].cost + w * (m.cost - below[1].cost),
            )
        below = (share, m)
    return None


def study(
    name: str,
    arms: Sequence[Arm],
    sessions: Sequence[ContextSession],
    seed: int,
    train: float,
    targets: Sequence[float] = TARGETS,
    shares: Sequence[float] = SHARES,
) -> list[tuple[str, ...]]:
    total = sum(a.token_cost for a in arms)
    start = int(train * len(sessions))
    base = product_config()
    whole = base.merged({"token_budget": total})
    full = run_study(arms, sessions, "every", whole, seed=seed)
    known = [replace(s, expected=None) for s in sessions]  # the oracle: the session's own tools
    oracle = measure(run_study(arms, known, "oracle", whole, seed=seed), full, start)
    sweeps: dict[str, list[tuple[float, Measured]]] = {"context": [], "context+deferral": []}
    for policy, sweep in sweeps.items():
        for share in shares:
            config = base.merged({"token_budget": max(1, round(share * total))})
            got = measure(run_study(arms, sessions, policy, config, seed=seed), full, start)
            sweep.append((share, got))
    ideal = measure(run_study(arms, sessions, "search at best", whole, seed=seed), full, start)
    rows = []
    for policy, label in (("context", "context"), ("context+deferral", "with deferral")):
        for target in targets:
            config = whole.merged({"recall_target": target})
            got = measure(run_study(arms, sessions, policy, config, seed=seed), full, start)
            reach = same_recall(sweeps[policy], got.recall)
            rows.append(
                (
                    *row(name, f"{label}, target {target:.2f}", got, oracle),
                    "-" if reach is None else f"{reach[0]:.0%}: {reach[1]:.3f}",
                )
            )
    for policy, label in (("context", "context"), ("context+deferral", "with deferral")):
        for share, m in sweeps[policy]:
            rows.append((*row(name, f"{label}, budget {share:.0%}", m, oracle), ""))
    rows.append((*row(name, "search at best", ideal, oracle, learning=False), ""))
    rows.append((*row(name, "oracle", oracle, oracle, learning=False), ""))
    return rows


def row(
    name: str, what: str, m: Measured, oracle: Measured, *, learning: bool = True
) -> tuple[str, ...]:
    """A table row: the workload, the policy and its target or budget, minPulls and baseline
    rate (the product's defaults for a learning row), then the measured figures."""
    target = what.rsplit("target ", 1)[-1] if "target " in what else ""
    gap = f"{m.recall - float(target):+.3f}" if target else ""
    return (
        name,
        what,
        "5" if learning else "-",
        "10%" if learning else "-",
        f"{m.recall:.3f}",
        gap,
        f"{m.spread:.2f}",
        f"{m.cost:.3f}",
        f"{m.cost / oracle.cost:.2f}x",
        f"{m.tokens:,.0f}",
        f"{m.searches:.2f}",
        f"{m.round_trips:.2f}",
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--package-dir", type=Path, help="the installed bfcl_eval folder")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--train", type=float, default=0.5, help="share of sessions not measured")
    parser.add_argument("--skip-bfcl", action="store_true")
    parser.add_argument("--skip-tasks", action="store_true", help="BFCL only")
    parser.add_argument("--targets", type=float, nargs="*", default=TARGETS)
    parser.add_argument("--no-sweep", action="store_true", help="no fixed budgets")
    args = parser.parse_args(argv)
    began = time.perf_counter()
    rows: list[tuple[str, ...]] = []
    shares = () if args.no_sweep else SHARES
    if not args.skip_bfcl:
        from bench.bfcl import package_dir

        arms, sessions = bfcl_study_inputs(package_dir(args.package_dir), args.seed)
        rows += study("BFCL", arms, sessions, args.seed, args.train, args.targets, shares)
    for name, options in (
        ()
        if args.skip_tasks
        else (
            ("task types, background 2%", {"background": 0.02}),
            ("task types, 12 types", {"types": 12, "tools": 90}),
        )
    ):
        arms, sessions = task_type_workload(seed=args.seed, **options)
        rows += study(name, arms, sessions, args.seed, args.train, args.targets, shares)
    header = ("workload", "policy, target / budget", "minPulls", "baseline", "recall",
              "vs target", "sd/session", "cost vs every tool", "vs oracle", "tool tokens/turn",
              "searches/session", "round trips/session",
              "budget reaching that recall: cost")  # fmt: skip
    print_table(header, rows)
    print(f"(seed {args.seed}, measured after the first {args.train:.0%} of the sessions; "
          f"{time.perf_counter() - began:.0f} s)")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
