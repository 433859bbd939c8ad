"""How fast is `select_arms`, next to the cost of the random draw it cannot avoid?

For 10, 30, 1,000 and 100,000 arms (active phase, baseline_rate 0 so every run is a Thompson
run, budget 30% of the inventory's total cost, lognormal costs from `engine.simulation`,
posteriors from simulated pulls) this prints the median latency of:

- floor:    one `numpy.random.Generator.beta` draw of the same size, the least any Thompson
            selection has to do;
- prepared: `select_arms` on an `ArmSet` built once and its `PosteriorArrays`, reading
            `.selected` so the id tuple is really built;
- cold:     `select_arms` on a plain list of `Arm` and a dict of `Posterior`, every call
            (the `ArmSet` of the inventory is found again by `ArmSet.of` and the dict
            aligned inside);
- dicts:    what an HTTP request brings: a fresh list of fresh arm dicts every call (decoded
            from JSON before the clock starts), `ArmSet.from_json`, then `select_arms` with
            the dict of `Posterior` (up to 10,000 arms, the most a select body may carry);
- new:      an inventory never seen before: a new `ArmSet` of the list, `align_posteriors`
            from a dict of (alpha, beta, pulls), `select_arms`;
- loop:     a straightforward per-arm Python implementation of SPEC section 4, written here;
- default:  `select_arms` prepared as above under the default policy
            (`engine.config.DEFAULT_POLICY`: pooled prior, per-token packing, exploration
            0.5) on the posteriors of the last selection, whose pooled fit is kept
            (`engine.draws._PooledFits`): the draw only;
- refit:    the same with the kept fits dropped before each call, as after an observe
            changed the posteriors: the pooled fit and the draw.
Every method but the last two runs `policy = "seed"`, the algorithm the floor and the loop
are about.

Inventories below `engine.selection.SMALL_INVENTORY` arms take the plain-Python path after the
draw; `--crossover` times both paths on the same inventories around it (the constant is set
from that table).

Before timing, the loop is checked to pick exactly the arms `select_arms` picks for the same seed
(it draws its scores one `Generator.beta` call per arm from the same stream), and the JSON path
to pick what the list of `Arm` gives.

Timing: time.perf_counter around each call, garbage collection off while timing; several rounds
in which the methods take turns, the median of each round, and the median of those medians.

    .venv/bin/python bench/select.py [--quick] [--seed N] [--crossover]
"""

from __future__ import annotations

import sys
from pathlib import Path

# This file is named like the stdlib `select` module: take its own folder off the import path
# before anything imports `select`, and put the project root on it instead.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

import argparse  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Mapping, Sequence  # noqa: E402
from dataclasses import dataclass, replace  # noqa: E402

import numpy as np  # noqa: E402

from learning_bot.engine import (  # noqa: E402
    Arm,
    ArmSet,
    LearningConfig,
    Phase,
    Posterior,
    PosteriorArrays,
    initial_prior,
    select_arms,
)
from learning_bot.engine import draws as draws_module  # noqa: E402
from learning_bot.engine import selection as selection_module  # noqa: E402
from learning_bot.engine.inventory import align_posteriors  # noqa: E402
from learning_bot.engine.records import MAX_ARMS_PER_RUN  # noqa: E402
from learning_bot.engine.simulation import make_workload  # noqa: E402

SIZES = (10, 30, 1_000, 100_000)
BUDGET_SHARE = 0.30
MIN_PULLS = 5
MAX_PULLS = 200
TARGET_RATIO = 2.0
COLD_TARGET_RATIO = 5.0
COLD_TARGET_AT = 100_000
METHODS = ("floor", "prepared", "cold", "dicts", "new", "loop", "default", "refit")
CROSSOVER_SIZES = (30, 60, 100, 150, 200, 300, 500)


@dataclass(frozen=True)
class Plan:
    """Rounds, and calls per round for each method, at one inventory size."""

    rounds: int
    calls: Mapping[str, int]


