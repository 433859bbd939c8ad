"""A local, durable spool for runs that storage could not take: append-only JSON lines, fsynced
before the caller hears back, replayed in order (and idempotently, by trace id) when storage
answers again. Each line names its learner, so it replays into a database restored or created
again (where learner ids differ). Each process owns a directory under the spool root, locked
(flock) while it lives: any live process sharing the root adopts the directory of a dead one by
taking its lock and moving its segments into its own, so each segment is replayed by one
process only."""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import secrets
import threading
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, BinaryIO, NoReturn

from learning_bot.engine.config import Phase
from learning_bot.engine.errors import Conflict, InvalidInput, NotFound, Unavailable
from learning_bot.engine.ports import (
    ArmOutcome,
    LearnerChanged,
    PendingArmOutcome,
    PendingEvidence,
    RecordResult,
    RunStatus,
    RunWriter,
)
from learning_bot.engine.posterior import now_ms
from learning_bot.engine.records import RunRecord, record_from_json, record_to_json, under_phase
from learning_bot.storage.outage_log import StateLog

log = logging.getLogger("learning_bot.spool")

DEFAULT_MAX_BYTES = 256 * 1024 * 1024
SEGMENT_BYTES = 4 * 1024 * 1024
"""The open segment is closed and a new one started once it holds this many bytes."""
REPLAY_BATCH = 500
DEAD_LETTER = "dead-letter.jsonl"
"""Runs the database refused on replay for a reason other than being unavailable, one JSON
line each (`{"reason": ..., "at": ..., "run": <spool line>}`), beside the process folders."""
DEAD_LETTER_LOCK = "dead-letter.lock"
"""Taken (flock) to append to the dead-letter file or to rewrite it (replay_dead_letters)."""


REPLAY_ATTEMPTS = 4
"""Writes of one replayed batch before it gives up while the learner's phase keeps changing."""

Write = Callable[[int, list[RunRecord]], RecordResult]


def under_stored_phase(write: Write) -> Write:
    """`write` for runs replayed from the spool or the dead-letter file: a run is recorded
    under the learner's phase at replay, not the one it was observed under. Its report is gone,
    so when storage answers that the phase changed (LearnerChanged) its rewards are made again
    from what the record kept (`engine.records.under_phase`: active, its referenced arms
    rewarded as observing it would have; passive, none) and it is written again. Its guard
    stays the one decided when it was observed (the settings then, not checked at replay)."""

    def write_replayed(learner_id: int, runs: list[RunRecord]) -> RecordResult:
        for _ in range(REPLAY_ATTEMPTS):
            try:
                return write(learner_id, runs)
            except LearnerChanged as changed:
                runs = [under_phase(r, changed.phase) for r in runs]
        raise Conflict("the runs could not be replayed: the learner's phase kept changing")

    return write_replayed


def outcome_under_stored_phase(
    record_arm_outcome: Callable[..., object],
) -> Callable[[int, PendingArmOutcome], object]:
    """Records a per-arm outcome replayed from the spool or the dead-letter file (once, by its
    key) under the learner's phase at replay, as runs are (`under_stored_phase`): when storage
    answers that the phase changed, the reward is applied to the posterior if the phase is
    active now, and only marked on its run if passive, and it is written again."""

    def write(learner_id: int, pending: PendingArmOutcome) -> object:
        for _ in range(REPLAY_ATTEMPTS):
            try:
                return record_arm_outcome(
                    learner_id,
                    pending.arm_id,
                    pending.reward,
                    referenced=pending.referenced,
                    conversation=pending.conversation,
                    apply_reward=pending.apply_reward,
                    at=pending.at,
                    once=pending.key,
                    phase=pending.phase,
                    loaded=pending.loaded,
                )
            except LearnerChanged as changed:
                active = changed.phase is Phase.ACTIVE
                pending = replace(pending, phase=changed.phase, apply_reward=active)
        raise Conflict("the outcome could not be replayed: the learner's phase kept changing")

    return write


