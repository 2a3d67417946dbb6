"""Copy forwarding: a later kernel reads a copy's source through the copy's index map instead
of the copy (kernel IR → kernel IR; the first step of the ``fuse`` pass, D549).

A *copy* kernel ``P`` is one load of ``src`` and one store of that value into ``dst``, masked by
nothing but the domain edge, no gather index: a Transpose, a Slice, a Concat part, the K-major
copy of an fp8 matmul's B (D489). Fusion merges ``P`` into a consumer of the same domain (the
access maps then agree); a consumer of another domain — the matmul reading the copy through a
3-D map, a second copy reading the first transposed — keeps reading ``dst``, and every element
crosses memory twice. ``forward_copies`` rewrites such a consumer's loads of ``dst`` into loads
of ``src`` (offset and strides composed with ``P``'s maps) and drops ``P`` when:

* ``dst`` is a temporary written by ``P`` alone, whole (the store's map is the C-order map of
  ``P``'s domain onto ``dst``'s ``size`` elements), no view of it exists, it is no output and no
  loop carries it;
* every reader of ``dst`` is a kernel after ``P`` in the same step list (a loop body's included),
  and every one of its loads of ``dst`` composes: no index; each axis the load steps along, with
  a positive stride, steps along one axis of ``P``'s domain (its stride is that axis's C stride
  in ``dst``); its offset is one element of ``dst``; and along every axis of ``P``'s domain the
  load's first coordinate plus its extents stay inside that axis (no lane of the consumer's
  domain walks off one row of ``dst`` into the next: the composed map would read elsewhere);
* nothing after ``P`` in that list writes ``src``'s storage (the consumer reads the same value
  ``P`` would have copied);
* the consumer gains: it is itself a copy (two copies become one), or the load's unit-stride axes
  stay what they were (a GEMM's K-major operand stays K-major: a forwarded transpose that turns
  a contiguous read into a strided one is left as a copy, which the tensor-core paths and the
  vector loads need).

Values never change: a forwarded load reads, for every lane, the element of ``src`` that ``P``
stored at the element of ``dst`` the load read (masked lanes stay masked). The translation
validator's ``fuse`` check proves it per program (``tilefoundry validate``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from tilefoundry.compiler import kir
from tilefoundry.compiler.kir import EdgeMask, HostLoop, Kernel, Load, Program, Store, TileLoop

__all__ = ["forward_copies"]


@dataclass(frozen=True)
class _Copy:
    """A copy kernel's maps: ``dst[Σ c_j·dst_strides[j]] = src[src_offset + Σ c_j·src_strides[j]]``
    over its domain (axes of extent 1 have coordinate 0)."""

    src: str
    dst: str
    domain: tuple[int, ...]
    src_strides: tuple[int, ...]
    src_offset: int
    dst_strides: tuple[int, ...]


def copy_of(k: Kernel) -> tuple[Load, Store] | None:
    """(load, store) when ``k`` is a plain copy: one load, one store of its value, masked by
    nothing but the domain edge, no gather / scatter index."""
    edges = {i.out for i in k.body if isinstance(i, EdgeMask)}
    body = [i for i in k.body if not isinstance(i, EdgeMask)]
    if len(body) != 2 or not isinstance(body[0], Load) or not isinstance(body[1], Store):
        return None
    ld, st = body
    if st.value != ld.out or ld.index or st.index:
        return None
    if any(m is not None and m not in edges for m in (ld.mask, st.mask)):
        return None
    return ld, st


def _whole_copy(k: Kernel, bm: Mapping[str, kir.Buffer]) -> _Copy | None:
    """The copy's maps when it writes the whole of a temporary ``dst`` in C order."""
    got = copy_of(k)
    if got is None:
        return None
    ld, st = got
    src, dst = bm.get(ld.buffer), bm.get(st.buffer)
    if src is None or dst is None or dst.kind != "temp" or src.dtype != dst.dtype or \
            kir.root_of(src.name, bm).name == dst.name:
        return None
    dom = k.domain
    if st.offset or dst.size != math.prod(dom) or dst.size == 0 or \
            dst.strides != kir.c_strides(dst.shape):
        return None
    cs = kir.c_strides(dom)
    if any(n > 1 and s != c for n, s, c in zip(dom, st.strides, cs, strict=True)):
        return None
    return _Copy(src.name, dst.name, dom, tuple(ld.strides), ld.offset, cs)


