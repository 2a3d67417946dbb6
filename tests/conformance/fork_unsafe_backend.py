"""A backend whose runtime does not survive ``fork`` — a model of JAX or CUDA, which start
runtime threads when they are imported or initialised.

Importing this module starts a runtime thread that serves every ``run`` through a queue (the
reference evaluator does the work on that thread). A process forked after the import inherits
the queue but not the thread: its first ``run`` waits forever for an answer (under the
conformance runner: TIMEOUT, as a JAX backend loaded before the fork hangs). A worker that
imports the module itself (``spawn`` / ``forkserver``) has its own thread and runs.

``ForkUnsafeBackend`` leaves the start method to the run (fork by default);
``SpawningBackend`` declares ``start_method = "spawn"``; ``BadStartBackend`` declares an
invalid one. ``case(k, entry)`` is a picklable builder (functools.partial of a module-level
function) of the synthetic catalog's f32 add program, for runs given a list of cases."""

from __future__ import annotations

import functools
import os
import queue
import threading

import synthetic_catalog as syn

from tilefoundry.conformance.backend import ReferenceBackend
from tilefoundry.conformance.cases import Case
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ops import BinaryKind

IMPORTED_IN = os.getpid()
_REQUESTS: queue.Queue = queue.Queue()


def _serve() -> None:
    ref = ReferenceBackend()
    while True:
        compiled, inputs, answer = _REQUESTS.get()
        try:
            answer.put(("ok", ref.run(compiled, inputs)))
        except Exception as e:  # handed back to the caller's thread
            answer.put(("error", e))


threading.Thread(target=_serve, name="fake-runtime", daemon=True).start()


class ForkUnsafeBackend(ReferenceBackend):
    name = "fork-unsafe"

    def run(self, compiled, inputs):
        answer: queue.Queue = queue.Queue()
        _REQUESTS.put((compiled, inputs, answer))
        status, value = answer.get()  # forked: nobody serves the queue, this never returns
        if status == "error":
            raise value
        return value


class SpawningBackend(ForkUnsafeBackend):
    start_method = "spawn"


class BadStartBackend(ForkUnsafeBackend):
    start_method = "thread"


def _build(k: int, entry: str):
    return syn.binary(f"fu{k}", BinaryKind.ADD, DType.F32, k, entry)()


def case(k: int, entry: str = "f") -> Case:
    return Case(f"fork-unsafe/{entry}/{k}", "fork-unsafe", functools.partial(_build, k, entry))