def evidence_writer(
    add_context_evidence: Callable[..., object],
) -> Callable[[int, PendingEvidence], object]:
    """Adds spooled per-feature evidence through a store's `add_context_evidence`."""

    def write(learner_id: int, pending: PendingEvidence) -> object:
        return add_context_evidence(
            learner_id,
            [(features, dict(rewards)) for features, rewards in pending.runs],
            pending.keep,
            pending.max_cells,
            {arm: (d, n) for arm, d, n in pending.deferrals},
        )

    return write


class SpoolFull(Unavailable):
    """Storage is unavailable and the spool has no room left: the run was not kept."""


def spool_line(learner_id: int, record: RunRecord, name: str | None = None) -> str:
    """One spool line: the learner's name and id (0 for a learner storage has not opened
    yet) and the record's JSON (engine.records' codec). Replay goes by the name when there is
    one; the id is what lines of earlier versions carry alone."""
    head: dict[str, Any] = {"l": learner_id} if name is None else {"l": learner_id, "n": name}
    return json.dumps({**head, **record_to_json(record)}, separators=(",", ":"), allow_nan=False)


OUTCOME_PREFIX = '{"k":"arm",'
"""How a per-arm outcome's line starts (a run's line starts with `{"l":`)."""

EVIDENCE_PREFIX = '{"k":"ev",'
"""How a line of per-feature evidence starts (`PendingEvidence`)."""

Spooled = RunRecord | PendingArmOutcome | PendingEvidence


def _tagged_line(kind: str, learner_id: int, name: str | None, field: str, body: Any) -> str:
    """A spool line that is not a run: its kind, the learner's id and name, and its body."""
    head: dict[str, Any] = {"k": kind, "l": learner_id}
    if name is not None:
        head["n"] = name
    return json.dumps({**head, field: body}, separators=(",", ":"), allow_nan=False)


def _read_tagged_line(line: str, field: str) -> tuple[int, str | None, Any]:
    """A `_tagged_line`'s learner id, learner name and body (ValueError when malformed)."""
    data: dict[str, Any] = json.loads(line)
    name = data.get("n")
    if name is not None and not isinstance(name, str):
        raise ValueError("the learner name of a spool line must be a string")
    return int(data["l"]), name, data[field]


def evidence_line(learner_id: int, pending: PendingEvidence, name: str | None = None) -> str:
    """One spool line holding the per-feature evidence of observed runs (`PendingEvidence`):
    hashed features and rewards, never a message."""
    body = {
        "runs": [[list(fs), [list(r) for r in rewards]] for fs, rewards in pending.runs],
        "keep": pending.keep,
        "max": pending.max_cells,
        "d": [list(d) for d in pending.deferrals],
        "phase": pending.phase.value,
    }
    return _tagged_line("ev", learner_id, name, "e", body)


def _reward(value: Any) -> float:
    reward = float(value)
    if not 0.0 <= reward <= 1.0:  # NaN included
        raise ValueError("a spooled reward must be in [0, 1]")
    return reward


def read_evidence_line(line: str) -> tuple[int, str | None, PendingEvidence]:
    learner_id, name, e = _read_tagged_line(line, "e")
    runs = tuple(
        (
            tuple(int(f) for f in features),
            tuple((str(arm), _reward(reward)) for arm, reward in rewards),
        )
        for features, rewards in e["runs"]
    )
    deferrals = tuple((str(arm), int(d), int(n)) for arm, d, n in e["d"])
    keep = float(e["keep"])
    if not 0.0 < keep <= 1.0:
        raise ValueError("the evidence's keep factor must be in (0, 1]")
    pending = PendingEvidence(runs, keep, int(e["max"]), deferrals, Phase(e["phase"]))
    return learner_id, name, pending


def outcome_line(learner_id: int, pending: PendingArmOutcome, name: str | None = None) -> str:
    """One spool line holding a per-arm outcome (`PendingArmOutcome`)."""
    body = {
        "arm": pending.arm_id,
        "r": pending.reward,
        "ref": pending.referenced,
        "c": pending.conversation,
        "apply": pending.apply_reward,
        "at": pending.at,
        "key": pending.key,
        "phase": pending.phase.value,
    }
    if pending.loaded:
        body["loaded"] = True
    return _tagged_line("arm", learner_id, name, "o", body)


