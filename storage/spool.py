"""A local, durable spool for runs that storage could not take: append-only JSON lines, fsynced
before the caller hears back, replayed in order (and idempotently, by trace id) when storage
answers again. Each process owns a directory under the spool root, locked while it lives, so
a restarted process adopts what a killed one left behind."""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import secrets
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO, NoReturn

from engine.config import Phase
from engine.errors import Unavailable
from engine.ports import ArmOutcome, PendingArmOutcome, RecordResult, RunStatus, RunWriter
from engine.posterior import now_ms
from engine.records import RunRecord, record_from_json, record_to_json

log = logging.getLogger("learning_bot.spool")

DEFAULT_MAX_BYTES = 256 * 1024 * 1024
SEGMENT_BYTES = 4 * 1024 * 1024
"""The open segment is closed and a new one started once it holds this many bytes."""
REPLAY_BATCH = 500
DEAD_LETTER = "dead-letter.jsonl"
"""Runs the database refused on replay for a reason other than being unavailable, one JSON
line each (`{"reason": ..., "at": ..., "run": <spool line>}`), beside the process folders."""


class SpoolFull(Unavailable):
    """Storage is unavailable and the spool has no room left: the run was not kept."""


def spool_line(learner_id: int, record: RunRecord, name: str | None = None) -> str:
    """One spool line: the learner id (or, for a learner storage has not opened yet, 0 and
    its name) and the record's JSON (engine.records' codec)."""
    head: dict[str, Any] = {"l": learner_id} if name is None else {"l": 0, "n": name}
    return json.dumps({**head, **record_to_json(record)}, separators=(",", ":"), allow_nan=False)


OUTCOME_PREFIX = '{"k":"arm",'
"""How a per-arm outcome's line starts (a run's line starts with `{"l":`)."""

Spooled = RunRecord | PendingArmOutcome


def outcome_line(learner_id: int, pending: PendingArmOutcome, name: str | None = None) -> str:
    """One spool line holding a per-arm outcome (`PendingArmOutcome`)."""
    head: dict[str, Any] = {"k": "arm", "l": learner_id}
    if name is not None:
        head["n"] = name
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
    return json.dumps({**head, "o": body}, separators=(",", ":"), allow_nan=False)


def read_outcome_line(line: str) -> tuple[int, str | None, PendingArmOutcome]:
    data: dict[str, Any] = json.loads(line)
    o = data["o"]
    name = data.get("n")
    if name is not None and not isinstance(name, str):
        raise ValueError("the learner name of a spool line must be a string")
    conversation = o["c"]
    if conversation is not None and not isinstance(conversation, str):
        raise ValueError("the conversation of a spooled outcome must be a string")
    pending = PendingArmOutcome(
        str(o["arm"]),
        float(o["r"]),
        bool(o["ref"]),
        conversation,
        bool(o["apply"]),
        int(o["at"]),
        str(o["key"]),
        Phase(o["phase"]),
    )
    return int(data["l"]), name, pending


def read_spool_line(line: str) -> tuple[int, RunRecord]:
    """The learner id and record of a spool line, validated by the codec (lines written by
    earlier versions, with snake_case keys and arms as lists, read the same)."""
    learner_id, _name, record = read_named_line(line)
    return learner_id, record


