"""The CUDA renderer's row mapping (docs/decisions.md D482-D484): one thread block per row, the
row in registers, 16-byte global accesses, warp-shuffle block reductions.

A kernel gets the row mapping (``plan_rows``) when it is lane-wise runs and one-fiber
order-free reductions only, over one tiled axis (the row: ``E`` lanes, a compile-time
constant), with values of that axis or of none. The row is cut into chunks of ``V`` lanes (16
bytes of the narrowest element accessed); thread ``t`` of the block owns chunks ``t, t + T, ...``
(``per`` chunks, fully unrolled), so a chunk is one 16-byte ``LDG.E.128`` / ``STG.E.128`` of
each load / store whose lanes are contiguous and aligned (``vector_access``); any other access
stays the per-lane scalar access of the block mapping inside the chunk loop. Values a later run
reads are per-thread register arrays (``TF_REG``, ``per * V`` slots); values over no tiled axis
(a reduction's result, what a run of one lane computes from it) are computed by every thread;
a store of such a run is thread 0's. There is one pass over memory: each global element is
loaded once and stored once.

**Reductions keep their admitted set** (D483). Only reductions whose result is one value per
instance and whose order is free take this path: ``max`` / ``min`` / ``abs_max`` (exact
functions of the multiset) and f32 / f64 ``sum`` under ``unordered_tree`` (any bracketing of
any permutation admitted). Each thread combines its own slots by a balanced tree (odd ones
carried), the warp's 32 partials combine by a ``__shfl_xor_sync`` butterfly (offsets 16, 8, 4,
2, 1: lane 0's value is a balanced tree over the warp's partials), lane 0 of each warp writes
its value to a shared array of its own reduction, one ``__syncthreads``, and every thread
combines the warps' values by the same balanced tree in warp order, so every thread holds the
same bits. The whole is a tree of a permutation of the lanes; an ``init`` enters as one leaf
(``finish``), masked lanes are the kind's identity and a masked sum's any-lane flag is OR-ed
along the same tree. Fold policies, ``ordered_tree`` sums, compensated sums, integer and bool
reductions and reductions with more than one output lane keep the block mapping (D276).

**Host emulation** (``cuda_backend.host_source``): a phase is a loop over the block's threads,
so each butterfly step is a phase of its own reading the partner's register array
(``TF_SHFL_XOR``: ``name[threadIdx.x ^ m]``) and writing a fresh one; 16-byte accesses are
``memcpy`` there.

Elementwise kernels (no reduction) get it too when their row is at least 32 chunks: ``T`` up to
256 threads, one chunk each where the row allows. Rows narrower than 32 chunks, more than one
tiled axis, a value over another axis, a register array over ``ROWS_REG_LIMIT`` slots: the
kernel keeps the lane / block / instance mapping, and ``why`` says which rule declined.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tilefoundry.compiler import kir
from tilefoundry.compiler.render_c import Run, itemsize
from tilefoundry.compiler.spelling import CTYPE

__all__ = ["ROWS_CHUNKS", "ROWS_HEAD", "ROWS_REG_LIMIT", "RowsPlan", "emit_rows", "plan_rows",
           "rows_decls"]

#: chunks a thread aims to own in a kernel with reductions: 4 x 8 bf16 (D533: with a widened
#: load held as its words, no spill at any bench shape, benchmarks/cuda_rows_sass.py; 4 chunks
#: spilled at 4096 under the launch bounds before; on an H100 97-100 % of copy at every row
#: shape against 85-98 % at 2, benchmarks/results/h100-2026-12-05/run5_*)
ROWS_CHUNKS = 4
#: threads per block at most (reductions / elementwise)
ROWS_THREADS_MAX = 1024
ROWS_ELEMENTWISE_THREADS = 256
#: the most slots one thread keeps of a register array
ROWS_REG_LIMIT = 32
#: the most chunks one thread walks (an unrolled loop)
ROWS_PER_MAX = 8
VEC_BYTES = 16
#: the warp's butterfly: ``__shfl_xor_sync`` offsets, one step each (every lane ends with a
#: balanced tree over the warp's 32 partials)
BUTTERFLY = (16, 8, 4, 2, 1)
#: threads an SM should hold of a row kernel (``min_blocks``): half of sm_90's 2048
ROWS_RESIDENT_THREADS = 1024
#: D533: no thread for a padded block's masked-off chunks; a widened narrow load read after a
#: reduction held as its load's words (off: the mapping before D533, for the bench's variants)
ROWS_D533 = True

ROWS_HEAD = r"""/* the row mapping (D482): 16-byte global accesses and warp shuffles; on the host emulation
 * an access is memcpy and a shuffle reads the partner thread's register array */