def read_outcome_line(line: str) -> tuple[int, str | None, PendingArmOutcome]:
    learner_id, name, o = _read_tagged_line(line, "o")
    conversation = o["c"]
    if conversation is not None and not isinstance(conversation, str):
        raise ValueError("the conversation of a spooled outcome must be a string")
    pending = PendingArmOutcome(
        str(o["arm"]),
        _reward(o["r"]),
        bool(o["ref"]),
        conversation,
        bool(o["apply"]),
        int(o["at"]),
        str(o["key"]),
        Phase(o["phase"]),
        o.get("loaded") is True,
    )
    return learner_id, name, pending


def read_spool_line(line: str) -> tuple[int, RunRecord]:
    """The learner id and record of a spool line, validated by the codec (lines written by
    earlier versions, with snake_case keys and arms as lists, read the same)."""
    learner_id, _name, record = read_named_line(line)
    return learner_id, record


def read_named_line(line: str) -> tuple[int, str | None, RunRecord]:
    """The learner id, learner name (None in lines of earlier versions) and record of a spool
    line."""
    data: dict[str, Any] = json.loads(line)
    name = data.get("n")
    if name is not None and not isinstance(name, str):
        raise ValueError("the learner name of a spool line must be a string")
    return int(data["l"]), name, record_from_json(data)


