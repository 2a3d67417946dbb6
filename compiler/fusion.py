"""Fusion: merge a producer kernel into a consumer of its output (kernel IR → kernel IR).

A producer ``P`` and a later consumer ``C`` (a kernel that loads a buffer ``P`` stores) merge
into one kernel at ``C``'s place when:

* **domains fit**: after padding the lower-rank domain with trailing extent-1 axes, one domain
  (the *host*) dominates the other (the *guest*) axis by axis — equal extents, or 1 in the
  guest. The guest's code runs at the host's top level, so it may not loop (``TileLoop``) and
  must not span the host's loop axes; a guest axis of extent 1 that the host spreads over the
  grid is kept in one tile (no instance repeats the guest's writes);
* **every load in C of a buffer P writes is forwarded**: P stores that buffer once (no other
  writer in the program), at its top level, with the same access map (strides, offset,
  indices) as C's load, masked by nothing but the domain edge. The load then reads P's value
  directly — the same instance computed it, so nothing crosses program instances;
* **nothing in between conflicts**: no step between P and C reads or writes what P writes, or
  writes what P reads (P's code moves to C's place);
* **the merged tile fits**: every axis either kernel reduces stays whole in one tile
  (``schedule.choose_block`` — a row that does not fit keeps its own kernel).

Fusion never changes a value: instructions move unchanged (each keeps its widen / op / round
and its reduction policy); only loads of intermediates are replaced by the values that were
stored. Afterwards stores to temporaries nobody reads are dropped (an intermediate that other
kernels still read stays materialized), and each kernel is cleaned: common subexpressions
shared (pure instructions; loads only of buffers the kernel does not store), dead code removed,
SSA names renumbered. Inside a ``HostLoop`` the body is fused on its own; nothing crosses the
loop boundary.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

from tilefoundry.compiler import kir
from tilefoundry.compiler.forward import forward_copies
from tilefoundry.compiler.kir import (
    EdgeMask,
    HostLoop,
    Instr,
    Kernel,
    Load,
    Program,
    Store,
    TileLoop,
    iter_instrs,
)
from tilefoundry.compiler.schedule import TileConfig, choose_block, dot_axis

__all__ = ["cleanup_kernel", "fuse"]


# =============================================================================================
# program-wide facts
# =============================================================================================
def _walk_steps(steps: Iterable) -> Iterable:
    for s in steps:
        yield s
        if isinstance(s, HostLoop):
            yield from _walk_steps(s.body)


def _writers(steps: Iterable, bm: Mapping[str, kir.Buffer]) -> dict[str, list]:
    out: dict[str, list] = {}
    for s in _walk_steps(steps):
        w = kir._step_io(s, bm)[1] if isinstance(s, Kernel) else \
            {kir.root_of(n, bm).name for n in (*s.carried, s.var)}
        for b in w:
            out.setdefault(b, []).append(s)
    return out


def _readers(program_steps: Iterable, outputs: Iterable[str]) -> dict[str, int]:
    n: dict[str, int] = {}
    for o in outputs:
        n[o] = n.get(o, 0) + 1
    for s in _walk_steps(program_steps):
        if isinstance(s, Kernel):
            for ins in iter_instrs(s.body):
                if isinstance(ins, Load):
                    n[ins.buffer] = n.get(ins.buffer, 0) + 1
        else:
            for b in (*s.inits, *s.yields):
                n[b] = n.get(b, 0) + 1
    return n


def _io(step: Any) -> tuple[set[str], set[str]]:
    return kir._step_io(step)


# =============================================================================================
# per-kernel rewriting
# =============================================================================================
def _pad(body: Sequence[Instr], extra: int) -> tuple:
    if not extra:
        return tuple(body)
    out = []
    for ins in body:
        if isinstance(ins, Load | Store):
            ins = replace(ins, strides=ins.strides + (0,) * extra)
        elif isinstance(ins, TileLoop):
            ins = replace(ins, body=_pad(ins.body, extra))
        out.append(ins)
    return tuple(out)


def _prefix(body: Sequence[Instr], tag: str) -> tuple:
    names: dict[str, str] = {}
    for ins in iter_instrs(body):
        for r in ins.results():
            names[r] = f"%{tag}{r[1:]}"
        if isinstance(ins, TileLoop):
            for c in ins.carried:
                names[c] = f"%{tag}{c[1:]}"
    return tuple(i.renamed(names) for i in body)


class _Uses:
    """``m`` for operands, identity for ``keep`` (an instruction's own results): a view, so
    renaming one instruction costs O(1) whatever the size of ``m``."""

    __slots__ = ("keep", "m")

    def __init__(self, m: Mapping[str, str], keep: tuple):
        self.m, self.keep = m, keep

    def get(self, k: str, default: Any = None) -> Any:
        return k if k in self.keep else self.m.get(k, default)


def _rename_uses(body: Sequence[Instr], m: Mapping[str, str]) -> tuple:
    """Replace operand names (not results) through ``m``."""
    if not m:
        return tuple(body)
    out = []
    for ins in body:
        if isinstance(ins, TileLoop):
            ins = replace(ins, inits=tuple(m.get(n, n) for n in ins.inits),
                          yields=tuple(m.get(n, n) for n in ins.yields),
                          body=_rename_uses(ins.body, m))
        else:
            ins = ins.renamed(_Uses(m, ins.results()))
        out.append(ins)
    return tuple(out)


def _defs(body: Sequence[Instr]) -> dict[str, Instr]:
    d: dict[str, Instr] = {}
    for ins in iter_instrs(body):
        for r in ins.results():
            d[r] = ins
    return d


def _localize(body: Sequence[Instr], grown: set[int]) -> tuple:
    """A guest's coordinates along axes of extent 1 (which the host spans) are 0 and its
    edge masks along them are true: say so before the guest runs on the host's domain."""
    out = []
    for ins in body:
        if isinstance(ins, kir.Coord) and ins.axis in grown:
            ins = kir.Const(ins.out, 0, "i64")
        elif isinstance(ins, EdgeMask) and set(ins.axes) & grown:
            axes = tuple(d for d in ins.axes if d not in grown)
            ins = replace(ins, axes=axes) if axes else kir.Const(ins.out, True, "bool")
        out.append(ins)
    return tuple(out)


def _access_key(ins: Load | Store) -> tuple:
    return (ins.buffer, ins.strides, ins.offset, ins.index)


def _replace_loads(body: Sequence[Instr], gone: set[str],
                   widen: Mapping[str, Instr]) -> tuple:
    """Drop the loads in ``gone``; replace those in ``widen`` by the given instruction."""
    out = []
    for ins in body:
        if isinstance(ins, Load) and ins.out in gone:
            continue
        if isinstance(ins, Load) and ins.out in widen:
            ins = widen[ins.out]
        elif isinstance(ins, TileLoop):
            ins = replace(ins, body=_replace_loads(ins.body, gone, widen))
        out.append(ins)
    return tuple(out)


def _key_value(v: object) -> object:
    """A CSE key part: a float keyed with its sign (``-0.0 == 0.0`` in Python, but a ``const
    -0.0`` — a sum's exact seed — and a ``const 0.0`` are different values; merging them turned
    an exclusive scan's +0 into -0)."""
    return (v, math.copysign(1.0, v)) if isinstance(v, float) else v


def _cse(body: Sequence[Instr], table: dict, canon: dict[str, str],
         stored: set[str]) -> tuple:
    out = []
    for ins in body:
        ins = _rename_uses((ins,), canon)[0]
        if isinstance(ins, TileLoop):
            ins = replace(ins, body=_cse(ins.body, dict(table), canon, stored))
            out.append(ins)
            continue
        if isinstance(ins, Store) or (isinstance(ins, Load) and ins.buffer in stored):
            out.append(ins)
            continue
        key = (type(ins).__name__,
               *((f.name, _key_value(getattr(ins, f.name))) for f in fields(ins)
                 if f.name != "out"))
        hit = table.get(key)
        if hit is not None:
            canon[ins.out] = hit
            continue
        table[key] = ins.out
        out.append(ins)
    return tuple(out)


def _dce(body: Sequence[Instr], live: set[str]) -> tuple:
    out: list[Instr] = []
    for ins in reversed(body):
        if isinstance(ins, Store):
            out.append(ins)
            live.update(ins.operands())
            continue
        if isinstance(ins, TileLoop):
            has_store = any(isinstance(i, Store) for i in iter_instrs(ins.body))
            if not has_store and not (set(ins.outs) & live):
                continue
            inner_live = set(live) | set(ins.yields)
            new_body = _dce(ins.body, inner_live)
            live.update(inner_live)
            live.update(ins.inits)
            out.append(replace(ins, body=new_body))
            continue
        if set(ins.results()) & live:
            out.append(ins)
            live.update(ins.operands())
    return tuple(reversed(out))


def _renumber(body: Sequence[Instr]) -> tuple:
    names: dict[str, str] = {}

    def visit(seq: Sequence[Instr]) -> None:
        for ins in seq:
            for r in ins.results():  # a loop's results first: they head its block
                names.setdefault(r, f"%{len(names)}")
            if isinstance(ins, TileLoop):
                for c in ins.carried:
                    names.setdefault(c, f"%{len(names)}")
                visit(ins.body)

    visit(body)
    return tuple(i.renamed(names) for i in body)


def cleanup_kernel(k: Kernel, dead_buffers: set[str] = frozenset()) -> Kernel:
    """Drop stores to ``dead_buffers``, share common subexpressions, remove dead code,
    renumber SSA names."""
    body = tuple(_drop_stores(k.body, dead_buffers))
    stored = {i.buffer for i in iter_instrs(body) if isinstance(i, Store)}
    body = _cse(body, {}, {}, stored)
    body = _dce(body, set())
    return replace(k, body=_renumber(body))


def drop_full_masks(k: Kernel) -> Kernel:
    """Masks only where the final blocks leave a ragged edge: an edge mask's axes that the
    block divides are dropped, an all-true mask disappears from loads, stores and reductions
    (the renderers then emit unmasked code for the common case)."""
    ragged = {d for d in range(k.rank) if k.domain[d] % k.block[d]}
    true: set[str] = set()
    ren: dict[str, str] = {}

    def mask(m: str | None) -> str | None:
        return None if m is None or m in true else m

    def walk(body: Sequence[Instr]) -> tuple:
        out: list[Instr] = []
        for ins in body:
            ins = _rename_uses((ins,), ren)[0]
            if isinstance(ins, EdgeMask):
                axes = tuple(d for d in ins.axes if d in ragged)
                if not axes:
                    true.add(ins.out)
                    ins = kir.Const(ins.out, True, "bool")
                else:
                    ins = replace(ins, axes=axes)
            elif isinstance(ins, kir.Const) and ins.value is True:
                true.add(ins.out)
            elif isinstance(ins, kir.BinOp) and ins.kind == "and" and (
                    ins.a in true or ins.b in true):
                other = ins.b if ins.a in true else ins.a
                if other in true:
                    true.add(ins.out)
                ren[ins.out] = other
                continue
            elif isinstance(ins, Load | Store | kir.Reduce | kir.Dot):
                ins = replace(ins, mask=mask(ins.mask))
            elif isinstance(ins, TileLoop):
                ins = replace(ins, body=walk(ins.body))
            out.append(ins)
        return tuple(out)

    return replace(k, body=walk(k.body))


def _drop_stores(body: Sequence[Instr], dead: set[str]) -> Iterable[Instr]:
    for ins in body:
        if isinstance(ins, Store) and ins.buffer in dead:
            continue
        if isinstance(ins, TileLoop):
            ins = replace(ins, body=tuple(_drop_stores(ins.body, dead)))
        yield ins


# =============================================================================================
# merging two kernels
# =============================================================================================
@dataclass
class _Facts:
    """What merging needs to know of a kernel, kept per kernel object so that a merge costs
    time in the size of the kernel merged in, not of the growing host (a chain of n ops fuses
    in near-linear time instead of re-walking the fused body at every step)."""

    kernel: Kernel  # kept alive: the facts are keyed by its id
    io: tuple  # (roots read, roots written)
    stores: dict  # top-level store access key -> stored value ("" if masked by more than the edge)
    masks: set  # names defined by EdgeMask instructions
    reduced: set  # axes any Reduce / Dot reduces (before dropping loop / extent-1 axes)
    types: dict | None = None  # name -> Tile over the kernel's own domain (computed on demand)


def _facts_of(k: Kernel, body: tuple, bm: Mapping[str, kir.Buffer]) -> _Facts:
    r: set[str] = set()
    w: set[str] = set()
    masks: set[str] = set()
    reduced: set[int] = set()
    for ins in iter_instrs(body):
        if isinstance(ins, Load):
            r.add(kir.root_of(ins.buffer, bm).name)
        elif isinstance(ins, Store):
            w.add(kir.root_of(ins.buffer, bm).name)
        elif isinstance(ins, EdgeMask):
            masks.add(ins.out)
        elif isinstance(ins, kir.Reduce):
            reduced |= set(ins.axes)
        elif isinstance(ins, kir.Dot):
            reduced.add(ins.axis)
    return _Facts(k, (r, w), _top_stores(body, masks), masks, reduced)


def _top_stores(body: Sequence[Instr], masks: set[str], into: dict | None = None) -> dict:
    stores: dict[tuple, str] = {} if into is None else into
    for ins in body:
        if isinstance(ins, Store):
            if ins.mask is None or ins.mask in masks:
                stores.setdefault(_access_key(ins), ins.value)
            else:
                stores.setdefault(_access_key(ins), "")
    return stores


class _Fuser:
    def __init__(self, program: Program, cfg: TileConfig):
        self.p = program
        self.cfg = cfg
        self.bm = program.buffer_map()
        # writers in the unfused program: merging never adds a writer, so single-writer
        # buffers stay single-writer (conservative for the forwarding rule)
        self.writers = {b: len(ws) for b, ws in _writers(program.steps, self.bm).items()}
        self.facts: dict[int, _Facts] = {}
        self.merges = 0

    def fact(self, k: Kernel) -> _Facts:
        f = self.facts.get(id(k))
        if f is None or f.kernel is not k:
            f = self.facts[id(k)] = _facts_of(k, k.body, self.bm)
        return f

    def io(self, step: Any) -> tuple[set[str], set[str]]:
        """(roots read, roots written): an alias reads / writes its base's storage."""
        if isinstance(step, Kernel):
            return self.fact(step).io
        return kir._step_io(step, self.bm)

    def types(self, k: Kernel, body: tuple, rank: int) -> dict[str, kir.Tile]:
        extra = rank - k.rank
        probe = Kernel("probe", k.domain + (1,) * extra, k.block + (1,) * extra, body,
                       k.loop_axes)
        return kir._Checker(probe, self.bm, "fusion", strict=False).run()

    def own_types(self, k: Kernel) -> dict[str, kir.Tile]:
        f = self.fact(k)
        if f.types is None:
            f.types = self.types(k, k.body, k.rank)
        return f.types

    def try_merge(self, steps: list, i: int, j: int) -> Kernel | None:
        P, C = steps[i], steps[j]
        rp, wp = self.io(P)
        for s in steps[i + 1:j]:
            r, w = self.io(s)
            if (r | w) & wp or w & rp:
                return None
        if any(self.writers.get(b, 0) != 1 for b in wp & self.io(C)[0]):
            return None
        rank = max(P.rank, C.rank)
        dp = P.domain + (1,) * (rank - P.rank)
        dc = C.domain + (1,) * (rank - C.rank)
        if all(a == b or b == 1 for a, b in zip(dp, dc, strict=True)):
            host_is_p, host, guest_dom = True, P, dc
        elif all(a == b or a == 1 for a, b in zip(dp, dc, strict=True)):
            host_is_p, host, guest_dom = False, C, dp
        else:
            return None
        guest = C if host_is_p else P
        if guest.loop_axes or host.rank != rank:
            return None
        hdom = host.domain
        if any(guest_dom[d] != 1 for d in host.loop_axes if hdom[d] > 1):
            return None
        grown = {d for d in range(rank) if guest_dom[d] == 1 and hdom[d] > 1}
        host_loops = set(host.loop_axes)
        for ins in iter_instrs(guest.body):
            reduced = set(ins.axes) if isinstance(ins, kir.Reduce) else \
                {ins.axis} if isinstance(ins, kir.Dot) else set()
            if grown & reduced:  # a reduction over a guest axis of extent 1 would reduce
                return None      # the host's whole axis
            used = reduced | (set(ins.axes) if isinstance(ins, kir.EdgeMask) else
                              {ins.axis} if isinstance(ins, kir.Coord) else set())
            if host_loops & used:
                # the host walks that axis in a tile loop (a dot's K, also of extent 1): the
                # guest's own use of it (a scan's contribution axis) has no tile outside it
                return None
        single = grown - set(host.loop_axes)
        # P's names stay; C's get a tag no name of P carries (each merge its own), so only the
        # kernel merged in is renamed. Names are renumbered once, by the final cleanup.
        self.merges += 1
        p_same = P.rank == rank and host_is_p  # P's body is used as it is
        pb = P.body if p_same else _pad(P.body, rank - P.rank)
        cb = _prefix(_pad(C.body, rank - C.rank), f"m{self.merges}_")
        if host_is_p:
            cb = _localize(cb, grown)
        else:
            pb = _localize(pb, grown)
        pf = self.fact(P)
        if p_same:
            stores, tp = pf.stores, self.own_types(P)
        else:
            pmasks = {i.out for i in iter_instrs(pb) if isinstance(i, EdgeMask)}
            stores, tp = _top_stores(pb, pmasks), self.types(P, pb, rank)
        tc = self.types(C, cb, rank)
        fwd: dict[str, str] = {}
        widen: dict[str, kir.Broadcast] = {}
        for ins in iter_instrs(cb):
            if isinstance(ins, Load) and kir.root_of(ins.buffer, self.bm).name in wp:
                v = stores.get(_access_key(ins))
                if not v:
                    return None
                missing = tc[ins.out].full - tp[v].full
                if missing:  # the stored value did not vary along axes the load spans
                    widen[ins.out] = kir.Broadcast(ins.out, v, tuple(sorted(missing)))
                else:
                    fwd[ins.out] = v
        cpart = _rename_uses(_replace_loads(cb, set(fwd), widen), fwd)
        body = pb + cpart
        loop_blocks = {d: host.block[d] for d in host.loop_axes}
        cf = _facts_of(C, cpart, self.bm)  # the merged-in part (its own loads and stores)
        raw = (pf.reduced if p_same else _facts_of(P, pb, self.bm).reduced) | cf.reduced
        reduced = {d for d in raw if d not in host.loop_axes and hdom[d] > 1}
        # the matmul tiles of a target that asks for them (a walk of the body: only then)
        dax = dot_axis(body) if self.cfg.dot_mn is not None else None
        block = choose_block(hdom, reduced | single, loop_blocks, self.cfg, dax)
        if block is None:
            return None
        name = _merged_name(P.name, C.name)
        merged = Kernel(name, hdom, block, body, host.loop_axes)
        self.facts.pop(id(P), None)  # P and C are gone once merged: their facts move on
        self.facts.pop(id(C), None)
        if p_same:  # the merged kernel's facts: P's, grown in place by the part merged in
            pf.masks |= cf.masks
            _top_stores(cpart, pf.masks, pf.stores)
            pf.io[0].update(cf.io[0])
            pf.io[1].update(cf.io[1])
            pf.reduced |= cf.reduced
            if pf.types is not None and C.rank == rank and not grown and not widen:
                pf.types.update(tc)  # C ran over the host's own domain: its types stand
            else:
                pf.types = None
            pf.kernel = merged
            self.facts[id(merged)] = pf
        return merged

def _merged_name(p: str, c: str) -> str:
    """``k0_mul`` + ``k3_add`` -> ``k0..k3_add`` (the range of lowered kernels it holds)."""
    first = p.split("_", 1)[0].split("..")[0]
    head, _, hint = c.partition("_")
    return f"{first}..{head.split('..')[-1]}_{hint}"


def _fuse_list(fz: _Fuser, steps: Sequence) -> tuple:
    out = []
    for s in steps:
        if isinstance(s, HostLoop):
            s = replace(s, body=_fuse_list(fz, s.body))
        out.append(s)
    work = list(out)
    # Each consumer C (in order) merges with the nearest earlier kernel P that writes what C
    # reads and can merge, scanning back; after a merge the scan resumes at the merged
    # producer's old position: nothing before it changed, so the consumers there would find
    # the same nothing again (a restart from 0 after every merge, and a scan over every
    # earlier step per consumer, made Concat of K operands quadratic). ``writers`` indexes
    # the kernels before j by the roots they write.
    j = 0
    writers: dict[str, list[int]] = {}
    log: list[tuple[int, str]] = []  # (position, root) in the order entered in ``writers``
    while j < len(work):
        C = work[j]
        merged_at = None
        if isinstance(C, Kernel):
            reads = fz.io(C)[0]
            cands = sorted({i for r in reads for i in writers.get(r, ())}, reverse=True)
            for i in cands:
                merged = fz.try_merge(work, i, j)
                if merged is not None:
                    work[j] = merged
                    del work[i]
                    merged_at = i
                    break
        if merged_at is None:
            if isinstance(C, Kernel):
                for r in sorted(fz.io(C)[1]):
                    writers.setdefault(r, []).append(j)
                    log.append((j, r))
            j += 1
            continue
        j = merged_at
        while log and log[-1][0] >= j:  # forget the kernels from the resume point on
            writers[log.pop()[1]].pop()
    return tuple(work)


def _clean(program: Program) -> Program:
    readers = _readers(program.steps, program.output_names())
    bm = program.buffer_map()
    read_via: dict[str, int] = {}  # a buffer's readers, its aliases' included
    for x in program.buffers:
        n = readers.get(x.name, 0)
        read_via[x.name] = read_via.get(x.name, 0) + n
        if x.kind == "alias":
            read_via[x.base] = read_via.get(x.base, 0) + n
    dead = {b.name for b in program.buffers if b.kind == "temp" and not read_via.get(b.name)}

    def steps(seq: Sequence) -> tuple:
        out = []
        for s in seq:
            if isinstance(s, Kernel):
                s = cleanup_kernel(drop_full_masks(cleanup_kernel(s, dead)))
                if not any(isinstance(i, Store) for i in iter_instrs(s.body)):
                    continue
            else:
                s = replace(s, body=steps(s.body))
            out.append(s)
        return tuple(out)

    new_steps = steps(program.steps)
    used: set[str] = set(program.inputs) | set(program.output_names())
    for s in _walk_steps(new_steps):
        r, w = _io(s)
        used |= r | w
    for b in list(used):
        if b in bm and bm[b].kind == "alias":
            used.add(bm[b].base)
    bufs = tuple(b for b in program.buffers if b.name in used)
    return replace(program, buffers=bufs, steps=new_steps)


def fuse(program: Program, cfg: TileConfig | None = None, log: list[str] | None = None
         ) -> Program:
    """The ``fuse`` pass: copies forwarded into their consumers (``forward.forward_copies``,
    D549; ``log`` receives a line per copy removed), then the merges of the module docstring."""
    program = forward_copies(program, log)
    fz = _Fuser(program, cfg or TileConfig())
    return _clean(replace(program, steps=_fuse_list(fz, program.steps)))
