"""Which process replays which spool segment. Each process owns a directory under the spool
root, locked (flock) while it lives; any live process sharing the root adopts the directory of
a dead one by taking its lock and moving its segments into its own, so each segment is replayed
by one process only."""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import secrets
from collections.abc import Generator
from pathlib import Path
from typing import Any

log = logging.getLogger("learning_bot.spool")


class ProcessDir:
    """This process's directory under a spool root, locked until `release`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        name = f"p{os.getpid()}-{secrets.token_hex(3)}"
        # Made and locked under a name adopters do not look at, then renamed: a live process's
        # directory is never seen unlocked.
        making = root / f".new-{name}"
        making.mkdir()
        self._lock = open(making / ".lock", "w")  # noqa: SIM115 - held for the process
        fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        self.path = root / name
        making.rename(self.path)

    def _orphans(self) -> Generator[tuple[Path, Any], None, None]:
        """The directories of dead processes, each yielded with its lock held (released when
        the caller moves on): a process's lock is free only once it has ended."""
        for other in sorted(self.root.glob("p*")):
            if other == self.path or not other.is_dir():
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
        """Whether a dead process left a directory under the root (cheap: one listing and a
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
            target = self.path / f"{segment.stem}-{other.name}.jsonl"
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

    def release(self) -> None:
        """Give the directory up; an empty one is removed."""
        if not any(self.path.glob("*.jsonl")):
            (self.path / ".lock").unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                self.path.rmdir()
        self._lock.close()