def read_named_line(line: str) -> tuple[int, str | None, RunRecord]:
    """The learner id, learner name (None when the id is known) and record of a spool line."""
    data: dict[str, Any] = json.loads(line)
    name = data.get("n")
    if name is not None and not isinstance(name, str):
        raise ValueError("the learner name of a spool line must be a string")
    return int(data["l"]), name, record_from_json(data)


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
    ) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.max_bytes = max_bytes
        self.segment_bytes = segment_bytes
        self._lock = threading.Lock()
        self._replaying = threading.Lock()
        self.dir = self.root / f"p{os.getpid()}-{secrets.token_hex(3)}"
        self.dir.mkdir(exist_ok=True)
        self._dir_lock = open(self.dir / ".lock", "w")  # noqa: SIM115 - held for the process
        fcntl.flock(self._dir_lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        self._active: BinaryIO | None = None
        self._has_segments = False
        self._active_path: Path | None = None
        self._active_bytes = 0
        self._next_number = 1
        self._bytes = self._measure()
        self.full = False
        """Whether the last append was refused (the state a log line is written for)."""
        self.dead_path = self.root / DEAD_LETTER
        self._dead_seen: set[tuple[int, str]] | None = None
        self.dead_count = len(dead_letters(self.root))
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

    def _segments(self) -> list[Path]:
        """Every segment this process may replay: its own, and those of dead processes."""
        for other in sorted(self.root.glob("p*")):
            if other == self.dir or not other.is_dir():
                continue
            try:
                handle = open(other / ".lock", "a")  # noqa: SIM115 - closed below
            except OSError:
                continue
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                handle.close()
                continue  # its process is alive and replays it
            for segment in sorted(other.glob("*.jsonl")):
                target = self.dir / f"{segment.stem}-{other.name}.jsonl"
                segment.rename(target)
            handle.close()
            for leftover in other.iterdir():
                leftover.unlink(missing_ok=True)
            other.rmdir()
        return sorted(self.dir.glob("*.jsonl"), key=lambda p: p.stat().st_mtime_ns)

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
                log.warning("the spool at %s takes runs again", self.root)
            if self._active_bytes >= self.segment_bytes:
                self._close_active()

    def _refuse(self, reason: str, count: int) -> NoReturn:
        if not self.full:
            self.full = True
            log.error("%s; refusing runs until it has room (first refused: %d)", reason, count)
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
    ) -> int:
        """Write spooled runs oldest first; a segment is deleted once all of it is stored or
        dead-lettered. Stops (keeping what is left) when storage is still unavailable; a run
        storage refuses for any other reason goes to the dead-letter file and replay goes on."""
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
            for segment in segments:
                for (learner_id, name), batch in _batches(self._read(segment)):
                    if name is not None:
                        if resolve is None:
                            for item in batch:
                                line = _line_of(0, item, name)
                                self._dead_letter(line, "no learner could be opened by name")
                            continue
                        learner_id = resolve(name, batch[0])  # Unavailable: stop, keep it
                    first = batch[0]
                    if isinstance(first, PendingArmOutcome):
                        done += self._write_outcome(write_outcome, learner_id, first)
                        continue
                    runs = [r for r in batch if isinstance(r, RunRecord)]
                    done += self._write_batch(write, learner_id, runs)
                segment.unlink()
                log.info("replayed spool segment %s", segment.name)
            with self._lock:
                self._has_segments = self._active is not None or any(self.dir.glob("*.jsonl"))
                self._bytes = self._measure()
            return done

    def _write_batch(
        self,
        write: Callable[[int, list[RunRecord]], RecordResult],
        learner_id: int,
        batch: list[RunRecord],
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
                self._dead_letter(spool_line(learner_id, batch[0]), _reason(exc))
                return 0
        done = 0
        for record in batch:
            done += self._write_batch(write, learner_id, [record])
        return done

    def _write_outcome(
        self,
        write: Callable[[int, PendingArmOutcome], object] | None,
        learner_id: int,
        pending: PendingArmOutcome,
    ) -> int:
        """Record a spooled outcome (its key makes a second replay change nothing); one
        storage refuses goes to the dead-letter file. Raises Unavailable to stop the replay."""
        if write is None:
            self._dead_letter(outcome_line(learner_id, pending), "this writer records no outcomes")
            return 0
        try:
            write(learner_id, pending)
            return 1
        except Unavailable:
            raise
        except Exception as exc:
            self._dead_letter(outcome_line(learner_id, pending), _reason(exc))
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
                    else:
                        learner_id, name, item = read_named_line(line)
                except Exception as exc:  # a line no codec of this version reads
                    self._dead_letter(line.rstrip("\n"), _reason(exc))
                    continue
                yield (learner_id, name), item

    def _dead_letter(self, line: str, reason: str) -> None:
        """Keep a refused run (once, even if its segment is replayed again) and log it."""
        key = _dead_key(line)
        if self._dead_seen is None:
            self._dead_seen = {_dead_key(e.get("run", "")) for e in dead_letters(self.root)}
        if key in self._dead_seen:
            return
        entry = {"reason": reason, "at": now_ms(), "run": line}
        data = (json.dumps(entry, ensure_ascii=True) + "\n").encode("ascii")
        with open(self.dead_path, "ab") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        self._dead_seen.add(key)
        self.dead_count += 1
        self.dead_added += 1
        log.error(
            "storage refused spooled run %s (%s); kept in %s and replay goes on",
            key[1][:80],
            reason,
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
    return spool_line(learner_id, item, name)


def _dead_key(line: str) -> tuple[int, str]:
    try:
        data = json.loads(line)
        if data.get("k") == "arm":
            return int(data.get("l", 0)), str(data["o"]["key"])
        return int(data.get("l", 0)), str(data.get("traceId", data.get("trace_id", line)))
    except (ValueError, TypeError, AttributeError):
        return 0, line


def default_spool_root(database_url: str) -> Path:
    """LEARNING_BOT_SPOOL_DIR, else beside a SQLite file, else in the user data directory."""
    configured = os.environ.get("LEARNING_BOT_SPOOL_DIR", "").strip()
    if configured:
        return Path(configured)
    from storage.database import sqlite_file

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
    """Runs of one learner together (up to REPLAY_BATCH); each outcome alone, in its place."""
    learner: tuple[int, str | None] | None = None
    batch: list[Spooled] = []
    for key, record in rows:
        if isinstance(record, PendingArmOutcome):
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


class SpoolingStore:
    """A RunWriter that spools runs while the writer it wraps is unavailable and replays them
    in a background thread once it answers again."""

    def __init__(self, inner: RunWriter, spool: Spool, *, retry_seconds: float = 1.0) -> None:
        self.inner = inner
        self.spool = spool
        self.retry_seconds = retry_seconds
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._thread_lock = threading.Lock()
        if spool.pending() or any(spool.root.glob("p*/*.jsonl")):
            self._kick()

    def record_runs(self, learner_id: int, runs: Sequence[RunRecord]) -> RecordResult:
        if not self.spool.pending():
            try:
                result: RecordResult = self.inner.record_runs(learner_id, runs)
                return result
            except SpoolFull:
                raise
            except Unavailable as exc:
                log.warning("storage is unavailable (%s); spooling %d run(s)", exc, len(runs))
        self.spool.append(learner_id, runs)  # runs queue behind older spooled ones: order kept
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
                )
                return outcome
            except SpoolFull:
                raise
            except Unavailable as exc:
                log.warning("storage is unavailable (%s); spooling an arm outcome", exc)
        if learner_id is None:
            self.spool.append_outcome(0, pending, name=learner)
        else:
            self.spool.append_outcome(learner_id, pending)
        self._kick()
        return None

    def _write_outcome(self, learner_id: int, pending: PendingArmOutcome) -> ArmOutcome:
        outcome: ArmOutcome = self.inner.record_arm_outcome(  # type: ignore[attr-defined]
            learner_id,
            pending.arm_id,
            pending.reward,
            referenced=pending.referenced,
            conversation=pending.conversation,
            apply_reward=pending.apply_reward,
            at=pending.at,
            once=pending.key,
        )
        return outcome

    def _resolve(self, name: str, record: Spooled) -> int:
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
            "deadLetters": spool.dead_count,
            "deadLetterFile": str(spool.dead_path) if spool.dead_count else None,
        }

    def replay_now(self) -> int:
        """Replay synchronously (tests and shutdown); returns the runs written."""
        return self.spool.replay(self.inner.record_runs, self._resolve, self._write_outcome)

    def _kick(self) -> None:
        with self._thread_lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="spool-replay", daemon=True)
                self._thread.start()
        self._wake.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.retry_seconds)
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                replayed = self.spool.replay(
                    self.inner.record_runs, self._resolve, self._write_outcome
                )
                if replayed:
                    log.info("storage is back: replayed %d spooled run(s)", replayed)
            except Unavailable:
                continue
            except Exception:
                log.exception("replaying the spool failed; will retry")
                continue
            if not self.spool.pending():
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
