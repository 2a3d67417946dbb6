"""Write in place where the copied value is dead: InsertSlice / CacheUpdate on a dead destination
(D404, issue 37 item 5: "a loop-carried dst reuses one buffer").

``lower_tensor`` lowers ``insert_slice(dst, update, ...)`` (and ``cache_update``) as a copy
kernel ``out[...] = dst[...]`` followed by kernels that store into ``out``; fusion removes the
copy when ``dst`` is computed in the same program by a kernel it can merge with, but not when
``dst`` is a loop-carried buffer: every iteration of a loop that writes one window of a carried
tensor copied the whole tensor twice (``carry -> t`` in the body, ``t -> carry`` at the end).

``inplace(program)`` removes a copy kernel and lets the later steps write its source directly,
when the source's old value is never read again:

* the kernel is a plain copy: one load of ``src`` and one store of its value to ``dst``, the same
  contiguous strides, no offset / index, no mask beyond the domain edge; both are temporaries
  with no alias (no view of their storage exists), ``src != dst``;
* ``dst`` is written only by this kernel and by steps after it in the same step list, and is
  read nowhere outside them (and the loop's yields);
* nothing after the copy in that step list reads or writes ``src``, and ``src`` is not among the
  loop's yields; ``src`` is either a buffer the enclosing loop carries (its next value comes from
  the yields; the loop's own value is the carried buffers after the last yield copy) or a
  temporary written earlier in the same step list and not a program output (never an input, a
  constant, or a loop-invariant buffer read again by the next iteration).

Then the copy is dropped, ``dst`` is renamed ``src`` in the later steps and the yields, and the
``dst`` buffer is removed; a yield of a carried buffer to itself is then no copy at all (the
interpreter and the C renderer skip it). Values never change: the later steps read and write
the same elements as before, in storage that held the same value.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from tilefoundry.compiler import kir
from tilefoundry.compiler.forward import copy_of
from tilefoundry.compiler.kir import HostLoop, Kernel, Program

__all__ = ["inplace"]


def _names(outputs) -> set[str]:
    if isinstance(outputs, tuple):
        return set().union(*(_names(o) for o in outputs)) if outputs else set()
    return {outputs}


def _refs(step) -> tuple[set[str], set[str]]:
    """(buffers read, buffers written) by a step, nested loops included."""
    reads, writes = set(), set()
    if isinstance(step, Kernel):
        for ins in kir.iter_instrs(step.body):
            if isinstance(ins, kir.Load):
                reads.add(ins.buffer)
            elif isinstance(ins, kir.Store):
                writes.add(ins.buffer)
        return reads, writes
    reads |= set(step.inits) | set(step.yields) | set(step.carried)
    writes |= set(step.carried) | {step.var}
    for s in step.body:
        r, w = _refs(s)
        reads |= r
        writes |= w
    return reads, writes


def _copy_of(k: Kernel, bm: dict[str, kir.Buffer]) -> tuple[str, str] | None:
    """(src, dst) when ``k`` is a plain contiguous copy of one temporary into another."""
    got = copy_of(k)  # one load, one store of it, edge masks only, no index (forward.py)
    if got is None:
        return None
    ld, st = got
    if ld.offset or st.offset:
        return None
    src, dst = bm.get(ld.buffer), bm.get(st.buffer)
    if src is None or dst is None or src.name == dst.name:
        return None
    if src.kind != "temp" or dst.kind != "temp" or src.dtype != dst.dtype or \
            src.shape != dst.shape or src.strides != dst.strides or \
            src.strides != kir.c_strides(src.shape) or ld.strides != st.strides or \
            tuple(k.domain) != tuple(src.shape):
        return None
    return src.name, dst.name


def _rename_instr(ins, old: str, new: str):
    if isinstance(ins, kir.Load | kir.Store) and ins.buffer == old:
        return dataclasses.replace(ins, buffer=new)
    if isinstance(ins, kir.TileLoop):
        return dataclasses.replace(ins, body=tuple(_rename_instr(i, old, new) for i in ins.body))
    return ins


def _rename(step, old: str, new: str):
    if isinstance(step, Kernel):
        return dataclasses.replace(step, body=tuple(_rename_instr(i, old, new)
                                                    for i in step.body))
    sub = lambda names: tuple(new if n == old else n for n in names)  # noqa: E731
    return dataclasses.replace(step, inits=sub(step.inits), yields=sub(step.yields),
                               carried=sub(step.carried),
                               body=tuple(_rename(s, old, new) for s in step.body))


class _Pass:
    def __init__(self, program: Program):
        self.bm = {b.name: b for b in program.buffers}
        self.aliased = {b.base for b in program.buffers if b.kind == "alias"}
        self.outputs = _names(program.outputs)
        self.removed: set[str] = set()
        self.everywhere = self._count(program.steps)

    def _count(self, steps: Iterable) -> dict[str, int]:
        """How many places mention a buffer: each kernel, and each loop's own fields (inits,
        carried, yields, var) apart from its body's steps, which count on their own."""
        n: dict[str, int] = {}
        for s in steps:
            if isinstance(s, HostLoop):
                own = set(s.inits) | set(s.carried) | set(s.yields) | {s.var}
                sub = self._count(s.body)
            else:
                r, w = _refs(s)
                own, sub = r | w, {}
            for b in own:
                n[b] = n.get(b, 0) + 1
            for b, c in sub.items():
                n[b] = n.get(b, 0) + c
        return n

    def seq(self, steps: tuple, loop: HostLoop | None) -> tuple[tuple, tuple[str, ...]]:
        """The step list with its dead copies removed, and the (renamed) yields."""
        steps = tuple(self.step(s) for s in steps)
        yields = loop.yields if loop is not None else ()
        i = 0
        while i < len(steps):
            k = steps[i]
            pair = _copy_of(k, self.bm) if isinstance(k, Kernel) else None
            if pair is None or not self.dead(pair, steps, i, loop, yields):
                i += 1
                continue
            src, dst = pair
            steps = steps[:i] + tuple(_rename(s, dst, src) for s in steps[i + 1:])
            yields = tuple(src if y == dst else y for y in yields)
            self.removed.add(dst)
        return steps, yields

    def dead(self, pair: tuple[str, str], steps: tuple, i: int, loop: HostLoop | None,
             yields: tuple[str, ...]) -> bool:
        src, dst = pair
        if src in self.aliased or dst in self.aliased or dst in self.outputs:
            return False
        later = [_refs(s) for s in steps[i + 1:]]
        if any(src in r or src in w for r, w in later) or src in yields:
            return False
        # dst: written by the copy and later steps of this list only, mentioned nowhere else
        local = 1 + sum(1 for r, w in later if dst in r or dst in w) + int(dst in yields)
        if any(isinstance(s, HostLoop) for s in steps[i + 1:]) or \
                self.everywhere.get(dst, 0) != local:
            return False
        if loop is not None and src in loop.carried:
            return True
        earlier = steps[:i]
        if src in self.outputs or any(isinstance(s, HostLoop) for s in earlier):
            return False
        refs = [_refs(s) for s in earlier]
        return any(src in w for _, w in refs) and \
            self.everywhere.get(src, 0) == sum(1 for r, w in refs if src in r or src in w) + 1

    def step(self, s):
        if isinstance(s, Kernel):
            return s
        body, yields = self.seq(s.body, s)
        return dataclasses.replace(s, body=body, yields=yields)


def inplace(program: Program) -> Program:
    """``program`` with every dead-destination copy kernel removed (see the module text)."""
    p = _Pass(program)
    steps, _ = p.seq(program.steps, None)
    if not p.removed:
        return program
    buffers = tuple(b for b in program.buffers if b.name not in p.removed)
    return dataclasses.replace(program, buffers=buffers, steps=steps)
