"""A test backend for issue 34 items 3 and 5, chosen by the entry function's name; any other
entry runs the reference.

* ``leave``: passes, leaving three processes behind — a ``setsid`` sleeper (its own session),
  a double-forked daemon (its parent exits: re-parented away from the worker) and an attached
  child sleeper (in the worker's process group). Before starting them it writes to
  ``$UNRULY_DIR/alive-<case>.txt`` which of the processes the earlier cases left are still
  alive, then appends ``<kind> <pid>`` per process to ``$UNRULY_DIR/pids.txt``.
* ``hog``: allocates and touches ``$UNRULY_HOG_MB`` MB (default 4096) in 64 MB steps, then
  sleeps: far beyond a small ``--memory-limit``.
* ``noisy``: passes, printing a clear-screen sequence (``ESC [2J``), a bell and a bidi
  override to stdout and stderr, and raising nothing.
* ``noisy_raise``: raises an exception whose multi-line message holds the same sequences.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import numpy as np
from pids import alive

from tilefoundry.conformance.backend import Capabilities
from tilefoundry.semantics.evaluator.core import evaluate
from tilefoundry.semantics.formats import DType

NOISE = "\x1b[2J\x1b[31mred\x07bell\u202eevil"


def _leave(case: str) -> None:
    d = os.environ["UNRULY_DIR"]
    pids = os.path.join(d, "pids.txt")
    earlier = []
    if os.path.exists(pids):
        earlier = [line.split() for line in open(pids).read().splitlines() if line]
    with open(os.path.join(d, f"alive-{case}.txt"), "w") as f:
        f.write("".join(f"{k} {p}\n" for k, p in earlier if alive(int(p))))
    out = []
    s = subprocess.Popen(["sleep", "300"], start_new_session=True)  # its own session
    out.append(("setsid", s.pid))
    r, w = os.pipe()
    mid = os.fork()
    if mid == 0:  # the double fork: the middle process exits at once
        os.close(r)
        grand = os.fork()
        if grand == 0:
            os.close(w)
            time.sleep(300)
            os._exit(0)
        os.write(w, f"{grand}\n".encode())
        os._exit(0)
    os.close(w)
    grand = int(os.read(r, 64).decode())
    os.close(r)
    os.waitpid(mid, 0)
    out.append(("daemon", grand))
    a = subprocess.Popen(["sleep", "300"])  # attached: the worker's group, its child
    out.append(("attached", a.pid))
    with open(pids, "a") as f:
        f.write("".join(f"{k} {p}\n" for k, p in out))


class UnrulyBackend:
    name = "unruly"

    def capabilities(self) -> Capabilities:
        return Capabilities.everything(dtypes=frozenset({DType.F32}))

    def compile(self, module, entry):
        return module, entry

    def run(self, compiled, inputs):
        module, entry = compiled
        if entry.startswith("leave"):
            _leave(entry)
        if entry == "hog":
            blocks = []
            for _ in range(int(os.environ.get("UNRULY_HOG_MB", "4096")) // 64):
                blocks.append(np.ones(64 << 17, np.float64))  # 64 MB, touched
            time.sleep(60)
        if entry == "noisy":
            print(f"stdout says {NOISE}", flush=True)
            print(f"stderr says {NOISE}\nsecond line", file=sys.stderr, flush=True)
            os.write(1, f"raw fd 1 {NOISE}\n".encode())
        if entry == "noisy_raise":
            raise RuntimeError(f"first line {NOISE}\nsecond line\x1b[0m")
        return evaluate(module, entry, inputs)


def factory() -> UnrulyBackend:
    return UnrulyBackend()
