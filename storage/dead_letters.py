"""The dead-letter file beside a spool's process folders: the spooled runs, per-arm outcomes
and evidence that storage refused on replay for a reason other than being unavailable, one JSON
line each (`{"reason": ..., "at": ..., "run": <spool line>}`), kept once each; and their replay
(`learning-bot db replay-dead-letters`) once what refused them is fixed."""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from learning_bot.engine.errors import InvalidInput, NotFound, Unavailable
from learning_bot.engine.posterior import now_ms
from learning_bot.engine.store_records import PendingArmOutcome, PendingEvidence
from learning_bot.storage.spool_lines import Spooled, line_key, read_line
from learning_bot.storage.spool_writes import (
    Resolve,
    Write,
    WriteEvidence,
    WriteOutcome,
    refusal_reason,
    under_stored_phase,
)

log = logging.getLogger("learning_bot.spool")

DEAD_LETTER = "dead-letter.jsonl"
"""The dead-letter file's name, in the spool root."""
DEAD_LETTER_LOCK = "dead-letter.lock"
"""Taken (flock) to append to the dead-letter file or to rewrite it (replay_dead_letters)."""


@contextlib.contextmanager
def _lock(root: Path) -> Iterator[None]:
    with open(root / DEAD_LETTER_LOCK, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def dead_letters(root: Path | str) -> list[dict[str, Any]]:
    """The entries of a spool root's dead-letter file (empty when there is none)."""
    path = Path(root) / DEAD_LETTER
    entries: list[dict[str, Any]] = []
    with contextlib.suppress(FileNotFoundError), open(path, encoding="utf-8") as handle:
        for line in handle:
            if line.endswith("\n"):
                with contextlib.suppress(ValueError):
                    entries.append(json.loads(line))
    return entries


@dataclass
class DeadLetterFile:
    """A spool root's dead-letter file as one process appends to it: each refused line kept
    once (even if its segment is replayed again), and its entries counted."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.path = root / DEAD_LETTER
        self._seen: set[tuple[str, str]] | None = None
        self._stamp: tuple[int, int] | None = None
        self.count = 0
        self._count_stamp: tuple[int, int] | None = (-1, -1)
        self.counted()
        self.added = 0
        """Lines this process moved to the dead-letter file."""

    def counted(self) -> int:
        """The entries of the file, counted again only when the file changed (one stat
        call): `learning-bot db replay-dead-letters` may have emptied it."""
        stamp = self._stat()
        if stamp != self._count_stamp:
            self.count = 0 if stamp is None else len(dead_letters(self.root))
            self._count_stamp = stamp
        return self.count

    def _stat(self) -> tuple[int, int] | None:
        """The file's inode and size (None when there is no file)."""
        try:
            info = self.path.stat()
        except FileNotFoundError:
            return None
        return (info.st_ino, info.st_size)

    def add(self, line: str, reason: str) -> None:
        """Keep a refused spool line (once, even if its segment is replayed again) and log
        it."""
        key = line_key(line)
        with _lock(self.root):
            stamp = self._stat()
            if self._seen is None or stamp != self._stamp:
                # first use, or the file changed under us (replay_dead_letters rewrote it)
                self._seen = {line_key(e.get("run", "")) for e in dead_letters(self.root)}
            if key in self._seen:
                return
            entry = {"reason": reason, "at": now_ms(), "run": line}
            data = (json.dumps(entry, ensure_ascii=True) + "\n").encode("ascii")
            info = _write_synced(self.path, "ab", data)
            self._stamp = (info.st_ino, info.st_size)
        self._seen.add(key)
        self.count += 1
        self.added += 1
        log.error(
            "storage refused spooled run %s (%s); kept in %s and replay goes on",
            ascii(key[1][:80]),  # ids and reasons may hold what no log file can encode
            ascii(reason),
            self.path,
        )


@dataclass
class DeadLetterReplay:
    """What replay_dead_letters did (or, in a dry run, would try)."""

    entries: int = 0
    """Entries in the dead-letter file when it started."""
    stored: int = 0
    duplicates: int = 0
    """Runs the database already held (stored by an earlier replay or a client's retry)."""
    kept: list[dict[str, Any]] = field(default_factory=list)
    """Entries refused again (with the new reason), left in the file."""
    learners: dict[str, int] = field(default_factory=dict)
    """Entries per learner (its name, or `#<id>` for lines of earlier versions)."""
    stopped: str | None = None
    """Why the replay stopped before the end (storage unavailable); the rest is kept."""


def replay_dead_letters(
    root: Path | str,
    write: Write,
    resolve: Resolve,
    *,
    write_outcome: WriteOutcome | None = None,
    write_evidence: WriteEvidence | None = None,
    dry_run: bool = False,
) -> DeadLetterReplay:
    """Write the runs and per-arm outcomes of a spool root's dead-letter file once the cause
    of their refusal is fixed: by learner name (opened, or created in a new database), else by
    the id of lines of earlier versions. Stored and already-stored entries leave the file;
    entries refused again stay with the new reason. The file is locked meanwhile, so two
    replays (or a replay and a server adding an entry) never take the same entry twice; trace
    ids and outcome keys make an entry stored once whatever happens. An outcome needs
    `write_outcome` (without it, it stays, saying so). `dry_run` reads and counts, and writes
    nothing. A run is written under the learner's phase at replay (`under_stored_phase`)."""
    write = under_stored_phase(write)
    root = Path(root)
    report = DeadLetterReplay()
    if not root.is_dir():
        return report
    path = root / DEAD_LETTER
    with _lock(root):
        entries = dead_letters(root)
        report.entries = len(entries)
        keep: list[dict[str, Any]] = []
        ids: dict[str, int] = {}
        for entry in entries:
            line = str(entry.get("run", ""))
            learner = line_key(line)[0]
            report.learners[learner] = report.learners.get(learner, 0) + 1
            if dry_run or report.stopped is not None:
                keep.append(entry)
                continue
            try:
                item: Spooled
                learner_id, name, item = read_line(line)
                if name is not None:
                    if name not in ids:
                        ids[name] = resolve(name, item)
                    learner_id = ids[name]
                elif learner_id == 0:
                    raise NotFound("the line names no learner")
                if isinstance(item, PendingEvidence):
                    if write_evidence is None:
                        raise InvalidInput("this replay adds no per-feature evidence")
                    write_evidence(learner_id, item)
                    continue
                if isinstance(item, PendingArmOutcome):
                    if write_outcome is None:
                        raise InvalidInput("this replay records no per-arm outcomes")
                    write_outcome(learner_id, item)  # its key: recorded once however often
                    report.stored += 1
                    continue
                result = write(learner_id, [item])
            except Unavailable as exc:
                report.stopped = str(exc)
                keep.append(entry)
                continue
            except Exception as exc:
                again = {**entry, "reason": refusal_reason(exc), "at": now_ms()}
                report.kept.append(again)
                keep.append(again)
                continue
            if result.statuses[0] == "inserted":
                report.stored += 1
            elif result.statuses[0] == "duplicate":
                report.duplicates += 1
            else:  # a writer that spooled it: it is in a spool again, not lost
                report.stored += 1
        if not dry_run and report.entries:
            _rewrite(path, keep)
    return report


def _rewrite(path: Path, entries: Sequence[dict[str, Any]]) -> None:
    """Replace the dead-letter file with `entries` (removed when there are none), atomically."""
    if not entries:
        path.unlink(missing_ok=True)
        return
    temporary = path.with_name(path.name + ".new")
    data = "".join(json.dumps(e, ensure_ascii=True) + "\n" for e in entries).encode("ascii")
    _write_synced(temporary, "wb", data)
    temporary.replace(path)


def _write_synced(path: Path, mode: str, data: bytes) -> os.stat_result:
    """Write (mode "ab" or "wb") and fsync `data`; the file's stat once written."""
    with open(path, mode) as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
        return os.fstat(handle.fileno())
