"""`learning-bot db upgrade|verify|url|replay-dead-letters`: database maintenance."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from adapters.terminal.commands import EXIT_ERROR, EXIT_OK, EXIT_USAGE, CliError
from learning_bot.cli.parser import Commands

if TYPE_CHECKING:
    from engine.records import RunRecord
    from learning_bot.settings import Settings


def register(sub: Commands) -> None:
    db = sub.add_parser("db", help="database maintenance", description="Database maintenance.")
    db.add_argument(
        "action",
        choices=("upgrade", "verify", "url", "replay-dead-letters"),
        help="upgrade: migrate the schema; verify: recompute every posterior from its "
        "observations; url: print the database URL in use; replay-dead-letters: write the "
        "spooled runs the database refused, once what refused them is fixed",
    )
    db.add_argument(
        "--dry-run",
        action="store_true",
        help="replay-dead-letters: list what would be replayed, write nothing",
    )
    db.add_argument(
        "--spool-dir",
        metavar="DIR",
        help="replay-dead-letters: the spool directory (default: LEARNING_BOT_SPOOL_DIR, else "
        "the one the database URL gives)",
    )
    db.set_defaults(run=_run, no_url="it maintains the database directly")


def _run(args: argparse.Namespace, settings: Settings) -> int:
    if args.action != "replay-dead-letters" and (args.dry_run or args.spool_dir):
        raise CliError(
            "--dry-run and --spool-dir go with `db replay-dead-letters` only", EXIT_USAGE
        )
    if args.action == "replay-dead-letters":
        return _replay_dead_letters(settings, args.spool_dir, dry_run=args.dry_run)
    return _db(args.action, settings.database_url)


def _replay_dead_letters(settings: Settings, spool_dir: str | None, *, dry_run: bool) -> int:
    """Replay the dead-letter file into the database (by learner name), or list it."""
    from pathlib import Path

    from storage import SqlStore, default_database_url
    from storage.spool import DEAD_LETTER, default_spool_root, replay_dead_letters

    target = settings.database_url or default_database_url()
    root = Path(spool_dir) if spool_dir else default_spool_root(target)
    path = root / DEAD_LETTER
    store = SqlStore(target, auto_create=False, pool=settings.pool)
    try:
        config = settings.config

        def resolve(name: str, record: RunRecord) -> int:
            """A learner by name; one this creates (a new database) gets the configured
            settings, as a learner created by a first observe does."""
            state = store.open_learner(
                name, record.phase, config.learner_settings(), config.half_life
            )
            return state.id

        report = replay_dead_letters(root, store.record_runs, resolve, dry_run=dry_run)
    finally:
        store.close()
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


def _db(action: str, url: str | None) -> int:
    from storage import default_database_url, make_engine, upgrade
    from storage.database import ensure_schema

    target = url or default_database_url()
    if action == "url":
        print(target)
        return EXIT_OK
    engine = make_engine(target)
    try:
        if action == "upgrade":
            before, after = upgrade(engine)
            if before == after:
                print(f"The schema is already at revision {after}.")
            else:
                print(f"Upgraded the schema from {before or 'empty'} to revision {after}.")
            return EXIT_OK
        ensure_schema(engine, auto_create=False)
    finally:
        engine.dispose()
    from engine.service import LearningService
    from storage import SqlStore

    store = SqlStore(target, auto_create=False)
    failed = False
    try:
        for name in store.learner_names():
            report = LearningService(store, learner=name).verify()
            state = "ok" if report.ok else "FAILED"
            print(
                f"{name}: {state} — {report.arms_checked} arms, {report.traces_checked} traces, "
                f"{report.observations_checked} changes in current epochs"
            )
            for problem in report.problems:
                print(f"  {problem.arm_id or '-'}: {problem.message}")
            failed |= not report.ok
    finally:
        store.close()
    from storage.spool import dead_letters, default_spool_root

    root = default_spool_root(target)
    dead = dead_letters(root)
    if dead:
        print(
            f"spool: {len(dead)} run(s) the database refused on replay are kept in "
            f"{root / 'dead-letter.jsonl'} (latest reason: {dead[-1].get('reason', '?')}); "
            "once that is fixed, `learning-bot db replay-dead-letters` writes them"
        )
    return EXIT_ERROR if failed else EXIT_OK