@contextlib.contextmanager
def _dead_letter_lock(root: Path) -> Iterator[None]:
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
    write: Callable[[int, list[RunRecord]], RecordResult],
    resolve: Callable[[str, Spooled], int],
    *,
    write_outcome: Callable[[int, PendingArmOutcome], object] | None = None,
    write_evidence: Callable[[int, PendingEvidence], object] | None = None,
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
    with _dead_letter_lock(root):
        entries = dead_letters(root)
        report.entries = len(entries)
        keep: list[dict[str, Any]] = []
        ids: dict[str, int] = {}
        for entry in entries:
            line = str(entry.get("run", ""))
            learner = _dead_key(line)[0]
            report.learners[learner] = report.learners.get(learner, 0) + 1
            if dry_run or report.stopped is not None:
                keep.append(entry)
                continue
            try:
                item: Spooled
                if line.startswith(OUTCOME_PREFIX):
                    learner_id, name, item = read_outcome_line(line)
                elif line.startswith(EVIDENCE_PREFIX):
                    learner_id, name, item = read_evidence_line(line)
                else:
                    learner_id, name, item = read_named_line(line)
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
                again = {**entry, "reason": _reason(exc), "at": now_ms()}
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
    with open(temporary, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    temporary.replace(path)


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
        name = f"p{os.getpid()}-{secrets.token_hex(3)}"
        # Made and locked under a name adopters do not look at, then renamed: a live process's
        # directory is never seen unlocked.
        making = self.root / f".new-{name}"
        making.mkdir()
        self._dir_lock = open(making / ".lock", "w")  # noqa: SIM115 - held for the process
        fcntl.flock(self._dir_lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        self.dir = self.root / name
        making.rename(self.dir)
        self._active: BinaryIO | None = None
        self._has_segments = False
        self._active_path: Path | None = None
        self._active_bytes = 0
        self._next_number = 1
        self._bytes = self._measure()
        self.full = False
        """Whether the last append was refused (the state its log lines are written for)."""
        self._full_log = StateLog(log, "the spool refuses runs", level=logging.ERROR, clock=clock)
        self.dead_path = self.root / DEAD_LETTER
        self._dead_seen: set[tuple[str, str]] | None = None
        self._dead_stamp: tuple[int, int] | None = None
        self.dead_count = 0
        self._count_stamp: tuple[int, int] | None = (-1, -1)
        self.dead_letter_count()
        self.dead_added = 0
        """Runs this process moved to the dead-letter file."""

    # -- state ------------------------------------------------------------------------------

    def _measure(self) -> int:
        """The bytes every process's segments hold (listed at start and on each replay)."""
        total = 0
        for path in self.root.glob("p*/*.jsonl"):
            with contextlib.suppress(FileNotFoundError):  # replayed meanwhile
                total += path.stat().st_size
        return total

    def _orphans(self) -> Generator[tuple[Path, Any], None, None]:
        """The directories of dead processes, each yielded with its lock held (released when
        the caller moves on): a process's lock is free only once it has ended."""
        for other in sorted(self.root.glob("p*")):
            if other == self.dir or not other.is_dir():
                continue
            try:
                handle = open(other / ".lock", "a")  # noqa: SIM115 - closed below
            except OSError:
                continue  # removed by another adopter meanwhile
            try:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    continue  # its process is alive and replays it
                yield other, handle
            finally:
                handle.close()

    def orphaned(self) -> bool:
        """Whether a dead process left a directory under this root (cheap: one listing and a
        lock attempt per directory)."""
        with contextlib.closing(self._orphans()) as found:
            return any(True for _ in found)

    def adopt(self) -> int:
        """Move the segments of dead processes into this process's directory (under their
        locks, so two adopters never both take one); returns how many were moved."""
        moved = 0
        with contextlib.closing(self._orphans()) as found:
            for other, _ in found:
                moved += self._take(other)
        if moved:
            log.warning("adopted %d spool segment(s) of a process that ended", moved)
        return moved

    def _take(self, other: Path) -> int:
        """Move a dead process's segments here (its lock held) and remove its directory."""
        moved = 0
        for segment in sorted(other.glob("*.jsonl")):
            target = self.dir / f"{segment.stem}-{other.name}.jsonl"
            try:
                segment.rename(target)
            except FileNotFoundError:
                continue
            moved += 1
        with contextlib.suppress(OSError):
            for leftover in other.iterdir():
                leftover.unlink(missing_ok=True)
            other.rmdir()
        return moved

    def _segments(self) -> list[Path]:
        """Every segment this process may replay: its own, and those of dead processes."""
        self.adopt()
        return sorted(self.dir.glob("*.jsonl"), key=lambda p: p.stat().st_mtime_ns)

    def dead_letter_count(self) -> int:
        """The entries of the dead-letter file, counted again only when the file changed (one
        stat call): `learning-bot db replay-dead-letters` may have emptied it."""
        try:
            info = self.dead_path.stat()
            stamp: tuple[int, int] | None = (info.st_ino, info.st_size)
        except FileNotFoundError:
            stamp = None
        if stamp != self._count_stamp:
            self.dead_count = 0 if stamp is None else len(dead_letters(self.root))
            self._count_stamp = stamp
        return self.dead_count

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
        write: Callable[[int, list[RunRecord]], RecordResult],
        resolve: Callable[[str, Spooled], int] | None = None,
        write_outcome: Callable[[int, PendingArmOutcome], object] | None = None,
        write_evidence: Callable[[int, PendingEvidence], object] | None = None,
    ) -> int:
        """Write spooled runs oldest first; a segment is deleted once all of it is stored or
        dead-lettered. Stops (keeping what is left) when storage is still unavailable; a run
        storage refuses for any other reason goes to the dead-letter file and replay goes on.
        A run is written under the learner's phase at replay (`under_stored_phase`)."""
        write = under_stored_phase(write)
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
            ids: dict[str, int] = {}
            for segment in self._then_open(segments):
                for (learner_id, name), batch in _batches(self._read(segment)):
                    target = learner_id
                    if name is not None and resolve is not None:
                        if name not in ids:
                            try:
                                ids[name] = resolve(name, batch[0])
                            except Unavailable:  # stop, keep it
                                raise
                            except Exception as exc:  # a name storage refuses
                                for item in batch:
                                    line = _line_of(learner_id, item, name)
                                    self._dead_letter(line, _reason(exc))
                                continue
                        target = ids[name]
                    elif target == 0:
                        for item in batch:
                            line = _line_of(0, item, name)
                            self._dead_letter(line, "no learner could be opened by name")
                        continue
                    first = batch[0]
                    if isinstance(first, PendingArmOutcome):
                        done += self._write_outcome(write_outcome, target, first, name)
                        continue
                    if isinstance(first, PendingEvidence):  # not a run: not counted
                        self._write_evidence(write_evidence, target, first, name)
                        continue
                    runs = [r for r in batch if isinstance(r, RunRecord)]
                    done += self._write_batch(write, target, runs, name)
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

    def _write_batch(
        self,
        write: Callable[[int, list[RunRecord]], RecordResult],
        learner_id: int,
        batch: list[RunRecord],
        name: str | None,
    ) -> int:
        """Write a batch; when storage refuses it (not as unavailable), write its runs one by
        one and dead-letter those refused alone. Raises Unavailable to stop the replay."""
        try:
            write(learner_id, batch)
            return len(batch)
        except Unavailable:
            raise
        except Exception as exc:
            if len(batch) == 1:
                self._dead_letter(spool_line(learner_id, batch[0], name), _reason(exc))
                return 0
        done = 0
        for record in batch:
            done += self._write_batch(write, learner_id, [record], name)
        return done

    def _write_evidence(
        self,
        write: Callable[[int, PendingEvidence], object] | None,
        learner_id: int,
        pending: PendingEvidence,
        name: str | None = None,
    ) -> None:
        """Add spooled evidence to storage; what storage refuses goes to the dead-letter file.
        Raises Unavailable to stop the replay."""
        if write is None:
            self._dead_letter(
                evidence_line(learner_id, pending, name), "this writer keeps no evidence"
            )
            return
        try:
            write(learner_id, pending)
        except Unavailable:
            raise
        except Exception as exc:
            self._dead_letter(evidence_line(learner_id, pending, name), _reason(exc))

    def _write_outcome(
        self,
        write: Callable[[int, PendingArmOutcome], object] | None,
        learner_id: int,
        pending: PendingArmOutcome,
        name: str | None = None,
    ) -> int:
        """Record a spooled outcome (its key makes a second replay change nothing); one
        storage refuses goes to the dead-letter file. Raises Unavailable to stop the replay."""
        if write is None:
            line = outcome_line(learner_id, pending, name)
            self._dead_letter(line, "this writer records no outcomes")
            return 0
        try:
            write(learner_id, pending)
            return 1
        except Unavailable:
            raise
        except Exception as exc:
            self._dead_letter(outcome_line(learner_id, pending, name), _reason(exc))
            return 0

    def _read(self, segment: Path) -> Iterator[tuple[tuple[int, str | None], Spooled]]:
        with open(segment, encoding="utf-8", errors="surrogateescape") as handle:
            for number, line in enumerate(handle, 1):
                if not line.endswith("\n"):
                    # A torn last line: its append never returned, so nobody was told.
                    log.warning("ignoring an unfinished line %d in %s", number, segment.name)
                    break
                item: Spooled
                try:
                    if line.startswith(OUTCOME_PREFIX):
                        learner_id, name, item = read_outcome_line(line)
                    elif line.startswith(EVIDENCE_PREFIX):
                        learner_id, name, item = read_evidence_line(line)
                    else:
                        learner_id, name, item = read_named_line(line)
                except Exception as exc:  # a line no codec of this version reads
                    self._dead_letter(line.rstrip("\n"), _reason(exc))
                    continue
                yield (learner_id, name), item

    def _dead_letter(self, line: str, reason: str) -> None:
        """Keep a refused run (once, even if its segment is replayed again) and log it."""
        key = _dead_key(line)
        with _dead_letter_lock(self.root):
            try:
                info = self.dead_path.stat()
                stamp: tuple[int, int] | None = (info.st_ino, info.st_size)
            except FileNotFoundError:
                stamp = None
            if self._dead_seen is None or stamp != self._dead_stamp:
                # first use, or the file changed under us (replay_dead_letters rewrote it)
                self._dead_seen = {_dead_key(e.get("run", "")) for e in dead_letters(self.root)}
            if key in self._dead_seen:
                return
            entry = {"reason": reason, "at": now_ms(), "run": line}
            data = (json.dumps(entry, ensure_ascii=True) + "\n").encode("ascii")
            with open(self.dead_path, "ab") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
                info = os.fstat(handle.fileno())
            self._dead_stamp = (info.st_ino, info.st_size)
        self._dead_seen.add(key)
        self.dead_count += 1
        self.dead_added += 1
        log.error(
            "storage refused spooled run %s (%s); kept in %s and replay goes on",
            ascii(key[1][:80]),  # ids and reasons may hold what no log file can encode
            ascii(reason),
            self.dead_path,
        )

    def close(self) -> None:
        """Release this process's directory; an empty one is removed."""
        with self._lock:
            self._close_active()
            if not any(self.dir.glob("*.jsonl")):
                (self.dir / ".lock").unlink(missing_ok=True)
                with contextlib.suppress(OSError):
                    self.dir.rmdir()
        self._dir_lock.close()


def _cannot_write(exc: OSError) -> str:
    return f"storage is unavailable and the local spool cannot be written ({exc.strerror or exc})"


def _reason(exc: BaseException) -> str:
    text = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:500]


