"""`learning-bot simulate`: a synthetic agent workload, so there is something to look at."""

from __future__ import annotations

import argparse
import contextlib
from typing import TYPE_CHECKING

from learning_bot.adapters.terminal.commands import EXIT_OK
from learning_bot.cli.parser import Command

if TYPE_CHECKING:
    from learning_bot.app import App
    from learning_bot.settings import Settings


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--traces", type=int, default=600, metavar="N", help="runs to simulate (default 600)"
    )
    parser.add_argument(
        "--arms", type=int, default=40, metavar="N", help="arms in the inventory (default 40)"
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        metavar="N",
        help="random seed, for repeatable runs (default 0)",
    )
    parser.add_argument(
        "--force", action="store_true", help="simulate even into a learner with real traces"
    )
    parser.add_argument(
        "--phase",
        choices=("active", "passive"),
        default="active",
        help=(
            "active (the default) switches a passive learner to active so selection runs; "
            "passive records every component on every run, the data `learning-bot phase` "
            "projects going active from"
        ),
    )
    parser.add_argument(
        "--recall-target",
        type=float,
        default=None,
        metavar="SHARE",
        help=(
            "set the learner's recallTarget (e.g. 0.97), and its tokenBudget to the "
            "inventory's tokens so the target alone decides each set; the report puts the "
            "target beside the recall achieved (default: the learner's own settings)"
        ),
    )
    shape = parser.add_mutually_exclusive_group()
    shape.add_argument(
        "--sessions",
        dest="sessions",
        action="store_true",
        default=True,
        help=(
            "runs come as multi-turn sessions with a session key, their usage billed through "
            "a model of the provider's prompt cache, so status measures the cost saving "
            "(the default)"
        ),
    )
    shape.add_argument(
        "--per-request",
        dest="sessions",
        action="store_false",
        help=(
            "runs come one by one, each selected on its own with no session key (the way "
            "runtimes that name no session call select); no cache usage is reported"
        ),
    )


def _run(args: argparse.Namespace, settings: Settings) -> int:
    from learning_bot.app import build_app

    with contextlib.closing(build_app(settings, one_shot=True)) as app:
        return _simulate(app, args)


COMMAND = Command(
    name="simulate",
    help="run a synthetic agent workload to watch it learn",
    description=(
        "Record synthetic runs of an agent whose arms help with hidden probabilities, so "
        "status and the dashboard have something to show. Refuses a learner with real "
        "traces unless --force."
    ),
    arguments=_arguments,
    run=_run,
    no_url="it writes synthetic runs into the database directly",
)


def _simulate(app: App, args: argparse.Namespace) -> int:
    from learning_bot.engine.config import Phase
    from learning_bot.simulate import check_options, progress_bar, simulate

    check_options(args.traces, args.arms, args.seed, args.recall_target)
    service = app.service(create=True)
    result = simulate(
        service,
        traces=args.traces,
        arms=args.arms,
        seed=args.seed,
        force=args.force,
        progress=progress_bar(args.traces),
        sessions=args.sessions,
        phase=Phase(args.phase),
        recall_target=args.recall_target,
    )
    if args.phase == "passive":
        print(
            f"Recorded {result.traces:,} runs of a {result.arms}-arm agent (seed {args.seed}) into "
            f"learner '{service.learner}' in the passive phase, every component on every run"
            + (f", in {result.sessions:,} sessions." if result.sessions else ".")
        )
        print(
            f"Inventory: {result.arms} arms, {result.inventory_tokens:,} tokens; token budget "
            f"{result.token_budget:,}."
        )
        print("Next: `learning-bot phase` to see what going active would keep and save.")
        return EXIT_OK
    if result.switched_to_active:
        print(f"Switched learner '{service.learner}' to the active phase so selection runs.")
    print(
        f"Simulated {result.traces:,} runs of a {result.arms}-arm agent (seed {args.seed}) into "
        f"learner '{service.learner}': {result.baseline_runs:,} baseline, "
        f"{result.selected_runs:,} selected"
        + (f", in {result.sessions:,} sessions." if result.sessions else ".")
    )
    for line in result.report_lines():
        print(line)
    print("Next: `learning-bot status` to see the posteriors, `learning-bot console` to chat.")
    return EXIT_OK
