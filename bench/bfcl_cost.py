"""The Berkeley Function Calling Leaderboard's multi-turn sessions through the cost simulator
(SPEC 4a): prompt cost under the provider's prefix cache, tokens and recall per category.

The inventory is every function of the 8 multi-turn API classes, 128 tools, offered to every
session (as an agent that holds all of them would), each costing its definition's compact
JSON in characters / 4 (bench/bfcl.py). A session's turns use the tools its gold calls name;
a turn without gold calls is conversational. Turns come 30 s apart (inside the 5-minute cache
window); each adds BFCL_SHAPE.history_tokens to the conversation. The 800 sessions of the four
categories (base, miss_func, miss_param, long_context) run in one seeded random order through
one learner, so it learns across them; figures are then split by category.

Policies: every tool; the real LearningService per request (no session key) and per session
(the session key; a lacked tool appended to the session's set, or not: sessionGrowth); the
oracle (the knapsack of each tool's share of the
turns that use it, the same set on every turn). Token budget: BUDGET_SHARE of the inventory.

    pip install --no-deps bfcl-eval   # its data only; its dependencies are not needed
    .venv/bin/python bench/bfcl_cost.py [--package-dir .../site-packages/bfcl_eval] [--seed N]
        [--policy seed]
"""

from __future__ import annotations

import sys
from pathlib import Path

# bench/ holds select.py, named like a stdlib module: take this folder off the import path and
# put the project root on it instead.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

import argparse  # noqa: E402
import time  # noqa: E402
from collections.abc import Sequence  # noqa: E402

import numpy as np  # noqa: E402

from bench.bfcl import CATEGORIES, load_sessions, load_tools, package_dir  # noqa: E402
from bench.bfcl import Session as BfclSession  # noqa: E402
from bench.sessions import VARIANTS, Reported, service_run  # noqa: E402
from learning_bot.engine import Arm, LearningConfig, Phase  # noqa: E402
from learning_bot.engine.config import DEFAULT_POLICY, POLICIES  # noqa: E402
from learning_bot.engine.session_simulation import (  # noqa: E402
    EveryArm,
    OracleArms,
    Session,
    SessionRun,
    SessionShape,
    run_sessions,
)
from learning_bot.engine.simulation import Workload  # noqa: E402

BUDGET_SHARE = 0.35
BFCL_SHAPE = SessionShape(history_tokens=1_000, message_tokens=100)
TURN_GAP_SECONDS = 30.0


def inventory(root: Path) -> tuple[Workload, dict[str, int]]:
    """The 128 tools as arms (`tool:bfcl:Class.function`) and each tool's position."""
    tools = load_tools(root)
    arms = tuple(Arm(f"tool:bfcl:{name}", tool.tokens) for name, tool in tools.items())
    position = {name: i for i, name in enumerate(tools)}
    return Workload(arms, np.zeros(len(arms))), position


def as_sessions(
    sessions: Sequence[BfclSession], position: dict[str, int], arms: int
) -> list[Session]:
    """BFCL sessions as simulator sessions: one turn per BFCL turn, 30 s apart, an hour
    between sessions."""
    out = []
    at = 0.0
    for s in sessions:
        turns = len(s.turns)
        used = np.zeros((turns, arms), dtype=bool)
        for k, turn in enumerate(s.turns):
            for name in turn.calls:
                used[k, position[name]] = True
        times = at + TURN_GAP_SECONDS * np.arange(turns, dtype=np.float64)
        out.append(Session(s.id, times, ~used.any(axis=1), used))
        at = float(times[-1]) + 3_600.0
    return out


def usage_shares(sessions: Sequence[Session], arms: int) -> np.ndarray:
    """Each tool's share of the working turns that use it (the oracle's usefulness)."""
    working = [s.used[~s.conversational] for s in sessions]
    stacked = np.concatenate(working) if working else np.zeros((0, arms), dtype=bool)
    return stacked.mean(axis=0) if len(stacked) else np.zeros(arms)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--package-dir", type=Path, help="the installed bfcl_eval folder")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--policy", default=DEFAULT_POLICY, choices=sorted(POLICIES), help="the learner's policy"
    )
    args = parser.parse_args(argv)
    began = time.perf_counter()
    root = package_dir(args.package_dir)
    workload, position = inventory(root)
    n = len(workload.arms)
    bfcl = load_sessions(root, load_tools(root))
    order = np.random.default_rng(args.seed).permutation(len(bfcl))
    bfcl = [bfcl[i] for i in order]
    sessions = as_sessions(bfcl, position, n)
    workload = Workload(workload.arms, usage_shares(sessions, n))
    total = int(workload.costs.sum())
    config = LearningConfig.for_policy(
        args.policy,
        phase=Phase.ACTIVE,
        token_budget=round(BUDGET_SHARE * total),
        baseline_rate=0.10,
    )
    runs: dict[str, SessionRun] = {
        "every tool": run_sessions(workload, sessions, EveryArm(n), shape=BFCL_SHAPE)
    }
    reported: dict[str, Reported] = {}
    for name in ("per request", "per session, append", "per session, off"):
        runs[name], reported[name] = service_run(
            workload, sessions, config, args.seed, VARIANTS[name], BFCL_SHAPE
        )
    runs["oracle"] = run_sessions(
        workload, sessions, OracleArms(workload, config), shape=BFCL_SHAPE
    )
    print(
        f"BFCL multi-turn: {len(sessions)} sessions, {sum(s.turns for s in sessions):,} turns; "
        f"{n} tools, {total:,} tokens; budget {config.token_budget:,} ({BUDGET_SHARE:.0%}); "
        f"{BFCL_SHAPE.history_tokens:,} history tokens per turn, turns {TURN_GAP_SECONDS:.0f} s "
        f"apart; Anthropic cache prices; policy {args.policy}"
    )
    categories = np.array([s.category for s in bfcl])
    header = ("category", "policy", "cost vs every tool", "tool tokens/turn",
              "prompt tokens/session", "recall")  # fmt: skip
    rows = []
    for category in (*CATEGORIES, "all"):
        mask = categories == category if category != "all" else np.ones(len(bfcl), dtype=bool)
        full = runs["every tool"].prompt_cost[mask].sum()
        for name, run in runs.items():
            used = int(run.used[mask].sum())
            rows.append(
                (
                    category.removeprefix("multi_turn_"),
                    name,
                    f"{run.prompt_cost[mask].sum() / full:.3f}",
                    f"{run.tool_tokens[mask].sum() / run.turns[mask].sum():,.0f}",
                    f"{run.prompt_tokens[mask].mean():,.0f}",
                    f"{run.kept[mask].sum() / used:.3f}" if used else "-",
                )
            )
    widths = [max(len(str(r[i])) for r in (header, *rows)) for i in range(len(header))]
    for row in (header, *rows):
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)))
    for name in reported:
        run = runs[name]
        early = run.kept[:200].sum() / max(1, run.used[:200].sum())
        late = run.kept[-200:].sum() / max(1, run.used[-200:].sum())
        print(f"{name}: recall over the first 200 sessions {early:.3f}, the last 200 {late:.3f}")
    for name, r in reported.items():
        saving = "-" if r.cost_savings_percent is None else f"{r.cost_savings_percent:.1f}%"
        recall = "-" if r.estimated_recall is None else f"{r.estimated_recall:.3f}"
        print(f"{name}: status shows estimated recall {recall}, measured cost saving {saving}")
    print(f"({time.perf_counter() - began:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