FULL = {
    10: Plan(9, dict(zip(METHODS, (3000, 3000, 1000, 1000, 1000, 2000, 3000, 300), strict=True))),
    30: Plan(9, dict(zip(METHODS, (3000, 3000, 1000, 1000, 1000, 1000, 3000, 300), strict=True))),
    1_000: Plan(9, dict(zip(METHODS, (600, 600, 200, 100, 40, 60, 600, 20), strict=True))),
    100_000: Plan(7, dict(zip(METHODS, (30, 30, 10, 5, 5, 5, 30, 5), strict=True))),
}
QUICK = {
    10: Plan(3, dict(zip(METHODS, (500, 500, 200, 200, 200, 300, 500, 50), strict=True))),
    30: Plan(3, dict(zip(METHODS, (500, 500, 200, 200, 200, 200, 500, 50), strict=True))),
    1_000: Plan(3, dict(zip(METHODS, (100, 100, 40, 20, 10, 15, 100, 5), strict=True))),
    100_000: Plan(3, dict(zip(METHODS, (8, 8, 3, 2, 2, 1, 8, 2), strict=True))),
}


# --- the straightforward implementation ---------------------------------------------------


def loop_select(
    arms: Sequence[Arm],
    posteriors: Mapping[str, Posterior],
    config: LearningConfig,
    rng: np.random.Generator,
) -> tuple[tuple[str, ...], int]:
    """SPEC section 4, one arm at a time: (selected ids in inventory order, used tokens)."""
    seeds = set(config.seed_arm_ids)
    is_baseline = rng.random() < config.baseline_rate
    ranked = []
    for position, arm in enumerate(arms):
        post = posteriors.get(arm.id)
        if post is None:
            post = initial_prior(arm)
        if arm.id in seeds:
            tier = 0
        elif is_baseline:
            tier = 2
        elif post.pulls < config.min_pulls:
            tier = 1
        else:
            tier = 2
        key = 0.0 if is_baseline else -float(rng.beta(post.alpha, post.beta))
        ranked.append((tier, key, position, arm))
    ranked.sort(key=lambda item: (item[0], item[1], item[2]))
    chosen = [False] * len(arms)
    used = 0
    for tier, _, position, arm in ranked:
        # Seeds and under-explored arms always go in; the rest only while they fit.
        if tier < 2 or used + arm.token_cost <= config.token_budget:
            chosen[position] = True
            used += arm.token_cost
    return tuple(arm.id for arm, c in zip(arms, chosen, strict=True) if c), used


# --- inputs -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    size: int
    arms: list[Arm]
    posteriors: dict[str, Posterior]
    arm_set: ArmSet
    arrays: PosteriorArrays
    config: LearningConfig
    forced: int
    tuples: dict[str, tuple[float, float, int]]
    body: str
    """The inventory as the select body carries it (JSON)."""


def make_case(size: int, seed: int) -> Case:
    """An inventory with lognormal costs and posteriors after 0-199 simulated pulls each."""
    workload = make_workload(size, seed=seed)
    arms = list(workload.arms)
    rng = np.random.default_rng([seed, size])
    pulls = rng.integers(0, MAX_PULLS, size=size)
    hits = rng.binomial(pulls, workload.usefulness)
    posteriors: dict[str, Posterior] = {}
    for arm, n, k in zip(arms, pulls.tolist(), hits.tolist(), strict=True):
        prior = initial_prior(arm)
        posteriors[arm.id] = Posterior(prior.alpha + k, prior.beta + (n - k), pulls=n)
    total = sum(arm.token_cost for arm in arms)
    config = LearningConfig.for_policy(
        "seed",
        phase=Phase.ACTIVE,
        baseline_rate=0.0,
        min_pulls=MIN_PULLS,
        token_budget=round(BUDGET_SHARE * total),
    )
    arm_set = ArmSet(arms)
    arrays = arm_set.align(posteriors)
    seeds = arm_set.seed_mask(config.seed_arm_ids)
    forced = int((seeds | (arrays.pulls < config.min_pulls)).sum())
    tuples = {arm_id: (p.alpha, p.beta, p.pulls) for arm_id, p in posteriors.items()}
    body = json.dumps(
        [
            {"armId": a.id, "tokenCost": a.token_cost, "label": a.label, "content": a.content}
            for a in arms
        ]
    )
    return Case(size, arms, posteriors, arm_set, arrays, config, forced, tuples, body)


