"""`learning-bot export`: the learner's traces and posteriors on stdout."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from learning_bot.adapters.terminal.commands import EXIT_OK, EXIT_USAGE, CliError
from learning_bot.cli.parser import Command

if TYPE_CHECKING:
    from learning_bot.app import App
    from learning_bot.settings import Settings


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--format",
        choices=("json", "jsonl", "csv"),
        default="json",
        help="json: one document (default); jsonl: one trace per line, for large learners; "
        "csv: one table, chosen with --table",
    )
    parser.add_argument(
        "--table",
        choices=("traces", "arms", "posteriors"),
        help="csv: the one table to write (arms: one row per arm of each trace)",
    )
    parser.add_argument("--no-traces", action="store_true", help="json: leave the traces out")
    parser.add_argument(
        "--no-posteriors", action="store_true", help="json: leave the posteriors out"
    )
    parser.add_argument("--compact", action="store_true", help="json: one line, no indentation")


def _run(args: argparse.Namespace, settings: Settings) -> int:
    from learning_bot.cli.chat import learner_app

    with learner_app(settings, args) as app:
        return _export(app, args)


COMMAND = Command(
    name="export",
    help="traces and posteriors as JSON, JSON lines or CSV (on stdout)",
    description="Write the learner's traces and posteriors to stdout.",
    arguments=_arguments,
    run=_run,
    no_url="it reads the database directly",
)


def _export(app: App, args: argparse.Namespace) -> int:
    from learning_bot.bot.export import export_csv, export_json, export_jsonl

    service = app.service()
    if args.format == "csv":
        if args.table is None:
            raise CliError(
                "--format csv writes one table",
                EXIT_USAGE,
                hint="add --table traces, arms or posteriors",
            )
        chunks = export_csv(service, args.table)
    elif args.format == "jsonl":
        chunks = export_jsonl(service)
    else:
        if args.no_traces and args.no_posteriors:
            raise CliError("nothing to export: --no-traces and --no-posteriors", EXIT_USAGE)
        chunks = export_json(
            service,
            traces=not args.no_traces,
            posteriors=not args.no_posteriors,
            indent=not args.compact,
        )
    for chunk in chunks:
        sys.stdout.write(chunk)
    sys.stdout.flush()
    return EXIT_OK
