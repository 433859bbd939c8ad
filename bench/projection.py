"""The projection of going active (engine.projection): how close it comes, and what it costs.

Accuracy: a simulated workload (learning_bot.simulate, sessions with their prompt-cache usage)
is recorded in the passive phase into one learner; the projection is read from it as
`/learning phase` reads it (engine.phase_projection.learner_projection: the latest runs from
storage, the learner's settings and price table); then the same workload (same seed: the same
sessions, the same usage) runs through the real service in the active phase in a fresh
learner whose wall clock is the sessions' own time (its idle windows count as they would
live), and the simulator counts what selection kept (recall of the components the turns
used) and the prompt cost it saved against the same sessions with every component. Figures of
the current setting (token budget 8,000), recall in points and cost saved in percent.

Cost: `project` over the latest 2,000 runs of a passive learner with 200 arms (the runs read
from storage first, not timed), at the current budget and its four alternatives: wall time
and CPU time (best of `--repeat`: the machine is shared, so wall time moves with its load)
and peak memory of the Python heap (tracemalloc); and the whole read path
(`learner_projection`, storage read included).

    .venv/bin/python bench/projection.py [--quick] [--speed-only] [--repeat N]
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
import platform  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import tracemalloc  # noqa: E402
from collections.abc import Sequence  # noqa: E402

from learning_bot.engine import LearningConfig, Phase  # noqa: E402
from learning_bot.engine.phase_projection import learner_projection  # noqa: E402
from learning_bot.engine.projection import project  # noqa: E402
from learning_bot.engine.service import LearningService  # noqa: E402
from learning_bot.engine.session_simulation import SimulatedClock  # noqa: E402
from learning_bot.simulate import simulate  # noqa: E402
from learning_bot.storage import SqlStore  # noqa: E402

WORKLOADS = ((40, 1_000, 0), (100, 2_000, 1), (20, 800, 2))
"""(arms, runs, seed) of the accuracy workloads."""


def accuracy(arms: int, runs: int, seed: int, folder: str) -> dict[str, float]:
    store = SqlStore(f"sqlite:///{folder}/accuracy-{arms}-{seed}.sqlite")
    try:
        passive = LearningService(store, LearningConfig(), rng=seed, learner="passive")
        simulate(passive, traces=runs, arms=arms, seed=seed, sessions=True, phase=Phase.PASSIVE)
        projection = learner_projection(passive)
        current = projection.current
        assert current is not None, projection.reason
        assert current.cost_savings_percent is not None
        clock = SimulatedClock()  # idle windows counted in the sessions' own time, as live
        active = LearningService(
            store, LearningConfig(), rng=seed, learner="active", wall_clock=clock
        )
        result = simulate(active, traces=runs, arms=arms, seed=seed, sessions=True, clock=clock)
        assert result.true_recall is not None
        assert result.counterfactual_cost_savings_percent is not None
        return {
            "runs": projection.runs,
            "sessions": projection.sessions,
            "projected recall": 100 * current.recall,
            "recall low": 100 * current.recall_low,
            "recall high": 100 * current.recall_high,
            "achieved recall": 100 * result.true_recall,
            "projected cost": current.cost_savings_percent,
            "cost low": current.cost_low or 0.0,
            "cost high": current.cost_high or 0.0,
            "achieved cost": result.counterfactual_cost_savings_percent,
        }
    finally:
        store.close()


def speed(arms: int, runs: int, repeat: int, folder: str) -> dict[str, float]:
    store = SqlStore(f"sqlite:///{folder}/speed.sqlite")
    try:
        service = LearningService(store, LearningConfig(), rng=0, learner="passive")
        simulate(service, traces=runs, arms=arms, seed=0, sessions=True, phase=Phase.PASSIVE)
        records = list(service.iter_traces())
        config = service.config
        best = cpu = float("inf")
        settings = 0
        for _ in range(repeat):
            start, start_cpu = time.perf_counter(), time.process_time()
            made = project(records, None, config)
            best = min(best, time.perf_counter() - start)
            cpu = min(cpu, time.process_time() - start_cpu)
            settings = len(made.settings)
        tracemalloc.start()
        project(records, None, config)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        start, start_cpu = time.perf_counter(), time.process_time()
        learner_projection(service, limit=runs)
        read_path = time.perf_counter() - start
        read_cpu = time.process_time() - start_cpu
        return {
            "runs": len(records),
            "settings": settings,
            "seconds": best,
            "cpu seconds": cpu,
            "peak MiB": peak / 2**20,
            "read path seconds": read_path,
            "read path cpu seconds": read_cpu,
        }
    finally:
        store.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the first workload only")
    parser.add_argument("--repeat", type=int, default=3, help="timed projections (best of)")
    parser.add_argument("--speed-only", action="store_true", help="the cost figures only")
    args = parser.parse_args(argv)
    print(f"Python {platform.python_version()} on {platform.machine()}")
    with tempfile.TemporaryDirectory() as folder:
        print(
            "| arms | runs (sessions) | recall projected (95%) | achieved | "
            "cost saved projected (95%) | achieved |"
        )
        print("| ---: | ---: | ---: | ---: | ---: | ---: |")
        workloads = () if args.speed_only else WORKLOADS[:1] if args.quick else WORKLOADS
        for arms, runs, seed in workloads:
            f = accuracy(arms, runs, seed, folder)
            print(
                f"| {arms} | {f['runs']:,.0f} ({f['sessions']:,.0f}) | "
                f"{f['projected recall']:.1f}% ({f['recall low']:.1f}-{f['recall high']:.1f}) | "
                f"{f['achieved recall']:.1f}% | "
                f"{f['projected cost']:.1f}% ({f['cost low']:.1f}-{f['cost high']:.1f}) | "
                f"{f['achieved cost']:.1f}% |"
            )
        arms, runs = (200, 2_000) if not args.quick else (200, 500)
        s = speed(arms, runs, args.repeat, folder)
        print(
            f"\nproject over {s['runs']:,.0f} runs of {arms} arms, {s['settings']:.0f} settings: "
            f"{s['seconds']:.2f} s wall, {s['cpu seconds']:.2f} s CPU (best of {args.repeat}), "
            f"peak {s['peak MiB']:.1f} MiB of Python heap; the read path with the storage read "
            f"(SQLite): {s['read path seconds']:.2f} s wall, {s['read path cpu seconds']:.2f} s CPU"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