def check_loop(case: Case, seed: int) -> tuple[int, int]:
    """The loop and select_arms agree arm for arm on the same seed, from a list of Arm and
    from the JSON dicts alike; (selected, used tokens)."""
    for offset in range(3):
        selection = select_arms(case.arms, case.posteriors, case.config, rng=seed + offset)
        if case.size <= MAX_ARMS_PER_RUN:
            body = json.loads(case.body)
            from_dicts = select_arms(
                ArmSet.from_json(body), case.posteriors, case.config, seed + offset
            )
            if from_dicts != selection:
                raise SystemExit(f"the JSON path selects differently at {case.size} arms")
        ids, used = loop_select(
            case.arms, case.posteriors, case.config, np.random.default_rng(seed + offset)
        )
        if ids != selection.selected or used != selection.used_tokens:
            raise SystemExit(
                f"loop and select_arms disagree at {case.size} arms (seed {seed + offset}): "
                f"{len(ids)} vs {len(selection.selected)} arms, {used} vs "
                f"{selection.used_tokens} tokens"
            )
        if len(ids) in (case.forced, case.size):
            raise SystemExit(f"no packing happened at {case.size} arms; adjust the workload")
    return len(selection.selected), selection.used_tokens


# --- timing -------------------------------------------------------------------------------


Timed = Callable[[], object] | tuple[Callable[[], object], Callable[[], object]]
"""A call to time, or (untimed preparation, call to time)."""


def callables(case: Case, seed: int) -> dict[str, Timed]:
    floor_rng = np.random.default_rng([seed, 1])
    prepared_rng = np.random.default_rng([seed, 2])
    cold_rng = np.random.default_rng([seed, 3])
    loop_rng = np.random.default_rng([seed, 4])
    tuples_rng = np.random.default_rng([seed, 5])
    dicts_rng = np.random.default_rng([seed, 6])
    fresh: list[list[dict[str, object]]] = []
    tuples = case.tuples
    alpha, beta = case.arrays.alpha, case.arrays.beta
    arms, posteriors, config, arm_set, arrays = (
        case.arms,
        case.posteriors,
        case.config,
        case.arm_set,
        case.arrays,
    )

    def floor() -> object:
        return floor_rng.beta(alpha, beta)

    def prepared() -> object:
        return select_arms(arm_set, arrays, config, prepared_rng).selected

    def cold() -> object:
        return select_arms(arms, posteriors, config, cold_rng).selected

    def decode() -> None:  # the previous body is freed here, outside the clock
        fresh[:] = [json.loads(case.body)]

    def from_dicts() -> object:
        arm_set = ArmSet.from_json(fresh[0])
        return select_arms(arm_set, posteriors, config, dicts_rng).selected

    def from_tuples() -> object:
        fresh = ArmSet(arms)
        return select_arms(fresh, align_posteriors(fresh, tuples), config, tuples_rng).selected

    def loop() -> object:
        return loop_select(arms, posteriors, config, loop_rng)

    default_rng = np.random.default_rng([seed, 7])
    default_config = replace(
        LearningConfig(),
        phase=config.phase,
        baseline_rate=config.baseline_rate,
        min_pulls=config.min_pulls,
        token_budget=config.token_budget,
    )

    def default() -> object:
        return select_arms(arm_set, arrays, default_config, default_rng).selected

    refit_rng = np.random.default_rng([seed, 8])

    def refit() -> object:
        return select_arms(arm_set, arrays, default_config, refit_rng).selected

    return {
        "floor": floor,
        "prepared": prepared,
        "cold": cold,
        **({"dicts": (decode, from_dicts)} if case.size <= MAX_ARMS_PER_RUN else {}),
        "new": from_tuples,
        "loop": loop,
        "default": default,
        "refit": (draws_module._POOLED_FITS.clear, refit),
    }