def _line_of(learner_id: int, item: Spooled, name: str | None) -> str:
    if isinstance(item, PendingArmOutcome):
        return outcome_line(learner_id, item, name)
    if isinstance(item, PendingEvidence):
        return evidence_line(learner_id, item, name)
    return spool_line(learner_id, item, name)


def _dead_key(line: str) -> tuple[str, str]:
    """(the learner: its name, else its id; the trace id, or a per-arm outcome's key) of a
    spool line."""
    try:
        data = json.loads(line)
        learner = data.get("n") or f"#{int(data.get('l', 0))}"
        if data.get("k") == "arm":
            return str(learner), str(data["o"]["key"])
        return str(learner), str(data.get("traceId", data.get("trace_id", line)))
    except (ValueError, TypeError, AttributeError):
        return "", line


def _is_database_error(exc: BaseException) -> bool:
    from learning_bot.storage.database import is_database_error as check

    return check(exc)


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


def _batches(
    rows: Iterator[tuple[tuple[int, str | None], Spooled]],
) -> Iterator[tuple[tuple[int, str | None], list[Spooled]]]:
    """Runs of one learner together (up to REPLAY_BATCH); each outcome and each evidence line
    alone, in its place (after the runs it came from)."""
    learner: tuple[int, str | None] | None = None
    batch: list[Spooled] = []
    for key, record in rows:
        if isinstance(record, PendingArmOutcome | PendingEvidence):
            if batch and learner is not None:
                yield learner, batch
            yield key, [record]
            learner, batch = None, []
            continue
        if learner is not None and (key != learner or len(batch) >= REPLAY_BATCH):
            yield learner, batch
            batch = []
        learner = key
        batch.append(record)
    if batch and learner is not None:
        yield learner, batch


