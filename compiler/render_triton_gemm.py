"""The Triton backend's GEMM at the tensor-core limit (issue 35 item 2, D408-D411).

A kernel that is exactly a plain matmul — ``C[M, N] = round(seed + Σ_k A[m, k]·B[k, n])`` with
bf16 / f16 (or fp8, D411) operands in their own row-major storage, an f32 accumulator seeded by a
constant, reassociation admitted, and one store of the (rounded) accumulator — is rendered
as a **persistent TMA kernel** instead of the generic tile renderer's one-program-per-tile
``tl.dot`` loop:

* **TMA tensor descriptors** (``tl.make_tensor_descriptor``, Triton 3.6) for A, B and C: the
  operand tiles go global -> shared memory by the copy engine, the edges (a ragged M, N or K)
  are zero-filled on load and clipped on store by the hardware, so the kernel has no masks;
* **persistent tiles**: ``PERSISTENT_PROGRAMS`` programs (one per SM of an H200) walk the output
  tiles in grouped order (``GROUP_M`` rows of tiles together, so the tiles running at once share
  their operand panels in L2), ``tl.range(..., flatten=...)`` letting the software pipeliner
  overlap the next tile's loads with this tile's MMAs and epilogue;
* **pipelining**: ``num_stages`` shared-memory stages (the tuner's ``num_stages``).

What it computes is what the generic path computes: the same seed, a sum of the K products in
f32 on the tensor cores (any bracketing: the contract admits it, D227 / docs/contracts.md), lanes
past an edge +0 on both operands, the same rounding of the accumulator (``cvt.rn.bf16.f32`` on
the GPU, ``_tf_round`` in the interpreter). A kernel the path does not cover (a fused prologue /
epilogue, a transposed or strided operand, a row stride that is not a multiple of 16 bytes — TMA's
rule —, another dtype, a view into a larger storage) falls back to the generic renderer, and
``match`` says why (``tilefoundry compile --explain`` prints it).

In Triton's CPU interpreter the same kernel runs with two changes that the interpreter needs:
the persistent loop is a Python ``range`` over each program's tiles (the interpreter cannot take
a program id as a ``tl.range`` bound) and the operand tiles are widened exactly to f32 for an
IEEE ``tl.dot`` (its narrow dot works on raw bits, findings F20).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tilefoundry.compiler import kir
from tilefoundry.compiler.kir import root_of
from tilefoundry.compiler.spelling import TRITON_MMA_TL

__all__ = ["GEMM_OPTIONS", "PERSISTENT_PROGRAMS", "GemmPlan", "ensure_allocator", "match",
           "render_gemm", "split_launch"]

#: persistent programs on the GPU: the SMs of an H200 (132); the interpreter runs 3 so that a
#: program walks several tiles in the tests
PERSISTENT_PROGRAMS = 132
INTERPRET_PROGRAMS = 3
#: rows of output tiles walked together (L2 reuse of the B panel), as the generic path's
GROUP_M = 8
#: launch-record keys this path reads (and removes before the launch): ``tma_flatten`` (1: flatten
#: the persistent tile loop with the K loop for the pipeliner), ``tma_split`` (1: store the
#: epilogue as two [BM, BN/2] halves, halving the epilogue's shared memory); ``fp8_promote``
#: (fp8 operands: add the tensor cores' partial sum into the f32 accumulator every that many
#: products, D411; 0: stage fp8 as f16, always inside the contract); ``fp8_stage`` (staging
#: as f16: 1 the hardware's exact ``cvt`` of the fp8-typed tile, 0 the bit decode
#: ``_tf_widen``, D477); ``fp8_kmajor`` (read by the lowering: 1 copies an fp8 B to a K-major
#: [N, K] temporary first, which fp8 ``wgmma`` needs without a per-tile transpose, F46 / D489)
GEMM_OPTIONS = ("tma_flatten", "tma_split", "fp8_promote", "fp8_stage", "fp8_kmajor")
_DEFAULTS = {"tma_flatten": 1, "tma_split": 0, "fp8_promote": 0, "fp8_stage": 1, "fp8_kmajor": 0}

_ITEM = {"bf16": 2, "f16": 2, "fp8e4m3": 1, "fp8e5m2": 1, "f32": 4}
_MMA_TL = TRITON_MMA_TL


@dataclass(frozen=True)
class GemmPlan:
    """A kernel the persistent TMA path computes: sizes, the operand / result roots and
    dtypes, the accumulator's seed and the result's rounding."""

    m: int
    n: int
    k: int
    bm: int
    bn: int
    bk: int
    a: str
    b: str
    c: str
    src: str  # the operands' dtype
    out: str  # the stored dtype (f32: no rounding)
    overflow: str
    seed: float
    #: B is read K-major [N, K]: the lowering's copy kernel (``fp8_kmajor``, D489), or — the copy
    #: forwarded (D549) — the program's own [N, K] array that a transpose made B
    b_kmajor: bool = False
    b_copied: bool = True


def split_launch(opts: dict[str, int]) -> tuple[dict[str, int], dict[str, int]]:
    """(Triton's launch options, this path's options) of a launch record."""
    mine = {k: int(opts[k]) for k in GEMM_OPTIONS if k in opts}
    return {k: v for k, v in opts.items() if k not in GEMM_OPTIONS}, {**_DEFAULTS, **mine}


def _const_seed(init: str, body: list[kir.Instr]) -> float | None:
    """The f32 constant an accumulator's initial value broadcasts, or None."""
    by = {i.out: i for i in body if hasattr(i, "out")}
    x = by.get(init)
    while isinstance(x, kir.Broadcast):
        x = by.get(x.x)
    if isinstance(x, kir.Const) and x.dtype == "f32":
        v = float(x.value)
        return v if math.isfinite(v) else None
    return None


