"""`learning-bot db upgrade|verify|url`: database maintenance."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from adapters.terminal.commands import EXIT_ERROR, EXIT_OK
from learning_bot.cli.parser import Commands

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from learning_bot.settings import Settings


def register(sub: Commands) -> None:
    db = sub.add_parser("db", help="database maintenance", description="Database maintenance.")
    db.add_argument(
        "action",
        choices=("upgrade", "verify", "url"),
        help="upgrade: migrate the schema; verify: recompute every posterior from its "
        "observations; url: print the database URL in use",
    )
    db.add_argument(
        "--json",
        action="store_true",
        help="print the result as JSON, for scripts (schema: docs/cli-json.md)",
    )
    db.set_defaults(run=_run, no_url="it maintains the database directly")


def _run(args: argparse.Namespace, settings: Settings) -> int:
    return _db(args.action, settings.database_url, as_json=args.json)


def _upgrade(engine: Engine) -> tuple[str | None, str]:
    """`storage.upgrade`, with storage that does not answer said in one line (Unavailable)
    rather than as the driver's own multi-line error."""
    from sqlalchemy.exc import DBAPIError, OperationalError

    from engine.errors import Unavailable
    from storage import upgrade
    from storage.database import is_unavailable

    try:
        return upgrade(engine)
    except DBAPIError as exc:
        if not (is_unavailable(exc) or isinstance(exc, OperationalError)):
            raise
        lines = str(exc.orig or exc).strip().splitlines() or [type(exc).__name__]
        raise Unavailable(f"storage is unavailable: {lines[0]}") from exc


def _db(action: str, url: str | None, *, as_json: bool = False) -> int:
    from storage import default_database_url, make_engine
    from storage.database import ensure_schema

    target = url or default_database_url()
    if action == "url":
        print(json.dumps({"url": target}) if as_json else target)
        return EXIT_OK
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
    from engine.service import LearningService
    from storage import SqlStore

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
    from storage.spool import dead_letters, default_spool_root

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
            f"{root / 'dead-letter.jsonl'} (latest reason: {dead[-1].get('reason', '?')})"
        )
    return EXIT_ERROR if failed else EXIT_OK