def _compose(cp: _Copy, ld: Load, extents: Sequence[int]) -> Load | None:
    """``ld`` (a load of ``cp.dst`` over a domain of ``extents``) as a load of ``cp.src``, or
    None when its map does not compose (see the module docstring)."""
    if ld.index:
        return None
    wide = [j for j, n in enumerate(cp.domain) if n > 1]
    axis_of = {cp.dst_strides[j]: j for j in wide}  # distinct: C strides of axes past 1
    start = {j: (ld.offset // cp.dst_strides[j]) % cp.domain[j] for j in wide}
    if ld.offset != sum(start[j] * cp.dst_strides[j] for j in wide):
        return None  # past the end of dst, or negative
    reach = dict(start)
    strides = []
    for e, t in zip(extents, ld.strides, strict=True):
        if e <= 1 or t == 0:
            strides.append(0)
            continue
        j = axis_of.get(t)
        if j is None:
            return None
        reach[j] += e - 1
        strides.append(cp.src_strides[j])
    if any(reach[j] >= cp.domain[j] for j in wide):
        return None
    off = cp.src_offset + sum(start[j] * cp.src_strides[j] for j in wide)
    return replace(ld, buffer=cp.src, strides=tuple(strides), offset=off)


def _unit_axes(strides: Sequence[int], extents: Sequence[int]) -> set[int]:
    return {i for i, (s, e) in enumerate(zip(strides, extents, strict=True)) if s == 1 and e > 1}


def _rewrite(body: Sequence, cp: _Copy, extents: Sequence[int], gains: bool) -> tuple | None:
    """``body`` with every load of ``cp.dst`` composed, or None if one does not compose or
    (``gains`` False: the consumer is no copy) would lose its unit-stride axes."""
    out = []
    for ins in body:
        if isinstance(ins, Load) and ins.buffer == cp.dst:
            new = _compose(cp, ins, extents)
            if new is None:
                return None
            unit = _unit_axes(ins.strides, extents)
            if not gains and (not unit or _unit_axes(new.strides, extents) != unit):
                return None
            ins = new
        elif isinstance(ins, TileLoop):
            inner = _rewrite(ins.body, cp, extents, gains)
            if inner is None:
                return None
            ins = replace(ins, body=inner)
        out.append(ins)
    return tuple(out)


def _forward_list(steps: Sequence, bm: Mapping[str, kir.Buffer], writers: Mapping[str, int],
                  readers: dict[str, int], pinned: set[str], log: list[str]) -> tuple:
    work = [replace(s, body=_forward_list(s.body, bm, writers, readers, pinned, log))
            if isinstance(s, HostLoop) else s for s in steps]
    i = 0
    while i < len(work):
        P = work[i]
        cp = _whole_copy(P, bm) if isinstance(P, Kernel) else None
        if cp is None or writers.get(cp.dst, 0) != 1 or cp.dst in pinned:
            i += 1
            continue
        src_root = kir.root_of(cp.src, bm).name
        new: dict[int, Kernel] = {}
        ok = True
        for j in range(i + 1, len(work)):
            s = work[j]
            r, w = kir._step_io(s)  # a loop's include its body's (dst is no loop's: pinned)
            if src_root in {kir.root_of(n, bm).name for n in w}:
                ok = False
                break
            if cp.dst not in r:
                continue
            if not isinstance(s, Kernel):
                ok = False  # read inside a later loop: left alone
                break
            body = _rewrite(s.body, cp, s.domain, copy_of(s) is not None)
            if body is None:
                ok = False
                break
            new[j] = replace(s, body=body)
        if not ok or not new or len(new) != readers.get(cp.dst, 0):
            i += 1  # a reader elsewhere (before P, in another list) still needs dst
            continue
        for j, k in new.items():
            work[j] = k
        log.append(f"{P.name}: {cp.dst} read from {cp.src} by "
                   f"{', '.join(work[j].name for j in sorted(new))}")
        readers[cp.src] = readers.get(cp.src, 0) + len(new)
        readers[cp.dst] = 0
        del work[i]  # its dst has no reader left; the fuse pass's cleanup drops the buffer
    return tuple(work)


def forward_copies(program: Program, log: list[str] | None = None) -> Program:
    """``program`` with copies forwarded into their consumers (see the module docstring);
    ``log`` (if given) receives one line per copy removed."""
    bm = program.buffer_map()
    writers: dict[str, int] = {}
    readers: dict[str, int] = {}  # kernels loading a buffer (by name)
    pinned = set(program.output_names()) | {b.base for b in program.buffers
                                            if b.kind == "alias" and b.base}

    def count(seq: Iterable) -> None:
        for s in seq:
            if isinstance(s, HostLoop):
                pinned.update({*s.carried, *s.inits, *s.yields, s.var})
                count(s.body)
                continue
            r, w = kir._step_io(s)
            for b in w:
                writers[b] = writers.get(b, 0) + 1
            for b in r:
                readers[b] = readers.get(b, 0) + 1

    count(program.steps)
    steps = _forward_list(program.steps, bm, writers, readers, pinned,
                          log if log is not None else [])
    return replace(program, steps=steps)
