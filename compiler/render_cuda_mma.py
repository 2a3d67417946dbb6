"""The CUDA backend's tensor-core matmul kernels (docs/decisions.md D280): ``mma.sync`` PTX.

A kernel-IR matmul kernel whose contract admits reassociation — the shape every ``matmul`` /
``tile_mma`` with ``allow_reassociation`` lowers to:

    seed = broadcast const                      (the K fold's seed, not -0.0)
    acc  = tile_loop K carry (c = seed):
               load A [M, K] (edge mask), load B [N, K] (edge mask), widen both -> f32,
               dot over K [reassociate] (mask: K's edge) init c
    store (round acc -> narrow | acc)           (edge mask)

over bf16 / f16 operands (fp8e4m3 / fp8e5m2 operands are staged as f16: every fp8 value is an
f16 value, and fp8 accumulation on Hopper left the admitted set, finding F28 / D263), is
rendered as a tensor-core kernel: one thread block per program instance (``BM x BN`` output
tile), ``WM x WN`` warps, each warp ``MI x NI`` ``mma.sync.aligned.m16n8k16`` tiles with f32
accumulators seeded by the seed. Per K tile the block stages A and B in shared memory as
``[rows][K]`` (K contiguous, rows padded to ``BK + 8`` halves so the fragment reads of a warp hit
32 distinct banks), lanes past an edge (M, N or K) staged as +0 — both operands are zero there,
so a padded K lane adds a +0 product, which leaves every seeded sum unchanged (a seed that is
not -0.0 never makes the sum -0.0 where the reference's would not). The next K tile's global
loads are issued into registers before the current tile's MMAs (one-stage prefetch); 16-byte
vector loads where the operand's contiguous axis has stride 1 and every offset is a multiple
of 8 elements, element loads otherwise. The epilogue rounds and stores each accumulator the
thread owns (the documented m16n8 f32 fragment: rows ``g``, ``g + 8``, columns ``2t``,
``2t + 1``).

**Judged by the admitted set.** A reassociated dot is any bracketing of IEEE f32 additions of
the exact products (``semantics`` contracts); whether the tensor core's internal accumulation
stays inside it is the oracle's verdict on the device (``benchmarks/mma_admitted.py`` and the
conformance tiers), never assumed.

**Host emulation.** ``cuda-host`` compiles the same kernel with ``TF_HOST_EMULATION`` defined:
the phases run thread by thread (the block mapping's ``TF_PHASE_BEGIN``), and each thread's
``mma`` step computes exactly the four accumulators its fragment holds, as an in-order f32 fold
of the 16 exact products onto the accumulator (one admitted order). Everything but the PTX
instruction and its operand-register packing — staging, edges, strides, the fragment-to-output
map, the seed, the epilogue's rounding and store — is therefore checked on a CPU; the packing
(``tf_mma_frag_a`` / ``tf_mma_frag_b``) is the PTX ISA's documented ``m16n8k16`` layout and is
checked on the GPU only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tilefoundry.compiler import kir
from tilefoundry.compiler.spelling import CTYPE, c_literal

__all__ = ["MMA_HEAD", "MMA_STAGES", "MMA_THREADS", "MmaPlan", "plan_mma", "render_mma"]

#: threads per block of a tensor-core kernel (8 warps)
MMA_THREADS = 256
#: shared-memory stages of the K loop (1 or 2; see ``render_mma``)
MMA_STAGES = 1
#: the operand dtypes staged for the tensor core -> the PTX operand type
_PTX = {"bf16": "bf16", "f16": "f16", "fp8e4m3": "f16", "fp8e5m2": "f16"}
#: shared-memory row padding (halves): a warp's fragment reads hit 32 distinct banks
PAD = 8

MMA_HEAD = r"""/* tensor-core matmul kernels (render_cuda_mma, D280) */
struct alignas(16) tf_u4 { uint32_t x, y, z, w; };
#ifndef TF_HOST_EMULATION
/* the PTX ISA's m16n8k16 operand fragments (g = lane / 4, t = lane % 4), read from [rows][K]
 * shared tiles of row stride LDS halves: A a0 (row g, k 2t..2t+1), a1 (row g+8), a2 (k + 8),
 * a3 (row g+8, k + 8); B b0 (k 2t..2t+1, column g), b1 (k + 8) */
