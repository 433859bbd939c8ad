"""How does our prepared selection compare with other Thompson-sampling libraries?

The same workload as bench/select.py (10, 30, 1,000 and 100,000 arms; lognormal token costs
from `engine.simulation`; posteriors after 0-199 simulated pulls per arm; `min_pulls` 5; budget
30% of the inventory's tokens; no baseline runs), each library given the posteriors once and
then timed selecting, one call after another:

- numpy floor: one `numpy.random.Generator.beta` draw of the same size, the least any Thompson
  selection has to do (the reference every ratio is taken against);
- ours: `select_arms` on an `ArmSet` and its `PosteriorArrays`, reading `.selected`;
- qortex (PyPI `qortex`, `qortex.learning.ThompsonSampling.select`): its own Thompson
  selection with `min_pulls` forcing and greedy packing under `token_budget`, over its `Arm`
  and `ArmState` objects. Its membership tests are quadratic in the inventory, so it is not
  run at 100,000 arms (one call would take hours);
- MABWiser (PyPI `mabwiser`, `LearningPolicy.ThompsonSampling`): `predict_expectations` draws
  one score per arm, then a plain-Python pass forces the under-explored arms in and packs the
  rest by score under the budget. Its counters are set to the same Beta parameters as ours.

Each library keeps its own random generator (seeded where it allows), so the selections are
alike in kind, not arm for arm. A library that is not installed is skipped with a one-line
reason. Install them with the `bench` extra: `pip install -e '.[bench]'`.

Timing: time.perf_counter around each call, garbage collection off while timing; rounds in
which the methods take turns, the median of each round, and the median of those medians.

    .venv/bin/python bench/peers.py [--quick] [--seed N]
"""

from __future__ import annotations

import sys

# bench/select.py would shadow the standard library's `select` module: drop this folder, and
# put the project root on the path instead.
sys.path[:] = [p for p in sys.path if not p.rstrip("/").endswith("bench")]
sys.path.insert(0, __file__.rsplit("/bench/", 1)[0] if "/bench/" in __file__ else ".")

import argparse  # noqa: E402
import gc  # noqa: E402
import platform  # noqa: E402
import random  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from importlib import metadata  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

from learning_bot.engine import ArmSet, LearningConfig, Phase, initial_prior, select_arms  # noqa: E402
from learning_bot.engine.inventory import PosteriorArrays  # noqa: E402
from learning_bot.engine.simulation import make_workload  # noqa: E402

SIZES = (10, 30, 1_000, 100_000)
BUDGET_SHARE = 0.30
MIN_PULLS = 5
MAX_PULLS = 200
QORTEX_MAX_ARMS = 1_000
"""Largest inventory qortex is run on: its `a not in forced` / `a not in selected` tests
compare dataclasses pairwise, so a call grows with the square of the inventory."""


@dataclass(frozen=True)
class Case:
    size: int
    ids: list[str]
    costs: list[int]
    alpha: np.ndarray[Any, np.dtype[np.float64]]
    beta: np.ndarray[Any, np.dtype[np.float64]]
    pulls: np.ndarray[Any, np.dtype[np.int64]]
    arm_set: ArmSet
    config: LearningConfig


def make_case(size: int, seed: int) -> Case:
    """bench/select.py's workload: lognormal costs, posteriors after 0-199 simulated pulls."""
    workload = make_workload(size, seed=seed)
    arms = list(workload.arms)
    rng = np.random.default_rng([seed, size])
    pulls = rng.integers(0, MAX_PULLS, size=size)
    hits = rng.binomial(pulls, workload.usefulness)
    prior = (
        np.array([initial_prior(arm).alpha for arm in arms]),
        np.array([initial_prior(arm).beta for arm in arms]),
    )
    alpha = prior[0] + hits
    beta = prior[1] + (pulls - hits)
    arm_set = ArmSet(arms)
    total = arm_set.total_cost
    config = LearningConfig.for_policy(
        "seed",
        phase=Phase.ACTIVE,
        baseline_rate=0.0,
        min_pulls=MIN_PULLS,
        token_budget=round(BUDGET_SHARE * total),
    )
    return Case(
        size,
        list(arm_set.ids),
        arm_set.costs.tolist(),
        alpha.astype(np.float64),
        beta.astype(np.float64),
        pulls.astype(np.int64),
        arm_set,
        config,
    )


