"""`learning-bot db upgrade|verify|url|replay-dead-letters`: database maintenance."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from learning_bot.adapters.terminal.commands import EXIT_ERROR, EXIT_OK, EXIT_USAGE, CliError
from learning_bot.cli.parser import Command, add_json_option

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from learning_bot.settings import Settings
    from learning_bot.storage.spool_lines import Spooled


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "action",
        choices=("upgrade", "verify", "url", "replay-dead-letters"),
        help="upgrade: migrate the schema; verify: recompute every posterior from its "
        "observations; url: print the database URL in use; replay-dead-letters: write the "
        "spooled runs the database refused, once what refused them is fixed",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="replay-dead-letters: list what would be replayed, write nothing",
    )
    parser.add_argument(
        "--spool-dir",
        metavar="DIR",
        help="replay-dead-letters: the spool directory (default: LEARNING_BOT_SPOOL_DIR, else "
        "the one the database URL gives)",
    )
    add_json_option(parser, "the result")


def _run(args: argparse.Namespace, settings: Settings) -> int:
    if args.action != "replay-dead-letters" and (args.dry_run or args.spool_dir):
        raise CliError(
            "--dry-run and --spool-dir go with `db replay-dead-letters` only", EXIT_USAGE
        )
    if args.action == "replay-dead-letters":
        return _replay_dead_letters(
            settings, args.spool_dir, dry_run=args.dry_run, as_json=args.json
        )
    return _db(args.action, settings.database_url, as_json=args.json)


COMMAND = Command(
    name="db",
    help="database maintenance",
    description="Database maintenance.",
    arguments=_arguments,
    run=_run,
    no_url="it maintains the database directly",
)


def _replay_dead_letters(
    settings: Settings, spool_dir: str | None, *, dry_run: bool, as_json: bool = False
) -> int:
    """Replay the dead-letter file into the database (by learner name), or list it."""
    from pathlib import Path

    from learning_bot.storage import SqlStore, default_database_url
    from learning_bot.storage.dead_letters import DEAD_LETTER, replay_dead_letters
    from learning_bot.storage.spool import default_spool_root
    from learning_bot.storage.spool_writes import evidence_writer, outcome_under_stored_phase

    target = settings.database_url or default_database_url()
    root = Path(spool_dir) if spool_dir else default_spool_root(target)
    path = root / DEAD_LETTER
    store = SqlStore(target, auto_create=False, pool=settings.pool)
    try:
        config = settings.config

        def resolve(name: str, record: Spooled) -> int:
            """A learner by name; one this creates (a new database) gets the configured
            settings, as a learner created by a first observe does."""
            state = store.open_learner(
                name, record.phase, config.learner_settings(), config.half_life
            )
            return state.id

        report = replay_dead_letters(
            root,
            store.record_runs,
            resolve,
            write_outcome=outcome_under_stored_phase(store.record_arm_outcome),
            write_evidence=evidence_writer(store.add_context_evidence),
            dry_run=dry_run,
        )
    finally:
        store.close()
    failed = report.stopped is not None or bool(report.kept)
    if as_json:
        print(
            json.dumps(
                {
                    "file": str(path),
                    "dryRun": dry_run,
                    "entries": report.entries,
                    "learners": dict(sorted(report.learners.items())),
                    "stored": report.stored,
                    "duplicates": report.duplicates,
                    "keptAgain": len(report.kept),
                    "latestReason": report.kept[-1]["reason"] if report.kept else None,
                    "stopped": report.stopped,
                }
            )
        )
        return EXIT_ERROR if failed and not dry_run else EXIT_OK
    if not report.entries:
        print(f"No dead letters in {path}.")
        return EXIT_OK
    per_learner = ", ".join(f"{k} {v}" for k, v in sorted(report.learners.items()))
    if dry_run:
        print(f"Would replay {report.entries} run(s) from {path} ({per_learner}); nothing written.")
        return EXIT_OK
    print(
        f"Replayed {report.entries - len(report.kept)} of {report.entries} dead-lettered run(s) "
        f"({per_learner}): {report.stored} stored, {report.duplicates} already stored."
    )
    if report.stopped is not None:
        print(f"Stopped: {report.stopped}; the rest stays in {path}.", file=sys.stderr)
        return EXIT_ERROR
    if report.kept:
        print(
            f"{len(report.kept)} run(s) refused again stay in {path} "
            f"(latest reason: {report.kept[-1]['reason']}).",
            file=sys.stderr,
        )
        return EXIT_ERROR
    return EXIT_OK


def _upgrade(engine: Engine) -> tuple[str | None, str]:
    """`storage.upgrade`, with storage that does not answer said in one line (Unavailable)
    rather than as the driver's own multi-line error."""
    from sqlalchemy.exc import DBAPIError, OperationalError

    from learning_bot.engine.errors import Unavailable
    from learning_bot.storage import upgrade
    from learning_bot.storage.database import is_unavailable

    try:
        return upgrade(engine)
    except DBAPIError as exc:
        if not (is_unavailable(exc) or isinstance(exc, OperationalError)):
            raise
        lines = str(exc.orig or exc).strip().splitlines() or [type(exc).__name__]
        raise Unavailable(f"storage is unavailable: {lines[0]}") from exc


