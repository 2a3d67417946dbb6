"""A test backend that misbehaves on purpose, chosen by the entry function's name.

``segv`` segfaults (a NULL read), ``hang`` sleeps far past any test timeout, ``garbage`` returns
wrong values of the right shape and dtype, ``raise`` raises, ``unprintable`` raises an exception
whose ``__str__`` raises, ``late_exit`` returns the right values and exits the process from a
thread ``LATE_EXIT_S`` seconds later, ``fork_leftover`` returns the right values and leaves a
forked child sleeping (its pid appended to ``$LEFTOVER_PID_FILE``), ``list_fds`` writes the
files the worker holds open to ``$FD_LIST_FILE``, ``malformed`` returns the wrong shape, ``exit`` calls
``os._exit(3)``, ``ulp1`` returns every float result one ULP up, ``nested_off`` the last leaf of a nested tuple result 1 too high, ``warn`` passes after a numpy RuntimeWarning, ``flip`` returns garbage on its first
``$FLIP_FAILS`` runs and the right values after (a flaky bug); any other entry runs the
reference. i8 is declared unsupported. ``FLAKY_DELAY`` (seconds) slows every ``run`` down (the
kill-and-resume test uses it); with ``KILL_AFTER_RUN_S`` set, every ``run`` returns and its
process SIGKILLs itself that many seconds later (a backend that dies after returning)."""

from __future__ import annotations

import ctypes
import os
import time

import numpy as np

from tilefoundry.conformance.backend import Capabilities
from tilefoundry.semantics.dtypes import from_bits, to_bits
from tilefoundry.semantics.evaluator.core import evaluate
from tilefoundry.semantics.formats import DType, dtype_of


class _Unprintable(Exception):
    def __str__(self):
        raise RuntimeError("this exception cannot be printed")


class FlakyBackend:
    name = "flaky"

    def capabilities(self) -> Capabilities:
        return Capabilities.everything(dtypes=frozenset(d for d in DType
                                             if d not in (DType.F4E2M1, DType.I8)))

    def compile(self, module, entry):
        return module, entry

    def run(self, compiled, inputs):
        module, entry = compiled
        delay = float(os.environ.get("FLAKY_DELAY", "0"))
        if delay:
            time.sleep(delay)
        if os.environ.get("KILL_AFTER_RUN_S"):  # every run: the process SIGKILLs itself later
            import threading

            threading.Timer(float(os.environ["KILL_AFTER_RUN_S"]), os.kill,
                            (os.getpid(), 9)).start()
        if entry == "segv":
            ctypes.string_at(0)
        if entry == "hang":
            time.sleep(60)
        if entry == "exit":
            os._exit(3)
        if entry == "raise":
            raise ValueError("the flaky backend does not like this program")
        if entry == "unprintable":
            raise _Unprintable()
        if entry == "list_fds":  # passes, writing the files this process holds open
            held = []
            for fd in os.listdir("/proc/self/fd"):
                try:
                    held.append(os.readlink(f"/proc/self/fd/{fd}"))
                except OSError:
                    pass
            with open(os.environ["FD_LIST_FILE"], "w") as f:
                f.write("\n".join(held))
        if entry == "fork_leftover":  # passes, leaving a forked child behind
            pid = os.fork()
            if pid == 0:
                time.sleep(120)
                os._exit(0)
            with open(os.environ["LEFTOVER_PID_FILE"], "a") as f:
                f.write(f"{pid}\n")
        if entry == "late_exit":  # passes, then a backend thread ends the process
            import threading

            threading.Timer(float(os.environ.get("LATE_EXIT_S", "0.5")),
                            lambda: os._exit(7)).start()
        if entry == "warn":  # passes, after a numpy RuntimeWarning of its own
            np.array([np.nan, 1.0]).astype(np.int32)
        out = evaluate(module, entry, inputs)
        if entry == "flip" and _flip_fails():
            return (out.astype(np.float32) * 3 + 1).astype(out.dtype)
        if entry == "garbage":
            return (out.astype(np.float32) * 3 + 1).astype(out.dtype)
        if entry == "malformed":
            return out.reshape(-1)[:1]
        if entry == "nested_off":  # a nested tuple result, its last leaf 1 too high
            return _last_leaf_off(out)
        if entry == "ulp1":
            dt = dtype_of(out)
            return from_bits(to_bits(out) + np.ones((), to_bits(out).dtype), dt)
        return out


def _last_leaf_off(v):
    if isinstance(v, tuple):
        return (*v[:-1], _last_leaf_off(v[-1]))
    return (v.astype(np.float32) + 1).astype(v.dtype)


def _flip_fails() -> bool:
    """``flip``: the first ``FLIP_FAILS`` (default 1) runs return garbage, later ones the
    reference's values (an attempt counter in the file ``$FLIP_FILE``, shared by workers)."""
    import fcntl

    with open(os.environ["FLIP_FILE"], "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        n = len(f.read())
        f.write("x")
    return n < int(os.environ.get("FLIP_FAILS", "1"))


def factory() -> FlakyBackend:
    return FlakyBackend()


class _BadCaps(FlakyBackend):
    def capabilities(self):
        return {"ops": None}


def bad_caps() -> FlakyBackend:
    return _BadCaps()


class TruncatingBackend(FlakyBackend):
    """The reference except that bf16 ``mul`` rounds by truncation (oracle/planted.py)."""

    name = "truncating-mul"

    def run(self, compiled, inputs):
        from tilefoundry.oracle.planted import truncating_candidate

        module, entry = compiled
        return truncating_candidate()(module, entry, inputs)


def truncating() -> TruncatingBackend:
    return TruncatingBackend()