# --- the contenders ------------------------------------------------------------------------

Runner = Callable[[], object]


def floor_runner(case: Case, seed: int) -> Runner:
    rng = np.random.default_rng([seed, 1])
    alpha, beta = case.alpha, case.beta
    return lambda: rng.beta(alpha, beta)


def ours_runner(case: Case, seed: int) -> Runner:
    rng = np.random.default_rng([seed, 2])
    arrays = PosteriorArrays(case.alpha.copy(), case.beta.copy(), case.pulls.copy())
    arm_set, config = case.arm_set, case.config
    return lambda: select_arms(arm_set, arrays, config, rng).selected


def qortex_runner(case: Case, seed: int) -> Runner | str:
    """qortex's Thompson selection; a reason string when it cannot run here."""
    if case.size > QORTEX_MAX_ARMS:
        return f"not run above {QORTEX_MAX_ARMS:,} arms (quadratic membership tests)"
    try:
        from qortex.learning import Arm, ArmState, LearnerConfig, ThompsonSampling
    except ImportError as exc:
        return f"not installed ({exc.name}): pip install -e '.[bench]'"
    candidates = [Arm(id=i, token_cost=c) for i, c in zip(case.ids, case.costs, strict=True)]
    states = {
        i: ArmState(alpha=a, beta=b, pulls=p)
        for i, a, b, p in zip(
            case.ids, case.alpha.tolist(), case.beta.tolist(), case.pulls.tolist(), strict=True
        )
    }
    config = LearnerConfig(name="bench", baseline_rate=0.0, min_pulls=MIN_PULLS)
    strategy = ThompsonSampling()
    budget = case.config.token_budget
    random.seed(seed)  # qortex draws from the random module's global generator

    def run() -> object:
        return strategy.select(candidates, states, 0, config, token_budget=budget).selected

    return run


def mabwiser_runner(case: Case, seed: int) -> Runner | str:
    """MABWiser's Thompson draws with a plain-Python greedy pass under the budget."""
    try:
        from mabwiser.mab import MAB, LearningPolicy
    except ImportError as exc:
        return f"not installed ({exc.name}): pip install -e '.[bench]'"
    ids = case.ids
    mab = MAB(arms=list(ids), learning_policy=LearningPolicy.ThompsonSampling(), seed=seed)
    # Fit on one observation (fitting every pull would scan the history once per arm), then
    # set each arm's Beta counters to our posterior: Beta(success count, failure count).
    mab.fit(decisions=[ids[0]], rewards=[1])
    policy = mab._imp
    policy.arm_to_success_count.update(zip(ids, case.alpha.tolist(), strict=True))
    policy.arm_to_fail_count.update(zip(ids, case.beta.tolist(), strict=True))
    cost = dict(zip(ids, case.costs, strict=True))
    under = [i for i, p in zip(ids, case.pulls.tolist(), strict=True) if p < MIN_PULLS]
    under_set = set(under)
    forced_cost = sum(cost[i] for i in under)
    budget = case.config.token_budget

    def run() -> object:
        scores = mab.predict_expectations()
        chosen = set(under)
        room = budget - forced_cost
        for arm in sorted(scores, key=scores.__getitem__, reverse=True):
            if arm not in under_set and cost[arm] <= room:
                chosen.add(arm)
                room -= cost[arm]
        return [i for i in ids if i in chosen]

    return run


