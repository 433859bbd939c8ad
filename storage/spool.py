"""A local, durable spool for runs that storage could not take: append-only JSON lines
(storage.spool_lines), fsynced before the caller hears back, replayed in order (and
idempotently, by trace id) when storage answers again (storage.spool_writes). Each process
appends to its own locked directory under the spool root and adopts those of dead processes
(storage.spool_dirs); what storage refuses on replay goes to the dead-letter file
(storage.dead_letters)."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import BinaryIO, NoReturn

from learning_bot.engine.errors import Unavailable
from learning_bot.engine.records import RunRecord
from learning_bot.engine.store_records import PendingArmOutcome, PendingEvidence
from learning_bot.storage.dead_letters import DeadLetterFile
from learning_bot.storage.outage_log import StateLog
from learning_bot.storage.spool_dirs import ProcessDir
from learning_bot.storage.spool_lines import (
    Spooled,
    evidence_line,
    outcome_line,
    read_line,
    spool_line,
)
from learning_bot.storage.spool_writes import (
    ReplayWriter,
    Resolve,
    Row,
    Write,
    WriteEvidence,
    WriteOutcome,
    refusal_reason,
)

log = logging.getLogger("learning_bot.spool")

DEFAULT_MAX_BYTES = 256 * 1024 * 1024
SEGMENT_BYTES = 4 * 1024 * 1024
"""The open segment is closed and a new one started once it holds this many bytes."""


class SpoolFull(Unavailable):
    """Storage is unavailable and the spool has no room left: the run was not kept."""


class Spool:
    """The spool root; this process appends to its own locked directory.

    Appends go to one open segment, kept open and rotated by size, and the spool's size is
    kept in memory: an append lists no directory, whatever the number of runs waiting."""

    def __init__(
        self,
        root: Path | str,
        *,
        max_bytes: int = DEFAULT_MAX_BYTES,
        segment_bytes: int = SEGMENT_BYTES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`clock`: seconds, for the refusals' log summaries (at most one a minute)."""
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.max_bytes = max_bytes
        self.segment_bytes = segment_bytes
        self._lock = threading.Lock()
        self._replaying = threading.Lock()
        self._dir = ProcessDir(self.root)
        self.dir = self._dir.path
        self._active: BinaryIO | None = None
        self._has_segments = False
        self._active_path: Path | None = None
        self._active_bytes = 0
        self._next_number = 1
        self._bytes = self._measure()
        self.full = False
        """Whether the last append was refused (the state its log lines are written for)."""
        self._full_log = StateLog(log, "the spool refuses runs", level=logging.ERROR, clock=clock)
        self.dead_letters = DeadLetterFile(self.root)
        self.dead_path = self.dead_letters.path

    # -- state ------------------------------------------------------------------------------

    def _measure(self) -> int:
        """The bytes every process's segments hold (listed at start and on each replay)."""
        total = 0
        for path in self.root.glob("p*/*.jsonl"):
            with contextlib.suppress(FileNotFoundError):  # replayed meanwhile
                total += path.stat().st_size
        return total

    def orphaned(self) -> bool:
        """Whether a dead process left a directory under this root (storage.spool_dirs)."""
        return self._dir.orphaned()

    def adopt(self) -> int:
        """Move the segments of dead processes into this process's directory; returns how
        many were moved (storage.spool_dirs)."""
        return self._dir.adopt()

    def _segments(self) -> list[Path]:
        """Every segment this process may replay: its own, and those of dead processes."""
        self.adopt()
        return sorted(self.dir.glob("*.jsonl"), key=lambda p: p.stat().st_mtime_ns)

    def dead_letter_count(self) -> int:
        """The entries of the dead-letter file, counted again only when the file changed (one
        stat call): `learning-bot db replay-dead-letters` may have emptied it."""
        return self.dead_letters.counted()

    def pending(self) -> bool:
        """Whether runs wait here (kept in memory: this is asked on every write)."""
        return self._active is not None or self._has_segments

    def size_bytes(self) -> int:
        """The bytes waiting in the spool (this process's count, measured again on replay)."""
        return self._bytes

    # -- writing -----------------------------------------------------------------------------

    def append(
        self, learner_id: int, records: Sequence[RunRecord], *, name: str | None = None
    ) -> None:
        """Durably append (under the learner's `name` when its id is not known yet); raises
        SpoolFull (and writes nothing) when over the limit or when the disk refuses."""
        lines = "".join(spool_line(learner_id, r, name) + "\n" for r in records)
        self._append(lines.encode("utf-8"), len(records))

    def append_evidence(
        self, learner_id: int, pending: PendingEvidence, *, name: str | None = None
    ) -> None:
        """Durably append per-feature evidence, behind the runs it came from; raises SpoolFull
        as `append` does."""
        self._append((evidence_line(learner_id, pending, name) + "\n").encode("utf-8"), 0)

    def append_outcome(
        self, learner_id: int, pending: PendingArmOutcome, *, name: str | None = None
    ) -> None:
        """Durably append a per-arm outcome, behind the runs already waiting (the run it
        completes among them); raises SpoolFull as `append` does."""
        self._append((outcome_line(learner_id, pending, name) + "\n").encode("utf-8"), 1)

    def _append(self, data: bytes, count: int) -> None:
        with self._lock:
            if self._bytes + len(data) > self.max_bytes:
                self._refuse(
                    f"storage is unavailable and the local spool is full ({self.max_bytes} bytes)",
                    count,
                )
            try:
                handle = self._segment_for_append()
            except OSError as exc:
                self._refuse(_cannot_write(exc), count)
            start = self._active_bytes
            try:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            except OSError as exc:
                # Take the partial write back so that no torn line is left behind it.
                with contextlib.suppress(OSError):
                    os.ftruncate(handle.fileno(), start)
                self._close_active()
                self._refuse(_cannot_write(exc), count)
            self._has_segments = True
            self._active_bytes += len(data)
            self._bytes += len(data)
            if self.full:
                self.full = False
                self._full_log.ended(f"the spool at {self.root} takes runs again", logging.WARNING)
            if self._active_bytes >= self.segment_bytes:
                self._close_active()

    def _refuse(self, reason: str, count: int) -> NoReturn:
        self.full = True
        self._full_log.occurred(reason, "refusing runs until it has room")
        self._full_log.count("run(s) refused", count)
        raise SpoolFull(reason)

    def _segment_for_append(self) -> BinaryIO:
        if self._active is None:
            if self._next_number == 1:
                existing = sorted(self.dir.glob("*.jsonl"))  # once: the folder is this process's
                if existing:
                    self._next_number = int(existing[-1].stem.split("-")[0]) + 1
            self._active_path = self.dir / f"{self._next_number:012d}.jsonl"
            self._next_number += 1
            self._active = open(self._active_path, "ab")  # noqa: SIM115
            self._active_bytes = 0
            fd = os.open(self.dir, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        return self._active

    def _close_active(self) -> None:
        if self._active is not None:
            with contextlib.suppress(OSError):
                self._active.close()
        self._active = None
        self._active_path = None
        self._active_bytes = 0

    # -- replay ------------------------------------------------------------------------------

    def replay(
        self,
        write: Write,
        resolve: Resolve | None = None,
        write_outcome: WriteOutcome | None = None,
        write_evidence: WriteEvidence | None = None,
    ) -> int:
        """Write spooled runs oldest first; a segment is deleted once all of it is stored or
        dead-lettered. Stops (keeping what is left) when storage is still unavailable; a run
        storage refuses for any other reason goes to the dead-letter file and replay goes on.
        A run is written under the learner's phase at replay (`under_stored_phase`)."""
        writer = ReplayWriter(write, resolve, write_outcome, write_evidence, self._dead_letter)
        with self._replaying:
            with self._lock:
                segments = [s for s in self._segments() if s != self._active_path]
                if not segments and self._active is not None:
                    # Only the open segment is left: new runs go to a fresh one meanwhile.
                    # (While older segments wait, a failed attempt leaves the open one as it
                    # is, so an outage does not start a new file per retry.)
                    self._close_active()
                    segments = self._segments()
                self._has_segments = self._has_segments or bool(segments)
            done = 0
            for segment in self._then_open(segments):
                done += writer.write(self._read(segment))
                segment.unlink()
                log.info("replayed spool segment %s", segment.name)
            with self._lock:
                self._has_segments = self._active is not None or any(self.dir.glob("*.jsonl"))
                self._bytes = self._measure()
            return done

    def _then_open(self, segments: list[Path]) -> Iterator[Path]:
        """The segments to replay and, once they are all stored, the one left open while they
        waited (closed now): storage answers, so its runs need not wait for the next retry."""
        yield from segments
        with self._lock:
            path = self._active_path
            if path is None or path in segments:
                return
            self._close_active()
        yield path

    def _read(self, segment: Path) -> Iterator[Row]:
        with open(segment, encoding="utf-8", errors="surrogateescape") as handle:
            for number, line in enumerate(handle, 1):
                if not line.endswith("\n"):
                    # A torn last line: its append never returned, so nobody was told.
                    log.warning("ignoring an unfinished line %d in %s", number, segment.name)
                    break
                item: Spooled
                try:
                    learner_id, name, item = read_line(line)
                except Exception as exc:  # a line no codec of this version reads
                    self._dead_letter(line.rstrip("\n"), refusal_reason(exc))
                    continue
                yield (learner_id, name), item

    def _dead_letter(self, line: str, reason: str) -> None:
        """Keep a refused line (once, even if its segment is replayed again) and log it."""
        self.dead_letters.add(line, reason)

    def close(self) -> None:
        """Release this process's directory; an empty one is removed."""
        with self._lock:
            self._close_active()
            self._dir.release()


def _cannot_write(exc: OSError) -> str:
    return f"storage is unavailable and the local spool cannot be written ({exc.strerror or exc})"


def default_spool_root(database_url: str) -> Path:
    """LEARNING_BOT_SPOOL_DIR, else beside a SQLite file, else in the user data directory."""
    configured = os.environ.get("LEARNING_BOT_SPOOL_DIR", "").strip()
    if configured:
        return Path(configured)
    from learning_bot.storage.database import sqlite_file

    path = sqlite_file(database_url)
    if path is not None:
        return path.with_name(path.name + ".spool")
    import hashlib

    from platformdirs import user_data_dir

    digest = hashlib.sha256(database_url.encode()).hexdigest()[:16]
    return Path(user_data_dir("learning-bot", appauthor=False)) / "spool" / digest