SPOOLING = "spooling runs until it takes them"


def _unavailable_reason(exc: Unavailable) -> str:
    """`database or disk is full`, without the `storage is unavailable: ` the line starts
    with anyway."""
    return str(exc).removeprefix("storage is unavailable: ").removeprefix("storage is unavailable")


class SpoolingStore:
    """A RunWriter that spools runs while the writer it wraps is unavailable, or refuses them
    with a database error, and replays them in a background thread once it answers again.

    With `adopt_seconds`, the thread also looks that often for directories of dead processes
    under the spool root (a replica killed during an outage, on this machine or, on a shared
    directory, another) and replays them; 0 leaves them to the next process that spools."""

    def __init__(
        self,
        inner: RunWriter,
        spool: Spool,
        *,
        retry_seconds: float = 1.0,
        adopt_seconds: float = 0.0,
        opener: Callable[[str, Phase], int] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`opener`: opens (or creates, with this process's settings for new learners) a
        learner by name for replay; default: the writer's open_learner with no settings.
        `clock`: seconds, for the outage's log summaries (at most one a minute)."""
        self._unavailable = StateLog(log, "storage is unavailable", clock=clock)
        self._refusing = StateLog(log, "storage refuses writes", level=logging.ERROR, clock=clock)
        self._replay_failing = StateLog(
            log, "replaying the spool fails", level=logging.ERROR, clock=clock
        )
        self.inner = inner
        self.spool = spool
        self.opener = opener
        self.retry_seconds = retry_seconds
        self.adopt_seconds = adopt_seconds
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._thread_lock = threading.Lock()
        if spool.pending() or any(spool.root.glob("p*/*.jsonl")) or adopt_seconds > 0:
            self._kick()

    def record_runs(
        self, learner_id: int, runs: Sequence[RunRecord], settings: str | None = None
    ) -> RecordResult:
        """Write the runs, or spool them. LearnerChanged goes back to the caller, who builds
        the runs again under the learner's state; runs spooled are replayed under the phase
        current at replay (`under_stored_phase`)."""
        if not self.spool.pending():
            try:
                result: RecordResult = self.inner.record_runs(learner_id, runs, settings)
            except (SpoolFull, LearnerChanged):
                raise
            except Unavailable as exc:
                self._unavailable.occurred(_unavailable_reason(exc), SPOOLING)
            except (NotFound, Conflict) as exc:  # the learner gone (a new database), or busy
                self._refusing.occurred(str(exc), SPOOLING)
            except Exception as exc:
                if not _is_database_error(exc):
                    raise
                self._refusing.occurred(_reason(exc), SPOOLING, exc_info=exc)
            else:
                self._back()
                return result
        # runs queue behind older spooled ones: order kept
        try:
            self.spool.append(learner_id, runs, name=self._name_of(learner_id))
        except SpoolFull:
            self._count("run(s) refused", len(runs))
            raise
        self._count("run(s) spooled", len(runs))
        self._kick()
        spooled: RunStatus = "spooled"
        return RecordResult(tuple(r.trace_id for r in runs), (spooled,) * len(runs))

    def record_runs_by_name(self, learner: str, runs: Sequence[RunRecord]) -> RecordResult:
        """Spool runs of a learner storage has not opened yet (down since start); replay opens
        (or creates) it by name first."""
        self.spool.append(0, runs, name=learner)
        self._kick()
        spooled: RunStatus = "spooled"
        return RecordResult(tuple(r.trace_id for r in runs), (spooled,) * len(runs))

    def spool_context_evidence(
        self, learner_id: int | None, learner: str, pending: PendingEvidence
    ) -> None:
        """Keep per-feature evidence storage could not take (an outage), behind the runs it
        came from, to add it when they are written (EvidenceSpooler)."""
        self.spool.append_evidence(learner_id or 0, pending, name=learner)
        self._kick()

    def spooling(self) -> bool:
        return self.spool.pending()

    def _write_evidence(self, learner_id: int, pending: PendingEvidence) -> object:
        add = self.inner.add_context_evidence  # type: ignore[attr-defined]
        return evidence_writer(add)(learner_id, pending)

    def record_or_spool_arm_outcome(
        self, learner_id: int | None, learner: str, pending: PendingArmOutcome
    ) -> ArmOutcome | None:
        """Record a per-arm outcome, or spool it (None) while storage is unavailable, or
        while runs wait in the spool (the run it completes may be one of them)."""
        record = getattr(self.inner, "record_arm_outcome", None)
        if record is None:
            raise Unavailable("this writer cannot record per-arm outcomes")
        if learner_id is not None and not self.spool.pending():
            try:
                outcome: ArmOutcome = record(
                    learner_id,
                    pending.arm_id,
                    pending.reward,
                    referenced=pending.referenced,
                    conversation=pending.conversation,
                    apply_reward=pending.apply_reward,
                    at=pending.at,
                    phase=pending.phase,
                    loaded=pending.loaded,
                )
                return outcome
            except (SpoolFull, LearnerChanged):
                raise
            except Unavailable as exc:
                self._unavailable.occurred(_unavailable_reason(exc), SPOOLING)
        try:
            self.spool.append_outcome(learner_id or 0, pending, name=learner)
        except SpoolFull:
            self._count("arm outcome(s) refused", 1)
            raise
        self._count("arm outcome(s) spooled", 1)
        self._kick()
        return None

    def _count(self, what: str, n: int) -> None:
        self._unavailable.count(what, n)
        self._refusing.count(what, n)

    def _back(self) -> None:
        """Storage took a write: an outage in progress is over (its one line)."""
        if self._unavailable.active:
            self._unavailable.ended("storage is back")
        if self._refusing.active:
            self._refusing.ended("storage takes writes again")

    def _write_outcome(self, learner_id: int, pending: PendingArmOutcome) -> object:
        record = self.inner.record_arm_outcome  # type: ignore[attr-defined]
        return outcome_under_stored_phase(record)(learner_id, pending)

    def _name_of(self, learner_id: int) -> str | None:
        """The learner's name as the writer remembers it (no query: storage may be down)."""
        learner_name = getattr(self.inner, "learner_name", None)
        return None if learner_name is None else learner_name(learner_id)

    def _resolve(self, name: str, record: Spooled) -> int:
        if self.opener is not None:
            return self.opener(name, record.phase)
        open_learner = getattr(self.inner, "open_learner", None)
        if open_learner is None:
            raise Unavailable("this writer cannot open learners by name")
        return int(open_learner(name, record.phase).id)

    def health(self) -> dict[str, Any]:
        """What healthz and status say about the spool."""
        spool = self.spool
        return {
            "pending": spool.pending(),
            "bytes": spool.size_bytes(),
            "full": spool.full,
            "deadLetters": (dead := spool.dead_letter_count()),
            "deadLetterFile": str(spool.dead_path) if dead else None,
        }

    def replay_now(self) -> int:
        """Replay synchronously (tests and shutdown); returns the runs written. Unavailable
        when storage still is (counted as the outage's occurrence: a summary line at most
        once a minute while it lasts)."""
        try:
            self._schema_ready()
            replayed = self.spool.replay(
                self.inner.record_runs, self._resolve, self._write_outcome, self._write_evidence
            )
        except Unavailable as exc:
            self._unavailable.occurred(_unavailable_reason(exc), SPOOLING)
            raise
        self._replayed(replayed)
        return replayed

    def _replayed(self, replayed: int) -> None:
        """Count a replay that went through; the outage is over once nothing waits."""
        self._replay_failing.ended("replaying the spool works again")
        self._count("replayed", replayed)
        if self.spool.pending():
            return
        if self._unavailable.active or self._refusing.active:
            self._back()
        elif replayed:
            log.info("replayed %d spooled run(s)", replayed)

    def _schema_ready(self) -> None:
        """Storage answers and has its schema before anything is replayed into it (a server
        started while its database was down creates the schema on first use): Unavailable
        until then, so replay waits instead of dead-lettering runs into missing tables."""
        engine = getattr(self.inner, "engine", None)
        if engine is not None:
            from learning_bot.storage.database import schema_ready

            schema_ready(engine)

    def _kick(self) -> None:
        with self._thread_lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="spool-replay", daemon=True)
                self._thread.start()
        self._wake.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            pending = self.spool.pending()
            adopting = not pending and self.adopt_seconds > 0
            woken = self._wake.wait(self.adopt_seconds if adopting else self.retry_seconds)
            self._wake.clear()
            if self._stop.is_set():
                return
            if not pending and not woken:
                if self.adopt_seconds <= 0:
                    return
                if not self.spool.orphaned():
                    continue
            try:
                self.replay_now()
            except Unavailable:
                continue
            except Exception as exc:
                self._replay_failing.occurred(_reason(exc), "will retry", exc_info=exc)
                continue
            if not self.spool.pending() and self.adopt_seconds <= 0:
                return

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.spool.close()
        close = getattr(self.inner, "close", None)
        if close is not None:
            close()