def match(kt) -> tuple[GemmPlan | None, str]:
    """The plan of ``kt`` (a ``render_triton._KernelT``) on the persistent TMA path, or
    (None, why it falls back to the generic renderer)."""
    k, bm = kt.k, kt.bm
    if k.rank != 3 or tuple(k.loop_axes) != (2,) or k.grid[2] != 1:
        return None, "not a rank-3 [M, N, K] matmul kernel with one K tile loop"
    top = list(k.body)
    loops = [i for i in top if isinstance(i, kir.TileLoop)]
    stores = [i for i in top if isinstance(i, kir.Store)]
    rounds = [i for i in top if isinstance(i, kir.Round)]
    extra = [i for i in top if not isinstance(i, kir.TileLoop | kir.Store | kir.Round |
                                               kir.Const | kir.Broadcast | kir.EdgeMask)]
    if len(loops) != 1 or len(stores) != 1 or len(rounds) > 1 or extra:
        return None, ("the kernel fuses more than one matmul and its rounding (a prologue or "
                      "epilogue the TMA path does not render)")
    lp = loops[0]
    if lp.axis != 2 or lp.reverse or len(lp.carried) != 1:
        return None, "the K loop carries more than the accumulator"
    inner = list(lp.body)
    dots = [i for i in inner if isinstance(i, kir.Dot)]
    if len(dots) != 1 or any(not isinstance(i, kir.Dot | kir.Load | kir.Widen | kir.EdgeMask)
                             for i in inner):
        return None, "the K loop computes more than one dot of two loaded operands"
    dot = dots[0]
    if dot.init != lp.carried[0] or lp.yields != (dot.out,):
        return None, "the K loop's accumulator is not the dot's"
    mma = kt.mma_operands(dot)
    if mma is None:
        return None, ("the dot is not a tensor-core dot (no reassociation admitted, or operands "
                      "that are not plain narrow loads)")
    la, lb, src = mma
    if src not in _MMA_TL:
        return None, f"operands of {src}"
    seed = _const_seed(lp.inits[0], top)
    if seed is None:
        return None, "the accumulator's seed is not a finite f32 constant"
    st = stores[0]
    value = lp.outs[0]
    if rounds:
        r = rounds[0]
        if r.x != value or r.to not in _ITEM or r.to == "f32" or \
                r.overflow not in ("nonfinite", "saturate"):
            return None, ("the result's rounding is not a bf16 / f16 / fp8 rounding of the "
                          "accumulator")
        value, out, overflow = r.out, r.to, r.overflow
    else:
        out, overflow = "f32", "nonfinite"
    if st.value != value or st.index or bm[st.buffer].dtype != out:
        return None, "the stored value is not the (rounded) accumulator"
    m, n, kk = k.domain
    kmajor = tuple(lb.strides) == (0, kk, 1) and src.startswith("fp8")
    want = {la.buffer: ((kk, 0, 1), m * kk), lb.buffer: ((0, kk, 1) if kmajor else (0, 1, n),
                                                         kk * n),
            st.buffer: ((n, 1, 0), m * n)}
    for ins in (la, lb, st):
        b = bm[ins.buffer]
        strides, size = want[ins.buffer]
        if root_of(ins.buffer, bm) is not b or b.offset or ins.offset or \
                tuple(ins.strides) != strides or math.prod(b.shape) != size:
            return None, (f"{b.name} is not a whole row-major [{'M, K' if ins is la else 'K, N' if ins is lb else 'M, N'}] "
                          f"array of its own storage (a view, a transpose or a stride)")
    for name, rows, item in ((la.buffer, kk, _ITEM[src]), (lb.buffer, kk if kmajor else n,
                                                              _ITEM[src]),
                             (st.buffer, n, _ITEM[out])):
        if rows * item % 16:
            return None, (f"{bm[name].name}'s row stride is {rows * item} bytes, not a multiple "
                          f"of 16 (TMA's rule)")
    b3 = k.block
    return GemmPlan(m, n, kk, b3[0], b3[1], b3[2], la.buffer, lb.buffer, st.buffer, src, out,
                    overflow, seed, kmajor, bm[lb.buffer].kind == "temp"), ""


