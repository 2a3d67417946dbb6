"""The limits a compiled program runs within: the same ``max_loop_iterations``,
``max_elements`` and ``max_value_bytes`` as ``evaluate`` (issue 34).

A compiled program's loops are ``kir.HostLoop`` steps with integer bounds (elaboration resolved
every extent), run on the host by every target (the kernel-IR interpreter, the SIMD C program's
``tf_program``, the Triton and CUDA executables). The reference evaluator counts a loop's trips
when it enters the loop (nested loops multiply) and refuses the loop that would bring the count
past ``max_loop_iterations``; ``check_run`` makes the same count before the program runs — it is
a function of the bounds alone — and refuses with the same ``LimitError``: the same limit name,
the same running count at the same loop, the same fix. A compiled 2^62-trip loop is refused at
the call, never started. The program's buffers are checked against the value-size limits in
force at the call (they may be lower than at compile time).
"""

from __future__ import annotations

from collections.abc import Sequence

from tilefoundry.compiler import kir
from tilefoundry.compiler.kir import HostLoop, Program
from tilefoundry.limits import LimitError, check_value_size, limits

__all__ = ["check_run", "count_loops", "loop_iterations"]


def _trips(s: HostLoop) -> int:
    return max(0, -((s.start - s.stop) // s.step))  # len(range) without its index-size cap


def loop_iterations(steps: Sequence) -> int:
    """The loop iterations the reference evaluator counts for ``steps``: each loop's trips, plus
    its trips times its body's count."""
    total = 0
    for s in steps:
        if isinstance(s, HostLoop):
            n = _trips(s)
            total += n + n * loop_iterations(s.body)
    return total


def _crossing(steps: Sequence, counted: int, limit: int) -> tuple[HostLoop, int] | int:
    """Walk ``steps`` in evaluation order from ``counted`` iterations: the loop whose entry
    first brings the count past ``limit`` and that count, else the count after ``steps``."""
    for s in steps:
        if not isinstance(s, HostLoop):
            continue
        n = _trips(s)
        if counted + n > limit:
            return s, counted + n
        counted += n
        per = loop_iterations(s.body)
        if per and counted + n * per > limit:
            # the body's iterations that fit run whole; the next one crosses inside
            return _crossing(s.body, counted + (limit - counted) // per * per, limit)
        counted += n * per
    return counted


def count_loops(steps: Sequence, counted: list[int], what: str) -> None:
    """Add ``steps``' loop iterations to ``counted[0]`` (a run's count so far), or raise the
    evaluator's ``LimitError`` at the loop that crosses ``max_loop_iterations``."""
    lim = limits()
    got = _crossing(steps, counted[0], lim.max_loop_iterations)
    if isinstance(got, int):
        counted[0] = got
        return
    s, n = got
    raise LimitError(f"{what}: host loop {s.name} over range({s.start}, {s.stop}, {s.step}) "
                     f"would bring the loop iterations to {n:,}, more than the limit "
                     f"max_loop_iterations (nested loops multiply); "
                     f"{lim.how('max_loop_iterations')}", "max_loop_iterations")


def check_run(program: Program, what: str) -> None:
    """Refuse to run ``program`` past the limits in force (see the module docstring)."""
    for b in program.buffers:
        if b.kind != "alias":
            check_value_size(tuple(b.shape), kir.numpy_dtype(b.dtype).itemsize,
                             lambda b=b: f"{what}: buffer {b.name} ({b.dtype})")
    count_loops(program.steps, [0], what)