CONTENDERS: dict[str, Callable[[Case, int], Runner | str]] = {
    "numpy floor": floor_runner,
    "ours": ours_runner,
    "qortex": qortex_runner,
    "MABWiser": mabwiser_runner,
}
PACKAGES = {"qortex": "qortex", "MABWiser": "mabwiser"}


# --- timing --------------------------------------------------------------------------------


def sample(fn: Runner, calls: int) -> float:
    """Median seconds per call over `calls` individually timed calls."""
    clock = time.perf_counter
    times = []
    for _ in range(calls):
        start = clock()
        fn()
        times.append(clock() - start)
    return statistics.median(times)


def calls_for(name: str, size: int, quick: bool) -> int:
    """Enough calls for a stable median without letting the slow peers run for minutes."""
    budget_s = 0.05 if quick else 0.25  # per round and contender, at the expected speed
    per_call = {"numpy floor": 40e-9, "ours": 80e-9, "qortex": 2e-6, "MABWiser": 5e-6}[name]
    per_call *= size * (size / 100 if name == "qortex" and size > 100 else 1)
    return max(3, min(3000, int(budget_s / max(per_call, 1e-6))))


def measure(runners: dict[str, Runner], size: int, quick: bool) -> dict[str, float]:
    names = list(runners)
    calls = {name: calls_for(name, size, quick) for name in names}
    for name in names:  # warm-up
        runners[name]()
    rounds = 3 if quick else 7
    medians: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            gc.collect()
            gc.disable()
            try:
                medians[name].append(sample(runners[name], calls[name]))
            finally:
                gc.enable()
    return {name: statistics.median(values) for name, values in medians.items()}


# --- report --------------------------------------------------------------------------------


def fmt_us(seconds: float) -> str:
    return f"{seconds * 1e6:,.1f}"


def version(name: str) -> str:
    package = PACKAGES.get(name)
    if package is None:
        return ""
    try:
        return f" {metadata.version(package)}"
    except metadata.PackageNotFoundError:
        return ""


def print_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(header)]
    print("| " + " | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for row in rows:
        cells = [
            cell.ljust(w) if i == 0 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        ]
        print("| " + " | ".join(cells) + " |")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds and calls")
    parser.add_argument("--seed", type=int, default=0, help="workload and generator seed")
    parser.add_argument(
        "--sizes", type=int, nargs="+", default=list(SIZES), help="inventory sizes to run"
    )
    args = parser.parse_args(argv)
    started = time.perf_counter()
    print(
        f"prepared selection beside peers: Python {platform.python_version()}, "
        f"numpy {np.__version__}, seed {args.seed}{', quick' if args.quick else ''}"
    )
    print(
        f"active phase, no baseline runs, min_pulls {MIN_PULLS}, pulls 0-{MAX_PULLS - 1} per "
        f"arm, budget {BUDGET_SHARE:.0%} of the inventory's tokens"
    )
    print()
    skipped: dict[str, str] = {}
    rows: list[list[str]] = []
    for size in args.sizes:
        case = make_case(size, args.seed)
        runners: dict[str, Runner] = {}
        for name, make in CONTENDERS.items():
            made = make(case, args.seed)
            if isinstance(made, str):
                skipped.setdefault(name, made)
                continue
            runners[name] = made
        med = measure(runners, size, args.quick)
        floor = med["numpy floor"]
        for name in CONTENDERS:
            if name in med:
                rows.append(
                    [
                        f"{size:,}",
                        name + version(name),
                        fmt_us(med[name]),
                        f"{med[name] / floor:,.2f}x",
                    ]
                )
            else:
                rows.append([f"{size:,}", name + version(name), "-", "skipped"])
    print("median µs per selection (median of per-round medians), ratio to the numpy draw:")
    print_table(["arms", "implementation", "median µs", "vs numpy draw"], rows)
    if skipped:
        print()
        for name, reason in skipped.items():
            print(f"{name}: {reason}")
    print(f"(run took {time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