def _db(action: str, url: str | None, *, as_json: bool = False) -> int:
    from learning_bot.storage import default_database_url, make_engine
    from learning_bot.storage.database import ensure_schema, sqlite_file

    target = url or default_database_url()
    if action == "url":
        print(json.dumps({"url": target}) if as_json else target)
        return EXIT_OK
    path = sqlite_file(target)
    if action == "verify" and path is not None and not path.exists():
        raise CliError(f"no database at {path}: nothing to verify", EXIT_ERROR)
    engine = make_engine(target)
    try:
        if action == "upgrade":
            before, after = _upgrade(engine)
            if as_json:
                print(json.dumps({"before": before, "after": after, "upgraded": before != after}))
            elif before == after:
                print(f"The schema is already at revision {after}.")
            else:
                print(f"Upgraded the schema from {before or 'empty'} to revision {after}.")
            return EXIT_OK
        ensure_schema(engine, auto_create=False)
    finally:
        engine.dispose()
    from learning_bot.engine.service import LearningService
    from learning_bot.storage import SqlStore

    store = SqlStore(target, auto_create=False)
    failed = False
    learners: list[dict[str, Any]] = []
    try:
        for name in store.learner_names():
            report = LearningService(store, learner=name).verify()
            learners.append(
                {
                    "learner": name,
                    "ok": report.ok,
                    "armsChecked": report.arms_checked,
                    "tracesChecked": report.traces_checked,
                    "observationsChecked": report.observations_checked,
                    "problems": [
                        {"armId": p.arm_id, "message": p.message} for p in report.problems
                    ],
                }
            )
            failed |= not report.ok
    finally:
        store.close()
    from learning_bot.storage.dead_letters import dead_letters
    from learning_bot.storage.spool import default_spool_root

    root = default_spool_root(target)
    dead = dead_letters(root)
    if as_json:
        spool = {
            "deadLetters": len(dead),
            "deadLetterFile": str(root / "dead-letter.jsonl") if dead else None,
            "latestReason": dead[-1].get("reason") if dead else None,
        }
        print(json.dumps({"ok": not failed, "learners": learners, "spool": spool}, indent=2))
        return EXIT_ERROR if failed else EXIT_OK
    for each in learners:
        state = "ok" if each["ok"] else "FAILED"
        print(
            f"{each['learner']}: {state} — {each['armsChecked']} arms, "
            f"{each['tracesChecked']} traces, {each['observationsChecked']} changes in "
            "current epochs"
        )
        for problem in each["problems"]:
            print(f"  {problem['armId'] or '-'}: {problem['message']}")
    if dead:
        print(
            f"spool: {len(dead)} run(s) the database refused on replay are kept in "
            f"{root / 'dead-letter.jsonl'} (latest reason: {dead[-1].get('reason', '?')}); "
            "once that is fixed, `learning-bot db replay-dead-letters` writes them"
        )
    return EXIT_ERROR if failed else EXIT_OK
