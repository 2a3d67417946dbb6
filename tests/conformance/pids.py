"""Process liveness for the leftover-process tests (one copy, read by the tests and by the
planted backends that record what they started)."""

from __future__ import annotations

import time


def alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie (``/proc/<pid>/stat``, Linux)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def survivors(pids: list[int], wait_s: float = 5.0) -> list[int]:
    """The ``pids`` still alive after waiting up to ``wait_s`` for them to go."""
    t0 = time.monotonic()
    while any(alive(p) for p in pids) and time.monotonic() - t0 < wait_s:
        time.sleep(0.05)
    return [p for p in pids if alive(p)]