#define TF_MMA_FRAG_A(a, S, row, k0, LDS, g, t) do { \
    const uint16_t *p_ = (S) + ((row) + (g)) * (LDS) + (k0) + 2 * (t); \
    (a)[0] = *(const uint32_t *)(p_); (a)[1] = *(const uint32_t *)(p_ + 8 * (LDS)); \
    (a)[2] = *(const uint32_t *)(p_ + 8); (a)[3] = *(const uint32_t *)(p_ + 8 * (LDS) + 8); \
} while (0)
#define TF_MMA_FRAG_B(b, S, row, k0, LDS, g, t) do { \
    const uint16_t *p_ = (S) + ((row) + (g)) * (LDS) + (k0) + 2 * (t); \
    (b)[0] = *(const uint32_t *)(p_); (b)[1] = *(const uint32_t *)(p_ + 8); \
} while (0)
/* the same fragments through ldmatrix: A's 16 x 16 tile (four 8 x 8 matrices: rows 0-7 / 8-15
 * by k 0-7 / 8-15, a0..a3) and two B n8 tiles (b0, b1 of tile j, then of tile j + 1); lane l
 * gives the address of row l % 8 of matrix l / 8 (16-byte rows: LDS % 8 == 0) */
#define TF_LDSM_X4(r, p) asm volatile( \
    "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];" \
    : "=r"((r)[0]), "=r"((r)[1]), "=r"((r)[2]), "=r"((r)[3]) \
    : "r"((uint32_t)__cvta_generic_to_shared(p)))
#define TF_LDSM_A(a, S, row, k0, LDS, lane) \
    TF_LDSM_X4(a, (S) + ((row) + ((lane) & 7) + (((lane) >> 3) & 1) * 8) * (LDS) + (k0) + \
               ((lane) >> 4) * 8)
#define TF_LDSM_B2(b0, b1, S, row, k0, LDS, lane) do { uint32_t r_[4]; \
    TF_LDSM_X4(r_, (S) + ((row) + ((lane) & 7) + ((lane) >> 4) * 8) * (LDS) + (k0) + \
               (((lane) >> 3) & 1) * 8); \
    (b0)[0] = r_[0]; (b0)[1] = r_[1]; (b1)[0] = r_[2]; (b1)[1] = r_[3]; } while (0)
#define TF_MMA_16816(TY, c, a, b) asm volatile( \
    "mma.sync.aligned.m16n8k16.row.col.f32." TY "." TY ".f32 " \
    "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};" \
    : "+f"((c)[0]), "+f"((c)[1]), "+f"((c)[2]), "+f"((c)[3]) \
    : "r"((a)[0]), "r"((a)[1]), "r"((a)[2]), "r"((a)[3]), "r"((b)[0]), "r"((b)[1]))