def describe(plan: GemmPlan, opts: dict[str, int]) -> tuple[str, str]:
    """(the mapping, why) for ``--explain`` (the GPU's program count)."""
    tiles = -(-plan.m // plan.bm) * -(-plan.n // plan.bn)
    progs = min(tiles, PERSISTENT_PROGRAMS)
    fp8 = ""
    if plan.src.startswith("fp8"):
        p = _promote(plan, opts)
        how = "the hardware's exact conversion" if opts.get("fp8_stage", 1) else "a bit decode"
        fp8 = (f"; fp8 tensor cores, partial sums promoted to f32 every {p} products (D411)"
               if p else f"; fp8 staged exactly as f16 for the tensor cores by {how} "
               "(D411, D477)")
        if plan.b_kmajor and plan.b_copied:
            fp8 += "; B read from the K-major copy a kernel before writes (fp8_kmajor, D489)"
        elif plan.b_kmajor:
            fp8 += ("; B read K-major from the [N, K] array it transposes (the copies forwarded, "
                    "D549)")
    return (f"dot (TMA persistent): {plan.bm}x{plan.bn} output tiles, K step {plan.bk}, "
            f"{tiles} tiles over {progs} persistent programs (grouped by {GROUP_M}), "
            f"flatten {opts.get('tma_flatten', 1)}{fp8}",
            "a plain matmul of whole row-major narrow operands into an f32 accumulator seeded "
            "by a constant, row strides multiples of 16 bytes: TMA descriptors load the tiles "
            "(edges zero-filled), the contract admits the tensor cores' reassociation")


def _promote(plan: GemmPlan, opts: dict[str, int]) -> int:
    """fp8 operands: the products between promotions (``fp8_promote``, at most the K step:
    Triton takes no more than one ``tl.dot``'s K), or 0 (staged as f16)."""
    p = int(opts.get("fp8_promote", 0))
    return min(p, plan.bk) if p > 0 and plan.src.startswith("fp8") else 0


def render_gemm(kt, plan: GemmPlan, opts: dict[str, int], interpret: bool
                ) -> tuple[str, list[str], int]:
    """(the jit function's source, its root arguments, the programs to launch)."""
    p = plan
    tm, tn, kt_n = -(-p.m // p.bm), -(-p.n // p.bn), -(-p.k // p.bk)
    tiles = tm * tn
    progs = min(tiles, INTERPRET_PROGRAMS if interpret else PERSISTENT_PROGRAMS)
    g = min(GROUP_M, tm)
    name = kt.fn_name()
    fp8 = p.src.startswith("fp8")
    promote = _promote(p, opts)
    hw_stage = int(opts.get("fp8_stage", 1))
    L = ["@triton.jit", f"def {name}(P0, P1, P2):"]
    e = L.append
    if interpret:
        ty = "tl.int8" if fp8 else "tl.int16"
        a_ptr, b_ptr = "P0", "P1"
    else:
        ty = _MMA_TL[p.src]
        if fp8 and not promote and not hw_stage:
            ty = "tl.int8"  # fp8 staged as f16: the bits are loaded and widened exactly
        a_ptr = f"P0.to(tl.pointer_type({ty}), bitcast=True)"
        b_ptr = f"P1.to(tl.pointer_type({ty}), bitcast=True)"
    e(f"    ad = tl.make_tensor_descriptor({a_ptr}, shape=[{p.m}, {p.k}], strides=[{p.k}, 1], "
      f"block_shape=[{p.bm}, {p.bk}])")
    if p.b_kmajor:  # B^T [N, K]: tiles [BN, BK], used transposed (a view in shared memory)
        e(f"    bd = tl.make_tensor_descriptor({b_ptr}, shape=[{p.n}, {p.k}], strides=[{p.k}, 1], "
          f"block_shape=[{p.bn}, {p.bk}])")
    else:
        e(f"    bd = tl.make_tensor_descriptor({b_ptr}, shape=[{p.k}, {p.n}], strides=[{p.n}, 1], "
          f"block_shape=[{p.bk}, {p.bn}])")
    split = bool(opts.get("tma_split", 0)) and p.bn % 32 == 0 and not interpret
    cbn = p.bn // 2 if split else p.bn
    e(f"    cd = tl.make_tensor_descriptor(P2, shape=[{p.m}, {p.n}], strides=[{p.n}, 1], "
      f"block_shape=[{p.bm}, {cbn}])")
    e("    start = tl.program_id(0)")
    if interpret:
        e(f"    for it in range(0, {-(-tiles // progs)}):")
        e(f"        t = start + it * {progs}")
        e(f"        if t < {tiles}:")
        ind = "            "
    else:
        flat = "True" if opts.get("tma_flatten", 1) else "False"
        e(f"    for t in tl.range(start, {tiles}, {progs}, flatten={flat}):")
        ind = "        "
    e(f"{ind}grp = t // {g * tn}")
    e(f"{ind}first = grp * {g}")
    e(f"{ind}size = tl.minimum({tm} - first, {g})")
    e(f"{ind}pm = (first + (t % {g * tn}) % size) * {p.bm}")
    e(f"{ind}pn = ((t % {g * tn}) // size) * {p.bn}")
    e(f"{ind}acc = tl.full([{p.bm}, {p.bn}], {float(p.seed)!r}, tl.float32)")
    e(f"{ind}for kk in range(0, {kt_n}):")
    e(f"{ind}    a = ad.load([pm, kk * {p.bk}])")
    if p.b_kmajor:
        e(f"{ind}    b = bd.load([pn, kk * {p.bk}])")
    else:
        e(f"{ind}    b = bd.load([kk * {p.bk}, pn])")
    bv = "tl.trans(b)" if p.b_kmajor else "b"  # a K-major tile used as [BK, BN]: a view
    if interpret:
        e(f"{ind}    a = {kt.widened('a', p.src)}")
        e(f"{ind}    b = {kt.widened('b', p.src)}")
        e(f"{ind}    acc = tl.dot(a, {bv}, acc=acc, input_precision='ieee', "
          f"out_dtype=tl.float32)")
    elif fp8 and not promote and hw_stage:
        # every fp8e4m3 / fp8e5m2 value is an f16 value: the hardware's conversion
        # (``cvt.rn.f16x2.e4m3x2`` / ``.e5m2x2``) is exact, two lanes an instruction (D477)
        e(f"{ind}    a = a.to(tl.float16)")
        e(f"{ind}    b = b.to(tl.float16)")
        e(f"{ind}    acc = tl.dot(a, {bv}, acc=acc, out_dtype=tl.float32)")
    elif fp8 and not promote:
        e(f"{ind}    a = {kt.widened('a.to(tl.uint8, bitcast=True)', p.src)}.to(tl.float16)")
        e(f"{ind}    b = {kt.widened('b.to(tl.uint8, bitcast=True)', p.src)}.to(tl.float16)")
        e(f"{ind}    acc = tl.dot(a, {bv}, acc=acc, out_dtype=tl.float32)")
    elif fp8:
        # native fp8 tensor cores; Triton adds their partial sum into a full f32 accumulator
        # every ``promote`` products (``max_num_imprecise_acc``, D411)
        e(f"{ind}    acc = tl.dot(a, {bv}, acc=acc, out_dtype=tl.float32, "
          f"max_num_imprecise_acc={promote})")
    else:
        e(f"{ind}    acc = tl.dot(a, b, acc=acc, out_dtype=tl.float32)")
    st_ty = {"f32": "tl.float32", "fp8e4m3": "tl.int8", "fp8e5m2": "tl.int8"}.get(p.out,
                                                                              "tl.int16")
    if p.out == "f32":
        val = "acc"
    else:
        val = f"{kt.round_f32('acc', p.out, p.overflow, hw=not interpret)}.to({st_ty}, bitcast=True)"
    if split:
        e(f"{ind}c0, c1 = tl.split(tl.permute(tl.reshape(acc, [{p.bm}, 2, {cbn}]), (0, 2, 1)))")
        for j in (0, 1):
            v = val.replace("acc", f"c{j}")
            e(f"{ind}cd.store([pm, pn + {j * cbn}], {v})")
    else:
        e(f"{ind}cd.store([pm, pn], {val})")
    roots = [root_of(x, kt.bm).name for x in (p.a, p.b, p.c)]
    return "\n".join(L) + "\n", roots, progs


_ALLOC = None


def ensure_allocator() -> None:
    """Device-side tensor descriptors need a global scratch allocation per launch
    (``triton.set_allocator``, a context variable: set in the launching thread, once)."""
    global _ALLOC
    from triton.runtime import _allocation

    if _ALLOC is None:
        import torch

        def alloc(size: int, alignment: int, stream):
            return torch.empty(size, device="cuda", dtype=torch.int8)

        _ALLOC = alloc
    if _allocation._allocator.get() is not _ALLOC:
        _allocation.set_allocator(_ALLOC)
