"""The environment and the date of the processes a test starts.

Under faketime (README, "Development") the test processes read a faked date, but the processes
they start must not inherit it: libfaketime (0.9.10) fails the `clock_nanosleep` behind
Python's `time.sleep` (EINVAL) once the monotonic clock is left alone, and Chromium under it
hangs. So every process a test starts gets its environment from here, without libfaketime:
it runs on the machine's date, and a test that hands it something dated (a signed Slack
request, runs stamped "yesterday") dates it with `now_ms()` below, the date those processes
read. Without faketime both are the identity and this process's own clock."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Mapping

PRELOAD_VARIABLES = ("LD_PRELOAD", "DYLD_INSERT_LIBRARIES")
"""Where libfaketime is preloaded from (Linux, macOS)."""

FAKETIME_PREFIXES = ("FAKETIME", "DONT_FAKE_MONOTONIC", "NO_FAKE_STAT", "FAKERANDOM")
"""libfaketime's own settings (FAKETIME, FAKETIME_SHARED, FAKETIME_DONT_FAKE_MONOTONIC, ...)."""

FAKED_DATE = "faketime" in "".join(os.environ.get(name, "") for name in PRELOAD_VARIABLES)
"""This process runs under faketime: the date it reads is not the machine's."""


def _unpreloaded(value: str) -> str:
    """A preload list (entries separated by colons or spaces) without libfaketime."""
    kept = [entry for entry in re.split(r"[:\s]+", value) if entry and "faketime" not in entry]
    return ":".join(kept)


def without_faketime(env: Mapping[str, str]) -> dict[str, str]:
    """`env` without libfaketime: its preload entry and its settings removed, every other
    preloaded library and variable kept."""
    clean = {k: v for k, v in env.items() if not k.startswith(FAKETIME_PREFIXES)}
    for name in PRELOAD_VARIABLES:
        if name in clean:
            kept = _unpreloaded(clean[name])
            if kept:
                clean[name] = kept
            else:
                del clean[name]
    if "DYLD_INSERT_LIBRARIES" not in clean:
        clean.pop("DYLD_FORCE_FLAT_NAMESPACE", None)
    return clean


def inherited(settings: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment without libfaketime, with `settings` on top: the
    environment of a process a test starts that inherits everything else."""
    return without_faketime({**os.environ, **(settings or {})})


_offset_ns: list[int] = []

_READ_CLOCKS = "import time; print(time.time_ns() - time.monotonic_ns())"


def _measured_offset_ns() -> int:
    """How far this process's date runs ahead of the machine's (nanoseconds), read by one
    process started without libfaketime. Both sides read their date against the monotonic
    clock, which the whole machine shares and faketime leaves alone (FAKETIME_DONT_FAKE_
    MONOTONIC), so the figure does not depend on how long that process took to start."""
    done = subprocess.run(
        [sys.executable, "-c", _READ_CLOCKS],
        env=inherited(),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    machine = int(done.stdout)
    here = time.time_ns() - time.monotonic_ns()
    return here - machine


def now_ms() -> int:
    """The date (Unix ms) the processes a test starts read: the machine's, also under
    faketime."""
    if not FAKED_DATE:
        return time.time_ns() // 1_000_000
    if not _offset_ns:
        _offset_ns.append(_measured_offset_ns())
    return (time.time_ns() - _offset_ns[0]) // 1_000_000