#endif
"""


@dataclass(frozen=True)
class MmaPlan:
    m: int
    n: int
    d: int
    bm: int
    bn: int
    bk: int
    src: str
    la: kir.Load
    lb: kir.Load
    seed: float
    rnd: kir.Round | None
    st: kir.Store
    wm: int
    wn: int

    @property
    def mi(self) -> int:
        return self.bm // self.wm // 16

    @property
    def ni(self) -> int:
        return self.bn // self.wn // 8


def _pow2(x: int) -> bool:
    return x > 0 and x & (x - 1) == 0


def plan_mma(kc) -> MmaPlan | None:
    """The tensor-core plan of ``kc``'s kernel (a ``render_cuda.KernelCuda``), or None when the
    kernel is not the reassociated matmul shape the module docstring describes."""
    k, body = kc.k, list(kc.k.body)
    defs = {r: i for i in kir.iter_instrs(body) for r in i.results()}
    loops = [i for i in body if isinstance(i, kir.TileLoop)]
    if len(loops) != 1 or kc.snap:
        return None
    loop = loops[0]
    d = loop.axis
    if d < 2 or len(loop.carried) != 1 or k.loop_axes != (d,):
        return None
    m, n = d - 2, d - 1
    inner = list(loop.body)
    dots = [i for i in inner if isinstance(i, kir.Dot)]
    if len(dots) != 1 or len(inner) > 8:
        return None
    dot = dots[0]
    if not dot.reassociate or dot.axis != d or dot.init != loop.carried[0] or \
            loop.yields != (dot.out,) or kc.dt(dot.out) != "f32":
        return None
    ldefs = {r: i for i in inner for r in i.results()}
    wa, wb = ldefs.get(dot.a), ldefs.get(dot.b)
    if not isinstance(wa, kir.Widen) or not isinstance(wb, kir.Widen) or wa.to != "f32" \
            or wb.to != "f32":
        return None
    la, lb = ldefs.get(wa.x), ldefs.get(wb.x)
    if not isinstance(la, kir.Load) or not isinstance(lb, kir.Load) or la.index or lb.index:
        return None
    src = kc.bm[la.buffer].dtype
    if src not in _PTX or kc.bm[lb.buffer].dtype != src:
        return None
    def tiled(name: str) -> set[int]:  # the axes the tile spans (batch axes have block 1)
        return {a for a in kc.types[name].full if a in (m, n, d) or k.block[a] != 1}

    if tiled(dot.a) != {m, d} or tiled(dot.b) != {n, d}:
        return None
    for ld in (la, lb):
        if ld.mask is not None and not isinstance(ldefs.get(ld.mask), kir.EdgeMask):
            return None
    for i in inner:  # nothing else in the loop body but edge masks
        if i not in (dot, wa, wb, la, lb) and not isinstance(i, kir.EdgeMask):
            return None
    kb = k.block[d]
    if dot.mask is not None:
        em = ldefs.get(dot.mask)
        if not isinstance(em, kir.EdgeMask) or set(em.axes) - {d}:
            return None
    elif k.domain[d] % kb:
        return None
    # the seed: a constant (broadcast), never -0.0 (a padded lane's +0 product would flip it)
    s = defs.get(loop.inits[0])
    while isinstance(s, kir.Broadcast):
        s = defs.get(s.x)
    if not isinstance(s, kir.Const) or not isinstance(s.value, float | int):
        return None
    seed = float(s.value)
    if seed == 0.0 and math.copysign(1.0, seed) < 0:
        return None
    # after the loop: an optional round of its result and one store
    after = body[body.index(loop) + 1:]
    before = body[:body.index(loop)]
    if any(not isinstance(i, kir.Const | kir.Broadcast) for i in before):
        return None
    out = loop.outs[0]
    rnd = next((i for i in after if isinstance(i, kir.Round)), None)
    stores = [i for i in after if isinstance(i, kir.Store)]
    if len(stores) != 1 or stores[0].index:
        return None
    st = stores[0]
    for i in after:
        if i is st or isinstance(i, kir.Const):
            continue
        if isinstance(i, kir.EdgeMask) and i.out == st.mask:
            continue
        if i is rnd and rnd.x == out and st.value == rnd.out:
            continue
        return None
    if rnd is None and (st.value != out or kc.bm[st.buffer].dtype != "f32"):
        return None
    if rnd is not None and kc.bm[st.buffer].dtype != rnd.to:
        return None
    if st.mask is not None and not isinstance(defs.get(st.mask), kir.EdgeMask):
        return None
    bm_, bn_ = k.block[m], k.block[n]
    if not (_pow2(bm_) and _pow2(bn_) and 16 <= bm_ <= 128 and 16 <= bn_ <= 128
            and kb % 16 == 0 and 16 <= kb <= 64):
        return None
    if any(b != 1 for i, b in enumerate(k.block) if i not in (m, n, d)):
        return None
    if any(s for i, s in enumerate(la.strides) if i == n) or \
            any(s for i, s in enumerate(lb.strides) if i == m) or \
            any(s for i, s in enumerate(st.strides) if i == d):
        return None
    # every in-domain address inside its storage (no clamps: the edges are staged as zeros)
    for ld in (la, lb, st):
        _, size, base, _ = kc.ptr(ld.buffer, write=ld is st)
        lo = hi = base + ld.offset
        for i, sd in enumerate(ld.strides):
            top = k.domain[i] - 1
            lo += min(0, sd * top)
            hi += max(0, sd * top)
        if lo < 0 or hi >= size:
            return None
    wm = min(2, bm_ // 16)
    wn = min(MMA_THREADS // 32 // wm, bn_ // 8)
    if wm * wn * 32 != MMA_THREADS:
        return None  # a tile too small for 8 warps keeps the scalar mapping
    return MmaPlan(m, n, d, bm_, bn_, kb, src, la, lb, seed, rnd, st, wm, wn)


def _stage_lines(kc, p: MmaPlan, ld: kir.Load, rows_axis: int, rows: int, name: str,
                 reg: str) -> tuple[list[str], list[str], str]:
    """(the prefetch lines: global -> this thread's registers for K tile ``kt``, the store
    lines: registers -> the shared tile ``name``, the register declaration)."""
    k, d, T = kc.k, p.d, MMA_THREADS
    ptr, _, base, _ = kc.ptr(ld.buffer)
    sr, sk = ld.strides[rows_axis], ld.strides[d]
    batch = [f"b{i} * {s}ll" for i, s in enumerate(ld.strides)
             if s and i not in (rows_axis, d)]
    off0 = " + ".join([f"{base + ld.offset}ll", *batch])
    dr, dk = k.domain[rows_axis], k.domain[d]
    lds = p.bk + PAD
    elems = rows * p.bk
    const_off = base + ld.offset
    batch_ok = all(s % 8 == 0 for i, s in enumerate(ld.strides) if i not in (rows_axis, d))
    vec = p.src in ("bf16", "f16") and batch_ok and const_off % 8 == 0 and elems % (8 * T) == 0
    kcontig = vec and sk == 1 and (sr % 8 == 0 or dr == 1) and dk % 8 == 0
    rcontig = vec and not kcontig and sr == 1 and (sk % 8 == 0 or dk == 1) and dr % 8 == 0
    br = f"b{rows_axis}"
    pre, put = [], []
    if kcontig or rcontig:
        nv = elems // 8 // T
        decl = f"TF_REG(tf_u4, {reg}, {T}, {nv});"
        for j in range(nv):
            v = f"(tid + {T * j})"
            if kcontig:  # 8 consecutive K lanes of one row
                r, kk = f"({v} / {p.bk // 8})", f"(({v} % {p.bk // 8}) * 8)"
            else:  # 8 consecutive rows at one K lane (consecutive threads: consecutive K)
                r, kk = f"(({v} / {p.bk}) * 8)", f"({v} % {p.bk})"
            gr, gk = f"({br} + {r})", f"(k0 + {kk})"
            pre.append(f"{{ const int64_t gr = {gr}, gk = {gk}; tf_u4 u = {{0u, 0u, 0u, 0u}}; "
                       f"if (gr < {dr}ll && gk < {dk}ll) u = *(const tf_u4 *)({ptr} + "
                       f"({off0} + gr * {sr}ll + gk * {sk}ll)); TF_R({reg})[{j}] = u; }}")
            if kcontig:
                put.append(f"*(tf_u4 *)({name} + {r} * {lds} + {kk}) = TF_R({reg})[{j}];")
            else:
                put.append(f"{{ const tf_u4 u = TF_R({reg})[{j}]; const uint32_t w[4] = "
                           f"{{u.x, u.y, u.z, u.w}}; for (int h = 0; h < 8; ++h) "
                           f"{name}[({r} + h) * {lds} + {kk}] = "
                           f"(uint16_t)(w[h >> 1] >> ((h & 1) * 16)); }}")
        return pre, put, decl
    ne = elems // T
    decl = f"TF_REG(uint16_t, {reg}, {T}, {ne});"
    # consecutive threads walk the operand's contiguous axis (coalesced element loads)
    along_k = not (sr == 1 and sk != 1)
    for j in range(ne):
        e = f"(tid + {T * j})"
        r, kk = ((f"({e} / {p.bk})", f"({e} % {p.bk})") if along_k else
                 (f"({e} % {rows})", f"({e} / {rows})"))
        if p.src in ("bf16", "f16"):
            val = f"{ptr}[o]"
        else:  # fp8 staged as the exactly equal f16
            val = f"tf_f32_to_f16(tf_{p.src}_to_f32({ptr}[o]), TF_NONFINITE, 0)"
        pre.append(f"{{ const int64_t gr = {br} + {r}, gk = k0 + {kk}; uint16_t h = 0; "
                   f"if (gr < {dr}ll && gk < {dk}ll) {{ const int64_t o = {off0} + "
                   f"gr * {sr}ll + gk * {sk}ll; h = (uint16_t){val}; }} "
                   f"TF_R({reg})[{j}] = h; }}")
        put.append(f"{name}[{r} * {lds} + {kk}] = TF_R({reg})[{j}];")
    return pre, put, decl


def render_mma(kc, p: MmaPlan) -> list[str]:
    """The ``__global__`` function of ``kc``'s kernel under plan ``p``."""
    k, T = kc.k, MMA_THREADS
    name = f"tf_k{kc.kidx}"
    nroot = len(kc.roots)
    params = [f"char *p{i}" for i in range(nroot)] + ["char *S0", "int64_t lo", "int64_t hi"]
    lds = p.bk + PAD
    tm, tn = p.bm // p.wm, p.bn // p.wn
    mi, ni = p.mi, p.ni
    nacc = mi * ni * 4
    tiles = -(-k.domain[p.d] // p.bk)
    ty = _PTX[p.src]
    pa, puta, decla = _stage_lines(kc, p, p.la, p.m, p.bm, "tf_asn", "tf_ra")
    pb, putb, declb = _stage_lines(kc, p, p.lb, p.n, p.bn, "tf_bsn", "tf_rb")
    # two shared stages (``MMA_STAGES = 2``, where they fit the 48 KiB of static shared
    # memory): one barrier per K tile, the stage a tile is computed from not being the one the
    # next tile is staged into. Measured slower on the H200 (8192^3 bf16, K tile 32: 115.8
    # TFLOP/s against one stage's 147.7), so one stage is the default.
    sa, sb = p.bm * lds, p.bn * lds
    stages = 2 if MMA_STAGES == 2 and 2 * (sa + sb) * 2 <= 48 * 1024 else 1
    ps = ", ".join(f"p{i}" for i in range(nroot)) or "0"
    # the epilogue: each accumulator this thread owns, rounded and stored
    sptr, _, sbase, _ = kc.ptr(p.st.buffer, write=True)
    sbatch = [f"b{i} * {s}ll" for i, s in enumerate(p.st.strides) if s and i not in (p.m, p.n)]
    soff = " + ".join([f"{sbase + p.st.offset}ll", *sbatch])
    val = kc.round_f32("v", p.rnd.to, p.rnd.overflow) if p.rnd is not None else "v"
    out = [kc.comment(),
           f"/* tensor-core mapping (D280): one block of {T} threads per instance, "
           f"{p.wm}x{p.wn} warps of {mi}x{ni} mma.m16n8k16.{ty} tiles, K tile {p.bk} */",
           f'extern "C" __global__ void __launch_bounds__({T}) {name}(',
           "    " + ", ".join(params) + ")", "{",
           "    const int64_t pid = lo + (int64_t)blockIdx.x;",
           "    if (pid >= hi) return;",
           f"    char *const P[{max(nroot, 1)}] = {{{ps}}};", "    (void)P; (void)S0;",
           # 16-byte aligned through the vector type (rows of lds halves: lds % 8 == 0)
           f"    TF_SHARED tf_u4 tf_as4[{stages * sa // 8}];",
           f"    TF_SHARED tf_u4 tf_bs4[{stages * sb // 8}];",
           "    uint16_t *const tf_as = (uint16_t *)tf_as4, *const tf_bs = (uint16_t *)tf_bs4;",
           f"    TF_REG(float, tf_acc, {T}, {nacc});",
           f"    {decla}", f"    {declb}",
           "    {"]
    out += kc.tile_origin("        ")
    ind = "        "
    head = [f"{ind}    const int tid = (int)threadIdx.x; (void)tid;"]
    seed = c_literal(p.seed, "f32")
    def bufs(ind: str, cur: str, nxt: str) -> list[str]:
        return [f"{ind}uint16_t *const tf_asc = tf_as + ({cur}) * {sa}, "
                f"*const tf_bsc = tf_bs + ({cur}) * {sb}; (void)tf_asc; (void)tf_bsc;",
                f"{ind}uint16_t *const tf_asn = tf_as + ({nxt}) * {sa}, "
                f"*const tf_bsn = tf_bs + ({nxt}) * {sb}; (void)tf_asn; (void)tf_bsn;"]

    # the first K tile: global -> registers -> shared stage 0
    out += [f"{ind}TF_PHASE_BEGIN", *head, *bufs(ind + "    ", "0", "0"),
            f"{ind}    for (int j = 0; j < {nacc}; ++j) TF_R(tf_acc)[j] = {seed};",
            f"{ind}    {{ const int64_t k0 = 0; (void)k0;"]
    out += [f"{ind}    {x}" for x in pa + pb + puta + putb]
    out += [f"{ind}    }}", f"{ind}TF_PHASE_END", f"{ind}TF_SYNC",
            f"{ind}#pragma unroll 1",
            f"{ind}for (int64_t kt = 0; kt < {tiles}ll; ++kt) {{"]
    cur, nxt = ("(int)(kt & 1)", "(int)((kt + 1) & 1)") if stages == 2 else ("0", "0")
    out += [f"{ind}    TF_PHASE_BEGIN", *[f"    {h}" for h in head]]
    out += bufs(ind + "        ", cur, nxt)
    # the next tile's global loads go out before this tile's MMAs
    out += [f"{ind}        if (kt + 1 < {tiles}ll) {{ const int64_t k0 = (kt + 1) * {p.bk}ll;"]
    out += [f"{ind}            {x}" for x in pa + pb]
    w = f"{ind}        "
    out += [f"{ind}        }}",
            f"{w}const int warp = tid / 32, lane = tid % 32, g = lane >> 2, t = lane & 3;",
            f"{w}const int ra = (warp / {p.wn}) * {tm}, rb = (warp % {p.wn}) * {tn};",
            f"{w}float *const acc = TF_R(tf_acc); (void)g; (void)t; (void)ra; (void)rb;",
            "#ifdef TF_HOST_EMULATION",
            f"{w}/* this thread's four accumulators of each tile: the 16 exact products "
            "folded in K order */",
            f"{w}for (int ks = 0; ks < {p.bk}; ks += 16)",
            f"{w}    for (int i = 0; i < {mi}; ++i)",
            f"{w}        for (int j = 0; j < {ni}; ++j)",
            f"{w}            for (int r = 0; r < 4; ++r) {{",
            f"{w}                const int row = ra + i * 16 + g + (r >> 1) * 8, "
            f"col = rb + j * 8 + 2 * t + (r & 1);",
            f"{w}                float s = acc[(i * {ni} + j) * 4 + r];",
            f"{w}                for (int q = 0; q < 16; ++q)",
            f"{w}                    s = __fadd_rn(s, __fmul_rn("
            f"tf_{'bf16' if ty == 'bf16' else 'f16'}_to_f32(tf_asc[row * {lds} + ks + q]), "
            f"tf_{'bf16' if ty == 'bf16' else 'f16'}_to_f32(tf_bsc[col * {lds} + ks + q])));",
            f"{w}                acc[(i * {ni} + j) * 4 + r] = s;",
            f"{w}            }}",
            "#else",
            f"{w}#pragma unroll",
            f"{w}for (int ks = 0; ks < {p.bk}; ks += 16) {{",
            f"{w}    uint32_t fa[{mi}][4], fb[{ni}][2];",
            f"{w}#pragma unroll",
            f"{w}    for (int i = 0; i < {mi}; ++i) TF_LDSM_A(fa[i], tf_asc, ra + i * 16, ks, "
            f"{lds}, lane);",
            *([f"{w}#pragma unroll",
               f"{w}    for (int j = 0; j < {ni}; j += 2) TF_LDSM_B2(fb[j], fb[j + 1], tf_bsc, "
               f"rb + j * 8, ks, {lds}, lane);"] if ni % 2 == 0 else
              [f"{w}#pragma unroll",
               f"{w}    for (int j = 0; j < {ni}; ++j) TF_MMA_FRAG_B(fb[j], tf_bsc, rb + j * 8, "
               f"ks, {lds}, g, t);"]),
            f"{w}#pragma unroll",
            f"{w}    for (int i = 0; i < {mi}; ++i)",
            f"{w}#pragma unroll",
            f"{w}        for (int j = 0; j < {ni}; ++j)",
            f'{w}            TF_MMA_16816("{ty}", acc + (i * {ni} + j) * 4, fa[i], fb[j]);',
            f"{w}}}",
            "#endif"]
    if stages == 2:  # the next tile into the other stage; one barrier
        out += [f"{ind}        if (kt + 1 < {tiles}ll) {{"]
        out += [f"{ind}            {x}" for x in puta + putb]
        out += [f"{ind}        }}", f"{ind}    TF_PHASE_END", f"{ind}    TF_SYNC", f"{ind}}}"]
    else:  # every thread is done with the stage before the next tile overwrites it
        out += [f"{ind}    TF_PHASE_END", f"{ind}    TF_SYNC",
                f"{ind}    TF_PHASE_BEGIN", *[f"    {h}" for h in head],
                *bufs(ind + "        ", "0", "0"),
                f"{ind}        if (kt + 1 < {tiles}ll) {{"]
        out += [f"{ind}            {x}" for x in puta + putb]
        out += [f"{ind}        }}", f"{ind}    TF_PHASE_END", f"{ind}    TF_SYNC", f"{ind}}}"]
    dm, dn = k.domain[p.m], k.domain[p.n]
    out += [f"{ind}TF_PHASE_BEGIN", *head,
            f"{ind}    const int warp = tid / 32, lane = tid % 32, g = lane >> 2, t = lane & 3;",
            f"{ind}    const int ra = (warp / {p.wn}) * {tm}, rb = (warp % {p.wn}) * {tn};",
            "#pragma unroll",
            f"{ind}    for (int i = 0; i < {mi}; ++i)",
            "#pragma unroll",
            f"{ind}        for (int j = 0; j < {ni}; ++j)",
            "#pragma unroll",
            f"{ind}            for (int r = 0; r < 4; ++r) {{",
            f"{ind}                const int64_t gm = b{p.m} + ra + i * 16 + g + (r >> 1) * 8;",
            f"{ind}                const int64_t gn = b{p.n} + rb + j * 8 + 2 * t + (r & 1);",
            f"{ind}                if (gm < {dm}ll && gn < {dn}ll) {{",
            f"{ind}                    const float v = TF_R(tf_acc)[(i * {ni} + j) * 4 + r];",
            f"{ind}                    {sptr}[{soff} + gm * {p.st.strides[p.m]}ll + "
            f"gn * {p.st.strides[p.n]}ll] = ({CTYPE[kc.bm[p.st.buffer].dtype]})({val});",
            f"{ind}                }}",
            f"{ind}            }}",
            f"{ind}TF_PHASE_END",
            "    }", "}"]
    return out