def sample(timed: Timed, calls: int) -> float:
    """Median seconds per call over `calls` individually timed calls (each after its
    untimed preparation, if any)."""
    prepare, fn = timed if isinstance(timed, tuple) else (None, timed)
    clock = time.perf_counter
    times = []
    for _ in range(calls):
        if prepare is not None:
            prepare()
        start = clock()
        fn()
        times.append(clock() - start)
    return statistics.median(times)


def measure(fns: Mapping[str, Timed], rounds: int, calls: Mapping[str, int]) -> dict[str, float]:
    """Median of per-round medians; the methods take turns so load spikes hit them alike."""
    names = tuple(fns)
    for name in names:  # warm-up
        sample(fns[name], min(3, calls[name]))
    medians: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order:
            gc.collect()
            gc.disable()
            try:
                medians[name].append(sample(fns[name], calls[name]))
            finally:
                gc.enable()
    return {name: statistics.median(values) for name, values in medians.items()}


# --- report -------------------------------------------------------------------------------


def fmt_time(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:,.1f} µs"
    if seconds < 1.0:
        return f"{seconds * 1e3:,.2f} ms"
    return f"{seconds:,.2f} s"


def verdict(ratio: float, target: float) -> str:
    return "met" if ratio <= target else "NOT met"


def crossover(seed: int, quick: bool) -> None:
    """Both paths of `select_arms` on the same prepared inventories: where does the array
    path start to win?"""
    rows = []
    first_array_win = None
    for size in CROSSOVER_SIZES:
        case = make_case(size, seed)
        fns: dict[str, Timed] = {}
        for name, limit in (("small", 10**9), ("array", 0)):
            rng = np.random.default_rng([seed, 6])

            def run(
                limit: int = limit, rng: np.random.Generator = rng, case: Case = case
            ) -> object:
                selection_module.SMALL_INVENTORY = limit
                return select_arms(case.arm_set, case.arrays, case.config, rng).selected

            fns[name] = run
        floor_rng = np.random.default_rng([seed, 1])
        alpha, beta = case.arrays.alpha, case.arrays.beta
        fns["floor"] = lambda rng=floor_rng, a=alpha, b=beta: rng.beta(a, b)
        calls = 300 if quick else 2000
        saved = selection_module.SMALL_INVENTORY
        try:
            med = measure(fns, 3 if quick else 7, dict.fromkeys(fns, calls))
        finally:
            selection_module.SMALL_INVENTORY = saved
        if first_array_win is None and med["array"] < med["small"]:
            first_array_win = size
        rows.append(
            [
                f"{size:,}",
                fmt_time(med["floor"]),
                fmt_time(med["small"]),
                fmt_time(med["array"]),
                f"{med['small'] / med['floor']:.2f}x",
                f"{med['array'] / med['floor']:.2f}x",
                "small" if med["small"] <= med["array"] else "array",
            ]
        )
    print("crossover: prepared select_arms on each path (median of per-round medians):")
    print_table(
        ["arms", "numpy floor", "small path", "array path", "small/floor", "array/floor", "faster"],
        rows,
    )
    print(
        f"SMALL_INVENTORY is {selection_module.SMALL_INVENTORY}; the array path first won at "
        f"{first_array_win if first_array_win is not None else 'none of these sizes'}"
    )


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
        "--crossover", action="store_true", help="time the small and the array path instead"
    )
    args = parser.parse_args(argv)
    if args.crossover:
        crossover(args.seed, args.quick)
        return 0
    plans = QUICK if args.quick else FULL
    started = time.perf_counter()

    print(
        f"select_arms latency: Python {platform.python_version()}, numpy {np.__version__}, "
        f"seed {args.seed}{', quick' if args.quick else ''}"
    )
    print(
        f"active phase, baseline_rate 0, min_pulls {MIN_PULLS}, pulls 0-{MAX_PULLS - 1} per arm, "
        f"budget {BUDGET_SHARE:.0%} of the inventory's tokens"
    )
    print()

    workload_rows: list[list[str]] = []
    result_rows: list[list[str]] = []
    verdicts: list[str] = []
    for size in SIZES:
        case = make_case(size, args.seed)
        selected, used = check_loop(case, args.seed)
        plan = plans[size]
        med = measure(callables(case, args.seed), plan.rounds, plan.calls)
        prepared_ratio = med["prepared"] / med["floor"]
        cold_ratio = med["cold"] / med["floor"]
        dicts_ratio = med["dicts"] / med["floor"] if "dicts" in med else math.nan
        new_ratio = med["new"] / med["floor"]
        default_ratio = med["default"] / med["floor"]
        verdicts.append(
            f"{size:,} arms: prepared {verdict(prepared_ratio, TARGET_RATIO)} (default policy "
            f"{verdict(default_ratio, TARGET_RATIO)})"
            + (
                f", cold {verdict(cold_ratio, COLD_TARGET_RATIO)} (new inventory "
                f"{verdict(new_ratio, COLD_TARGET_RATIO)})"
                if size == COLD_TARGET_AT
                else ""
            )
        )
        workload_rows.append(
            [
                f"{size:,}",
                f"{case.arm_set.total_cost:,}",
                f"{case.config.token_budget:,}",
                f"{case.forced:,}",
                f"{selected:,}",
                f"{used:,}",
                f"{plan.rounds} x " + "/".join(str(plan.calls[m]) for m in METHODS if m in med),
            ]
        )
        result_rows.append(
            [
                f"{size:,}",
                fmt_time(med["floor"]),
                fmt_time(med["prepared"]),
                fmt_time(med["cold"]),
                fmt_time(med["dicts"]) if "dicts" in med else "n/a",
                fmt_time(med["new"]),
                fmt_time(med["loop"]),
                f"{prepared_ratio:.2f}x",
                f"{cold_ratio:.2f}x",
                f"{dicts_ratio:.2f}x" if "dicts" in med else "n/a",
                f"{new_ratio:.2f}x",
                f"{med['loop'] / med['prepared']:.1f}x",
                fmt_time(med["default"]),
                f"{default_ratio:.2f}x",
                fmt_time(med["refit"]),
                f"{med['refit'] / med['floor']:.1f}x",
            ]
        )

    print("workload (selection checked identical to the per-arm loop on the same seeds):")
    print_table(
        [
            "arms",
            "tokens",
            "budget",
            "forced in",
            "selected",
            "used",
            "rounds x calls (" + "/".join(METHODS) + ")",
        ],
        workload_rows,
    )
    print()
    print("median latency per selection (median of per-round medians):")
    print_table(
        [
            "arms",
            "numpy floor",
            "prepared",
            "cold",
            "cold (dicts)",
            "new inventory",
            "per-arm loop",
            "prepared/floor",
            "cold/floor",
            "dicts/floor",
            "new/floor",
            "loop/prepared",
            "default policy",
            "default/floor",
            "default, refit",
            "refit/floor",
        ],
        result_rows,
    )
    print()
    print(
        f"targets: prepared within {TARGET_RATIO:g}x of the numpy floor at every size; "
        f"cold within {COLD_TARGET_RATIO:g}x at {COLD_TARGET_AT:,} arms (the dicts path stops "
        f"at {MAX_ARMS_PER_RUN:,} arms, the most a select body may carry)"
    )
    print("  " + "; ".join(verdicts))
    print(f"(run took {time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