#ifdef TF_HOST_EMULATION
#define TF_LDV(w, p, n) memcpy((w), (const void *)(p), (n))
#define TF_STV(p, w, n) memcpy((void *)(p), (w), (n))
#define TF_SHFL_XOR(name, m) (name[threadIdx.x ^ (m)][0])
#else
#define TF_LDV(w, p, n) tf__ldv##n((w), (const void *)(p))
#define TF_STV(p, w, n) tf__stv##n((void *)(p), (w))
#define TF_SHFL_XOR(name, m) __shfl_xor_sync(0xffffffffu, (name)[0], (m))
TF_FN void tf__ldv16(uint32_t *w, const void *p) {
    const uint4 q = *(const uint4 *)p; w[0] = q.x; w[1] = q.y; w[2] = q.z; w[3] = q.w; }
TF_FN void tf__ldv8(uint32_t *w, const void *p) {
    const uint2 q = *(const uint2 *)p; w[0] = q.x; w[1] = q.y; }
TF_FN void tf__ldv4(uint32_t *w, const void *p) { w[0] = *(const uint32_t *)p; }
/* __stcg: one vector store instruction (a plain uint4 store may be split into four by NVVM) */
TF_FN void tf__stv16(void *p, const uint32_t *w) {
    uint4 q; q.x = w[0]; q.y = w[1]; q.z = w[2]; q.w = w[3]; __stcg((uint4 *)p, q); }
