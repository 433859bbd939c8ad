"""`learning-bot replay FILE...`: what selection would have kept and saved on a user's own agent
logs, before anything is installed or switched on.

The logs are read one line at a time (learning_bot.replay) into the runs a passive learner
would have recorded, and the projection (engine.projection) replays the active policy over them
in memory, learning as it goes. No database is opened and nothing is written."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from learning_bot.adapters.terminal.commands import EXIT_OK, EXIT_USAGE, CliError
from learning_bot.cli.parser import Command

if TYPE_CHECKING:
    from learning_bot.engine.projection_report import Projection, SettingProjection
    from learning_bot.replay.reader import ReadSummary
    from learning_bot.replay.window import Window
    from learning_bot.settings import Settings


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "files", nargs="+", metavar="FILE", help="log files (JSON lines); - reads standard input"
    )
    parser.add_argument(
        "--tools",
        metavar="FILE",
        help=(
            "the tool definitions your agent sends (a JSON list, or an object with `tools`), "
            "for logs that do not record them (OpenClaw transcripts); without it, the tools "
            "the transcripts called, at an assumed size each"
        ),
    )
    parser.add_argument(
        "--runs",
        type=int,
        default=None,
        metavar="N",
        help="replay the latest N runs (default: the projection's own bound)",
    )
    parser.add_argument(
        "--budget",
        type=int,
        action="append",
        metavar="TOKENS",
        help="a token budget to project (repeat for several; default: the current one and "
        "a few around it)",
    )
    parser.add_argument("--seed", type=int, default=0, metavar="N", help="random seed (default 0)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def _run(args: argparse.Namespace, settings: Settings) -> int:
    from learning_bot.engine.bounds import MAX_COUNT, MAX_SEED
    from learning_bot.engine.projection import MAX_RUNS, project
    from learning_bot.engine.projection_report import DEFAULT_RUNS
    from learning_bot.replay.reader import STDIN, LogReader, load_tools

    if not 0 <= args.seed <= MAX_SEED:
        raise CliError(f"--seed must be from 0 to {MAX_SEED:,}, got {args.seed}", EXIT_USAGE)
    from learning_bot.replay.window import latest_runs

    if args.runs is not None and not 1 <= args.runs <= MAX_RUNS:
        raise CliError(f"--runs must be from 1 to {MAX_RUNS:,}", EXIT_USAGE)
    if any(not 1 <= b <= MAX_COUNT for b in args.budget or ()):
        raise CliError(f"--budget must be from 1 to {MAX_COUNT:,} tokens", EXIT_USAGE)
    for path in args.files:
        if path == STDIN:
            continue
        try:
            with open(path, "rb"):
                pass
        except OSError as exc:
            raise CliError(f"cannot read {path}: {exc.strerror or exc}", EXIT_USAGE) from None
    tools = load_tools(args.tools) if args.tools else ()
    reader = LogReader(args.files, tools=tools, config=settings.config)
    bar = _progress(reader.total_bytes())
    reader.progress = bar.update
    config = settings.config
    try:
        window = latest_runs(
            reader.runs(), args.runs or DEFAULT_RUNS, max(0, config.session_idle_seconds) * 1000
        )
    finally:
        bar.close()
    projection = project(
        window.runs,
        None,
        config,
        budgets=args.budget,
        prices=settings.prices,
        limit=max(1, len(window.runs)),
        seed=args.seed,
    )
    summary = reader.summary
    if args.json:
        print(json.dumps(_json(projection, summary, window), indent=2))
    else:
        for line in report_lines(projection, summary, window):
            print(line)
    return EXIT_OK


COMMAND = Command(
    name="replay",
    help="project what selection would save on your own agent logs (nothing is written)",
    description=(
        "Read agent logs you already have and show what selection would have kept and "
        "saved on that traffic, with 95% intervals. Reads JSON lines of Anthropic Messages "
        'or OpenAI Chat Completions / Responses exchanges ({"request": ..., "response": '
        "...} per line, as logging proxies write them) and OpenClaw session transcripts, "
        "the shape recognised from each line. Lines that cannot be read are counted and "
        "named, never fatal. No server or database is used."
    ),
    arguments=_arguments,
    run=_run,
    no_url="it reads local files and needs no server",
)


def _progress(total: int | None) -> Any:
    """A tqdm bar of the bytes read, on stderr (silent when stderr is not a terminal)."""
    from tqdm import tqdm

    return tqdm(
        total=total,
        unit="B",
        unit_scale=True,
        desc="reading logs",
        file=sys.stderr,
        disable=not sys.stderr.isatty(),
    )


def _percent(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0f}%"


def _setting_line(s: SettingProjection) -> str:
    cost = (
        "cost saving not measurable"
        if s.cost_savings_percent is None
        else f"prompt cost cut by {_percent(s.cost_savings_percent)} "
        f"(95%: {_percent(s.cost_low)} to {_percent(s.cost_high)})"
    )
    mark = "  (current)" if s.current else ""
    return (
        f"  budget {s.token_budget:>7,}: kept {s.recall:.0%} of the tools the model used "
        f"(95%: {s.recall_low:.0%}-{s.recall_high:.0%}), {cost}, "
        f"prompt tokens -{s.token_savings_percent:.0f}%{mark}"
    )


def report_lines(projection: Projection, summary: ReadSummary, window: Window) -> list[str]:
    """What the command prints: what was read, the projection per setting, the bad lines."""
    formats = ", ".join(f"{n:,} {name}" for name, n in summary.formats.most_common())
    lines = [
        f"Read {summary.lines:,} line{'' if summary.lines == 1 else 's'} of {summary.files} "
        f"file(s): {summary.runs:,} model calls "
        f"in {summary.sessions:,} conversations ({formats or 'none'}), "
        f"{summary.tool_runs:,} of them calling tools; {len(summary.inventory):,} tools seen."
    ]
    if summary.assumed:
        lines.append(
            f"{len(summary.assumed):,} tool(s) were only seen called, their definitions "
            "unknown: sized at an assumed 250 tokens each (give --tools FILE for their real size)."
        )
    if summary.skipped_runs:
        lines.append(
            f"{summary.skipped_runs:,} model call(s) offered no tool and were left out "
            "(a transcript's tools come from --tools FILE when they were never seen called)."
        )
    if window.dropped:
        lines.append(
            f"The latest {len(window.runs) + window.cut:,} runs are replayed; "
            f"{window.dropped:,} older ones are not (--runs N replays more)."
        )
    if window.cut:
        lines.append(
            f"{window.cut:,} run(s) continuing a conversation begun before those were left out."
        )
    if projection.reason:
        lines.append(f"No projection: {projection.reason}")
    else:
        lines.append(
            f"Going active would have given, over {projection.runs:,} runs in "
            f"{projection.sessions:,} sessions (the policy replayed, learning as it goes):"
        )
        lines.extend(_setting_line(s) for s in projection.settings)
        s = projection.suggested
        if s is not None:
            lines.append(
                f"Suggested: budget {s.token_budget:,}, the least-cost setting keeping "
                f"{s.recall:.0%} of the tools the model used."
            )
        else:
            lines.append(
                "None of these budgets keeps 95% of the tools the model used; "
                "--budget TOKENS projects others."
            )
    lines.extend(bad_line_report(summary))
    return lines


def bad_line_report(summary: ReadSummary) -> list[str]:
    """The lines that could not be read: how many, and the first ones named."""
    if not summary.bad_lines:
        return []
    out = [f"{summary.bad_lines:,} line(s) could not be read and were skipped:"]
    out.extend(f"  {bad}" for bad in summary.named)
    more = summary.bad_lines - len(summary.named)
    if more > 0:
        out.append(f"  ... and {more:,} more")
    return out


def _json(projection: Projection, summary: ReadSummary, window: Window) -> dict[str, Any]:
    return {
        "read": {
            "files": summary.files,
            "lines": summary.lines,
            "runs": summary.runs,
            "toolRuns": summary.tool_runs,
            "sessions": summary.sessions,
            "formats": dict(summary.formats),
            "tools": len(summary.inventory),
            "assumedTools": sorted(summary.assumed),
            "skippedRuns": summary.skipped_runs,
            "badLines": summary.bad_lines,
            "named": [{"file": b.path, "line": b.line, "reason": b.reason} for b in summary.named],
        },
        "projection": projection.to_json(),
    }