TF_FN void tf__stv8(void *p, const uint32_t *w) { uint2 q; q.x = w[0]; q.y = w[1]; __stcg((uint2 *)p, q); }
TF_FN void tf__stv4(void *p, const uint32_t *w) { *(uint32_t *)p = w[0]; }
#endif
"""


@dataclass
class RowsPlan:
    axis: int  # the tiled axis (the row)
    lanes: int  # E: the row's lanes in one instance (its block)
    vec: int  # V: lanes a chunk
    threads: int  # T
    per: int  # chunks a thread
    reg: set = field(default_factory=set)  # values over the row: per-thread slots
    uniform: set = field(default_factory=set)  # values over no tiled axis: every thread's own
    vload: dict = field(default_factory=dict)  # Load out -> (unit bytes, guard EdgeMask or None)
    vstore: dict = field(default_factory=dict)  # id(Store) -> (unit bytes, guard or None)
    hoist: set = field(default_factory=set)  # vector loads issued at the kernel's start
    remat: dict = field(default_factory=dict)  # recomputed where read: EdgeMask, kept Load, Widen
    reductions: int = 0
    why: str = ""

    @property
    def chunks(self) -> int:
        return self.lanes // self.vec

    @property
    def slots(self) -> int:
        return self.per * self.vec


def _merge(kc, segs: list) -> list:
    merged: list = []
    for s in segs:  # consecutive runs of one lane layout are one loop over the lanes
        if isinstance(s, Run) and merged and isinstance(merged[-1], Run) and \
                kc.wide(merged[-1].axes) == kc.wide(s.axes):
            merged[-1] = Run(merged[-1].axes, merged[-1].instrs + s.instrs)
        else:
            merged.append(s)
    return merged


def plan_rows(kc, segs: list) -> tuple[RowsPlan | None, str]:
    """(the row plan, why) or (None, why not) for a kernel's segments (``KernelCuda``)."""
    if not segs:
        return None, "no segments"
    if not kc.parallel_safe():
        return None, "two instances or lanes may store to one place"
    merged = _merge(kc, segs)
    axis = None
    reduces = 0
    for s in merged:
        if isinstance(s, Run):
            aw = kc.wide(s.axes)
            if len(aw) > 1:
                return None, f"a run spans {len(aw)} tiled axes (the row mapping tiles one)"
            if aw:
                if axis is not None and aw != (axis,):
                    return None, "runs over two different tiled axes"
                axis = aw[0]
            here: set[str] = set()
            for i in s.instrs:
                if isinstance(i, kir.Load | kir.Store) and i.index:
                    return None, "an indexed load or store"
                if isinstance(i, kir.Store) and any(i.strides[d] == 0 for d in aw):
                    return None, "a store with a zero stride on the row"
                for o in i.operands():
                    if o in kc.consts or o in here:
                        continue
                    if not set(kc.wide(kc.full(o))) <= set(aw):
                        return None, f"{o} is read by a run over fewer tiled axes"
                for r in i.results():
                    if kc.wide(kc.full(r)) != aw:
                        return None, f"{r} spans other tiled axes than its run"
                here.update(i.results())
        elif isinstance(s, kir.Reduce):
            dt = kc.dt(s.x)
            if dt not in ("f32", "f64"):
                return None, f"a {s.kind} reduction of {dt} (the row mapping reduces f32 / f64)"
            path = kc.reduce_path(s, 32)[0]
            if path != "partial":
                return None, (f"a {s.kind} reduction under {s.policy} with "
                              f"{kc.elems(kc.full(s.out))} output lanes (its order or shape "
                              f"is not the one-fiber order-free kind)")
            xw = kc.wide(kc.full(s.x))
            if len(xw) != 1 or (axis is not None and xw != (axis,)):
                return None, "a reduction over other than the one row axis"
            axis = xw[0]
            if s.mask and not set(kc.wide(kc.full(s.mask))) <= set(xw):
                return None, "a reduction mask over other axes"
            if s.init and s.init not in kc.consts and kc.wide(kc.full(s.init)):
                return None, "a reduction init over a tiled axis"
            reduces += 1
        else:
            return None, "a dot or tile loop (the row mapping renders runs and reductions)"
    if axis is None:
        return None, "no tiled axis"
    k = kc.k
    e = k.block[axis]
    sizes = [itemsize(kc.bm[i.buffer].dtype) for s in merged if isinstance(s, Run)
             for i in s.instrs if isinstance(i, kir.Load | kir.Store)
             and i.strides[axis] == 1]
    v = VEC_BYTES // min(sizes) if sizes else 8
    while v > 1 and e % v:
        v //= 2
    defs = {o: i for i in kir.iter_instrs(k.body) for o in i.results()}
    live = e
    if ROWS_D533 and k.grid[axis] == 1 and k.domain[axis] < e \
            and _edge_bounded(kc, merged, axis, defs):
        # one block covers the row and its padding is masked off everywhere: the chunks past
        # the domain do nothing, so no thread is given one (D533)
        live = -(-k.domain[axis] // v) * v
    c = live // v
    if c < 32:
        return None, f"a row of {live} lanes is fewer than 32 chunks of {v} (a warp)"
    if reduces:
        t = -(-c // ROWS_CHUNKS)
        t = min(ROWS_THREADS_MAX, max(32, -(-t // 32) * 32))
    else:
        t = min(ROWS_ELEMENTWISE_THREADS, -(-c // 32) * 32)
    per = -(-c // t)
    if per > ROWS_PER_MAX:
        return None, f"{per} chunks a thread (more than {ROWS_PER_MAX})"
    plan = RowsPlan(axis, live, v, t, per, reductions=reduces)
    for n in kc.arrays:
        w = kc.wide(kc.full(n))
        if isinstance(defs.get(n), kir.EdgeMask):  # a comparison of coordinates: recomputed
            plan.remat[n] = defs[n]  # where read instead of held in registers
            continue
        if w == (axis,):
            plan.reg.add(n)
        elif not w:
            plan.uniform.add(n)
        else:
            return None, f"{n} spans other tiled axes"
    if plan.reg and plan.slots > ROWS_REG_LIMIT:
        return None, (f"{plan.slots} register slots a thread for a value kept across a "
                      f"reduction (more than {ROWS_REG_LIMIT})")
    for s in merged:
        if isinstance(s, Run) and kc.wide(s.axes):
            for i in s.instrs:
                if isinstance(i, kir.Load | kir.Store):
                    acc = vector_access(kc, plan, i, defs)
                    if acc is not None:
                        (plan.vload if isinstance(i, kir.Load) else plan.vstore)[
                            i.out if isinstance(i, kir.Load) else id(i)] = acc
    seen_reduce = False
    for s in merged:  # loads after a reduction are issued first (their latency overlaps it)
        if isinstance(s, kir.Reduce):
            seen_reduce = True
        elif seen_reduce:
            plan.hoist |= {i.out for i in s.instrs if isinstance(i, kir.Load)
                           and i.out in plan.vload}
    if reduces and ROWS_D533:
        _keep_loaded_words(kc, plan, merged, defs)
    segs[:] = merged
    for n in plan.remat:  # never stored: ``KernelCuda.aref`` recomputes them
        kc.arrays.pop(n, None)
    nl, ns = len(plan.vload), len(plan.vstore)
    pad = f" ({e - live} padding lanes given no thread)" if live < e else ""
    plan.why = (f"row mapping: one block of {plan.threads} threads per row of {e} lanes{pad}, "
                f"{plan.per} chunk(s) "
                f"of {v} lanes a thread; {nl} load(s) and {ns} store(s) vectorized; "
                f"{reduces} order-free reduction(s) by warp shuffles; {len(plan.hoist)} "
                f"load(s) issued before the reductions (D482)")
    return plan, plan.why


def _edge_bounded(kc, merged: list, axis: int, defs: dict) -> bool:
    """Whether every effect of a lane is masked by the domain's edge along ``axis``: each
    reduction's and each row store's mask is an ``EdgeMask`` over the axis or an ``and`` with
    one, so a lane past the domain stores nothing and enters no reduction."""
    def bounded(m: str | None, depth: int = 0) -> bool:
        g = defs.get(m) if m is not None else None
        if isinstance(g, kir.EdgeMask):
            return axis in g.axes
        if isinstance(g, kir.BinOp) and g.kind == "and" and depth < 8:
            return bounded(g.a, depth + 1) or bounded(g.b, depth + 1)
        return False

    for s in merged:
        if isinstance(s, kir.Reduce):
            if not bounded(s.mask):
                return False
        elif isinstance(s, Run):
            for i in s.instrs:
                if isinstance(i, kir.Store) and not bounded(i.mask):
                    return False
    return True


def _keep_loaded_words(kc, plan: RowsPlan, merged: list, defs: dict) -> None:
    """A row value that is the widening of a vector-loaded narrow value (bf16 / f16 / 8-bit to
    f32) and is read after a reduction is not held in registers as f32: its load's 16-byte
    words are (prefetched, ``hoist``) and the widening is recomputed where read (``remat``),
    half the registers for bf16 across the reductions (D533). Only loads of a buffer the kernel
    does not store to (the prefetch moves the load to the kernel's start)."""
    stored = {kir.root_of(i.buffer, kc.bm).name for s in merged if isinstance(s, Run)
              for i in s.instrs if isinstance(i, kir.Store)}
    first = next((at for at, s in enumerate(merged) if isinstance(s, kir.Reduce)), None)
    if first is None:
        return
    after = {o for s in merged[first + 1:]
             for i in (s.instrs if isinstance(s, Run) else [s]) for o in i.operands()}
    for n in sorted(plan.reg & after):
        w = defs.get(n)
        if not isinstance(w, kir.Widen) or w.to != "f32":
            continue
        ld = defs.get(w.x)
        if not isinstance(ld, kir.Load) or ld.out not in plan.vload \
                or itemsize(kc.bm[ld.buffer].dtype) > 2 \
                or kir.root_of(ld.buffer, kc.bm).name in stored:
            continue
        plan.hoist.add(ld.out)
        plan.reg.discard(n)
        plan.remat[n] = w
        plan.reg.discard(ld.out)
        plan.remat[ld.out] = ld


def vector_access(kc, plan: RowsPlan, ins, defs: dict):
    """(access bytes, the EdgeMask guarding it or None) when every chunk of ``ins`` is one
    aligned access of contiguous lanes within its root (else None: per-lane access)."""
    k, a, v = kc.k, plan.axis, plan.vec
    if ins.index or ins.strides[a] != 1 or \
            kir.root_of(ins.buffer, kc.bm).dtype != kc.bm[ins.buffer].dtype:
        return None  # (the chunk's words are read in the root's element type)
    s = itemsize(kc.bm[ins.buffer].dtype)
    nbytes = v * s
    unit = min(VEC_BYTES, nbytes)
    if unit < 4 or nbytes % unit:
        return None
    base = kc.bm[ins.buffer].offset + ins.offset
    if base * s % unit:
        return None
    for d, st in enumerate(ins.strides):
        if st and d != a and (st * s) % unit:
            return None
    if k.grid[a] > 1 and (k.block[a] * s) % unit:
        return None
    guard = None
    tops = {}
    mask = ins.mask
    if mask is not None:
        g = defs.get(mask)
        if not isinstance(g, kir.EdgeMask):
            return None
        if a in g.axes and k.domain[a] % v:
            return None
        guard = g
        tops = {d: k.domain[d] - 1 for d in g.axes}
    # the bounds of every chunk the guard lets through
    _, rsize, rbase, _ = kc.ptr(ins.buffer, write=isinstance(ins, kir.Store))
    lo = hi = rbase + ins.offset
    for d, st in enumerate(ins.strides):
        if not st:
            continue
        top = tops.get(d, -(-k.domain[d] // k.block[d]) * k.block[d] - 1)
        lo += min(0, st * top)
        hi += max(0, st * top)
    if lo < 0 or hi >= rsize or rsize == 0:
        return None
    return unit, guard


def min_blocks(kc) -> str:
    """The row mapping's ``__launch_bounds__`` minimum of resident blocks (``, n``): enough
    for ``ROWS_RESIDENT_THREADS`` threads an SM (ptxas caps the registers to fit); empty for
    the other mappings."""
    if kc.rows is None:
        return ""
    return f", {max(1, ROWS_RESIDENT_THREADS // kc.rows.threads)}"


# -- rendering ------------------------------------------------------------------------------
def rows_decls(kc, ind: str) -> list[str]:
    p: RowsPlan = kc.rows
    out = []
    for n in sorted(p.uniform, key=kc.cid):
        out.append(f"{ind}TF_REG({CTYPE[kc.dt(n)]}, r{kc.cid(n)}, {p.threads}, 1);")
    for n in sorted(p.reg, key=kc.cid):
        out.append(f"{ind}TF_REG({CTYPE[kc.dt(n)]}, r{kc.cid(n)}, {p.threads}, {p.slots});")
    out += [ind + ln for ln in kc.rows_extra_decls]
    return out


def _extract(words: str, ct: str, s: int) -> str:
    """Element ``tf_v`` of a chunk held as 32-bit words (little-endian)."""
    if s == 1:
        return f"({ct})(uint8_t)({words}[tf_v >> 2] >> ((tf_v & 3) * 8))"
    if s == 2:
        return f"({ct})(uint16_t)({words}[tf_v >> 1] >> ((tf_v & 1) * 16))"
    if s == 4:
        return (f"tf_f32_from_bits({words}[tf_v])" if ct == "float" else
                f"({ct}){words}[tf_v]")
    u = f"(((uint64_t){words}[2 * tf_v + 1] << 32) | (uint64_t){words}[2 * tf_v])"
    return f"tf_f64_from_bits({u})" if ct == "double" else f"({ct}){u}"


def _pack(words: str, ct: str, s: int, x: str) -> str:
    """Put ``x`` as element ``tf_v`` of a chunk's words (zeroed first)."""
    if s == 1:
        return f"{words}[tf_v >> 2] |= (uint32_t)(uint8_t)({x}) << ((tf_v & 3) * 8);"
    if s == 2:
        return f"{words}[tf_v >> 1] |= (uint32_t)(uint16_t)({x}) << ((tf_v & 1) * 16);"
    if s == 4:
        b = f"tf_f32_bits({x})" if ct == "float" else f"(uint32_t)({x})"
        return f"{words}[tf_v] = {b};"
    b = f"tf_f64_bits({x})" if ct == "double" else f"(uint64_t)({x})"
    return (f"{{ const uint64_t tf_b = {b}; {words}[2 * tf_v] = (uint32_t)tf_b; "
            f"{words}[2 * tf_v + 1] = (uint32_t)(tf_b >> 32); }}")


def load_expr(kc, ins: kir.Load, ref) -> tuple[str, list[str]]:
    """A vectorized load's element at lane ``tf_v`` of the chunk (``chunk_pre`` loaded it)."""
    dt = kc.bm[ins.buffer].dtype
    ct = CTYPE[dt]
    s = itemsize(dt)
    if ins.out in kc.rows.hoist:  # prefetched (``_prefetch``) into this thread's words
        w = f"(&TF_R(tf_pf{kc.cid(ins.out)})[tf_j * {kc.rows.vec * s // 4}])"
    else:
        w = f"tf_lw{kc.cid(ins.out)}"
    e = _extract(w, ct, s)
    if ins.mask:
        from tilefoundry.compiler.spelling import c_literal

        return f"{ref(ins.mask)} ? {e} : {c_literal(ins.other, dt)}", []
    return e, []


def store_lines(kc, ins: kir.Store, ref) -> list[str]:
    dt = kc.bm[ins.buffer].dtype
    return [_pack(f"tf_sw{kc.rows_sid[id(ins)]}", CTYPE[dt], itemsize(dt),
                  ref(ins.value))]


def _guard(kc, g) -> str:
    if g is None:
        return "1"
    return kc.l_EdgeMask(g, None)[0]


def _chunk_access(kc, run: Run, ind: str) -> tuple[list[str], list[str]]:
    """The chunk's vector loads (before its lanes) and stores (after), at the chunk's first
    lane ``c<axis> = tf_g``."""
    p: RowsPlan = kc.rows
    pre: list[str] = []
    post: list[str] = []
    for i in run.instrs:
        if isinstance(i, kir.Load) and i.out in p.vload and i.out not in p.hoist:
            unit, g = p.vload[i.out]
            w = f"tf_lw{kc.cid(i.out)}"
            pp, _, base, _ = kc.ptr(i.buffer)
        elif isinstance(i, kir.Store) and id(i) in p.vstore:
            unit, g = p.vstore[id(i)]
            w = f"tf_sw{kc.rows_sid[id(i)]}"
            pp, _, base, _ = kc.ptr(i.buffer, write=True)
        else:
            continue
        s = itemsize(kc.bm[i.buffer].dtype)
        nb = p.vec * s
        off = kc.offset_expr(i, base, None)
        acc = [f"TF_{'LDV' if isinstance(i, kir.Load) else 'STV'}("
               + (f"{w} + {u // 4}, &{pp}[{off}] + {u // s}, {unit})"
                  if isinstance(i, kir.Load) else
                  f"&{pp}[{off}] + {u // s}, {w} + {u // 4}, {unit})") + ";"
               for u in range(0, nb, unit)]
        cond = _guard(kc, g)
        if isinstance(i, kir.Load):
            pre.append(f"uint32_t {w}[{nb // 4}] = {{0}};")
            pre.append(f"if ({cond}) {{ {' '.join(acc)} }}")
        else:
            pre.append(f"uint32_t {w}[{nb // 4}] = {{0}};")
            post.append(f"if ({cond}) {{ {' '.join(acc)} }}")
    return [ind + ln for ln in pre], [ind + ln for ln in post]


def _prefetch(kc, loads: list, ind: str) -> list[str]:
    """The hoisted vector loads (``RowsPlan.hoist``) of every chunk of this thread, into
    per-thread word arrays ``tf_pf<id>`` (registers) read by the runs after the reductions."""
    p: RowsPlan = kc.rows

    def pre(i2: str) -> tuple[list[str], list[str]]:
        lines = []
        for i in loads:
            unit, g = p.vload[i.out]
            s = itemsize(kc.bm[i.buffer].dtype)
            nb = p.vec * s
            pp, _, base, _ = kc.ptr(i.buffer)
            w = f"(&TF_R(tf_pf{kc.cid(i.out)})[tf_j * {nb // 4}])"
            off = kc.offset_expr(i, base, None)
            acc = " ".join(f"TF_LDV({w} + {u // 4}, &{pp}[{off}] + {u // s}, {unit});"
                           for u in range(0, nb, unit))
            zero = " ".join(f"{w}[{k}] = 0u;" for k in range(nb // 4))
            lines.append(f"{i2}if ({_guard(kc, g)}) {{ {acc} }} else {{ {zero} }}")
            kc.rows_extra_decls.append(f"TF_REG(uint32_t, tf_pf{kc.cid(i.out)}, {p.threads}, "
                                       f"{p.per * nb // 4});")
        return lines, []

    return _chunks(kc, ind, None, pre_fn=pre)


def _chunks(kc, ind: str, inner: list[str] | None, pre_fn=None, head: list[str] = (),
            tail: list[str] = ()) -> list[str]:
    """Thread ``tf_tx``'s chunks (``tf_j``, first lane ``tf_g``) and their lanes ``tf_v``
    (slot ``tf_s``, coordinate ``c<axis>``); ``inner`` is one lane's code (None: no lane
    loop, only ``pre_fn``'s chunk code)."""
    p: RowsPlan = kc.rows
    k = kc.k
    i2, i3 = ind + "        ", ind + "            "
    lines = [f"{ind}{{ const int tf_tx = (int)threadIdx.x; (void)tf_tx;"]
    lines += [f"{ind}    {ln}" for ln in head]
    lines += [f"{ind}    #pragma unroll",
              f"{ind}    for (int tf_j = 0; tf_j < {p.per}; ++tf_j) {{",
              f"{i2}const int64_t tf_g = ((int64_t)tf_tx + (int64_t)tf_j * {p.threads}ll) * "
              f"{p.vec}ll;"]
    guard = p.chunks % p.threads != 0
    if guard:
        lines.append(f"{i2}if (tf_g < {p.lanes}ll) {{")
    cs = [f"const int64_t c{d} = {'tf_g' if d == p.axis else '0'};" for d in range(k.rank)]
    lines.append(f"{i2}{{ " + " ".join(cs) + " " +
                 " ".join(f"(void)c{d};" for d in range(k.rank)) + "")
    pre, post = pre_fn(i2 + "  ") if pre_fn else ([], [])
    lines += pre
    if inner is not None:
        lines += [f"{i2}  #pragma unroll",
                  f"{i2}  for (int tf_v = 0; tf_v < {p.vec}; ++tf_v) {{",
                  f"{i3}const int tf_s = tf_j * {p.vec} + tf_v; (void)tf_s;",
                  f"{i3}" + " ".join(f"const int64_t c{d} = "
                                     f"{'tf_g + tf_v' if d == p.axis else '0'};"
                                     for d in range(k.rank)) + " " +
                  " ".join(f"(void)c{d};" for d in range(k.rank))]
        lines += [i3 + ln for ln in inner]
        lines.append(f"{i2}  }}")
    lines += post
    lines.append(f"{i2}}}")
    if guard:
        lines.append(f"{i2}}}")
    lines.append(f"{ind}    }}")
    lines += [f"{ind}    {ln}" for ln in tail]
    lines.append(f"{ind}}}")
    return lines


def _run(kc, run: Run, out: list[str], ind: str) -> None:
    coords = {d: f"c{d}" for d in range(kc.k.rank)}
    local: dict[str, str] = {}

    def ref(n: str) -> str:
        return local[n] if n in local else kc.aref(n, coords)

    if not kc.wide(run.axes):  # every thread computes it; thread 0 stores
        kc.rows_thread0 = True
        body, _ = kc.run_lines(run, ref, local, coords)
        kc.rows_thread0 = False
        out.append(f"{ind}{{ const int tf_tx = (int)threadIdx.x; (void)tf_tx; "
                   f"const int tf_s = 0; (void)tf_s;")
        out += [f"{ind}    " + " ".join(f"const int64_t c{d} = 0; (void)c{d};"
                                         for d in range(kc.k.rank))]
        out += [f"{ind}    {ln}" for ln in body]
        out.append(f"{ind}}}")
        return
    for i in run.instrs:  # the chunk's store words are named before the lanes fill them
        if isinstance(i, kir.Store) and id(i) in kc.rows.vstore:
            kc.rows_sid.setdefault(id(i), str(len(kc.rows_sid)))
    body, _ = kc.run_lines(run, ref, local, coords)
    out += _chunks(kc, ind, body, pre_fn=lambda i: _chunk_access(kc, run, i))


def _reduce(kc, ins: kir.Reduce, out: list[str], ind: str, n: int) -> None:
    p: RowsPlan = kc.rows
    _, at, _, _ = kc.reduce_path(ins, p.threads)
    ops = kc.reduce_ops(ins, keyed=True)  # finish ends every fold here
    flag = ops.track
    body: list[str] = []
    v = ops.value("", body)
    body = [ln.strip() for ln in body] + [f"tf_p[tf_s] = {v};"]
    r = p.slots
    head = [f"{at} tf_p[{r}];", "#pragma unroll",
            f"for (int tf_i = 0; tf_i < {r}; ++tf_i) tf_p[tf_i] = {ops.ident};"]
    if flag:
        body.append(f"tf_q[tf_s] = {kc.aref(ins.mask, ops.coords)};")
        head += [f"uint8_t tf_q[{r}];", "#pragma unroll",
                 f"for (int tf_i = 0; tf_i < {r}; ++tf_i) tf_q[tf_i] = 0;"]
    tail = []
    s = 1
    while s < r:  # the thread's own slots: a balanced tree, odd ones carried up
        tail += ["#pragma unroll", f"for (int tf_i = 0; tf_i + {s} < {r}; tf_i += {2 * s}) "
                 f"{{ tf_p[tf_i] = {ops.step('tf_p[tf_i]', f'tf_p[tf_i + {s}]')};" +
                 (f" tf_q[tf_i] |= tf_q[tf_i + {s}];" if flag else "") + " }"]
        s *= 2
    a0, q0 = f"rp{n}_0", f"rq{n}_0"
    tail.append(f"TF_R({a0})[0] = tf_p[0];" + (f" TF_R({q0})[0] = tf_q[0];" if flag else ""))
    out += _chunks(kc, ind, body, head=head, tail=tail)
    decl = kc.rows_extra_decls
    steps = len(BUTTERFLY)
    decl += [f"TF_REG({at}, rp{n}_{i}, {p.threads}, 1);" for i in range(steps + 1)]
    if flag:
        decl += [f"TF_REG(uint8_t, rq{n}_{i}, {p.threads}, 1);" for i in range(steps + 1)]
    for i, m in enumerate(BUTTERFLY):  # the warp's butterfly: one step a phase
        a, b = f"rp{n}_{i}", f"rp{n}_{i + 1}"
        # the partner's value is read once (a step may name its operand more than once)
        line = (f"const {at} tf_o = TF_SHFL_XOR({a}, {m}); "
                f"TF_R({b})[0] = {ops.step(f'TF_R({a})[0]', 'tf_o')};")
        if flag:
            qa, qb = f"rq{n}_{i}", f"rq{n}_{i + 1}"
            line += f" TF_R({qb})[0] = (uint8_t)(TF_R({qa})[0] | TF_SHFL_XOR({qa}, {m}));"
        out += [f"{ind}TF_PHASE_END", f"{ind}TF_PHASE_BEGIN",
                f"{ind}{{ {line} }}"]
    nw = p.threads // 32
    decl += [f"TF_SHARED {at} tf_wp{n}[{nw}];"] + ([f"TF_SHARED uint8_t tf_wq{n}[{nw}];"]
                                                   if flag else [])
    out.append(f"{ind}{{ if ((threadIdx.x & 31) == 0) {{ tf_wp{n}[threadIdx.x >> 5] = "
               f"TF_R(rp{n}_{steps})[0];" +
               (f" tf_wq{n}[threadIdx.x >> 5] = TF_R(rq{n}_{steps})[0];" if flag else "") +
               " } }")
    out += [f"{ind}TF_PHASE_END", f"{ind}TF_SYNC", f"{ind}TF_PHASE_BEGIN"]
    i2 = ind + "    "
    lines = [f"{ind}{{ const int tf_s = 0; (void)tf_s;",
             i2 + " ".join(f"const int64_t c{d} = 0; (void)c{d};" for d in range(kc.k.rank)),
             f"{i2}{at} tf_a[{nw}];"] + ([f"{i2}uint8_t tf_b[{nw}];"] if flag else [])
    lines.append(f"{i2}#pragma unroll")
    lines.append(f"{i2}for (int tf_i = 0; tf_i < {nw}; ++tf_i) {{ tf_a[tf_i] = tf_wp{n}[tf_i];" +
                 (f" tf_b[tf_i] = tf_wq{n}[tf_i];" if flag else "") + " }")
    s = 1
    while s < nw:  # the warps' values: the same balanced tree in every thread
        lines += [f"{i2}#pragma unroll", f"{i2}for (int tf_i = 0; tf_i + {s} < {nw}; "
                  f"tf_i += {2 * s}) {{ tf_a[tf_i] = {ops.step('tf_a[tf_i]', f'tf_a[tf_i + {s}]')};"
                  + (f" tf_b[tf_i] |= tf_b[tf_i + {s}];" if flag else "") + " }"]
        s *= 2
    lines.append(f"{i2}{ops.res} = {ops.finish('tf_a[0]', 'tf_b[0]' if flag else None)};")
    lines.append(f"{ind}}}")
    out += lines


def emit_rows(kc, segs: list, out: list[str], ind: str) -> None:
    kc.rows_extra_decls = []
    kc.rows_sid = {}
    kc.rows_thread0 = False
    out.append(f"{ind}TF_PHASE_BEGIN")
    hoisted = [i for s in segs if isinstance(s, Run) for i in s.instrs
               if isinstance(i, kir.Load) and i.out in kc.rows.hoist]
    if hoisted:
        out += _prefetch(kc, hoisted, ind + "    ")
    n = 0
    for seg in segs:
        if isinstance(seg, Run):
            _run(kc, seg, out, ind + "    ")
        else:
            _reduce(kc, seg, out, ind + "    ", n)
            n += 1
    out.append(f"{ind}TF_PHASE_END")
