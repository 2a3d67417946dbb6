"""The CUDA backend's Hopper matmul kernel (docs/decisions.md D520): ``wgmma`` + TMA.

The same kernel-IR matmul shape the ``mma.sync`` kernel admits (``render_cuda_mma.plan_mma``:
a constant seed that is not -0.0, one K tile loop of two edge-masked loads widened to f32 and
one ``dot [reassociate]``, an optional ``Round``, one edge-masked store), over bf16 / f16
operands whose layout a TMA tensor map can describe (one operand axis of stride 1, every other
stride a positive multiple of 8 elements, the base 16-byte aligned), is rendered as a
warp-specialised Hopper kernel when the build target is sm_90 (``cuda_build.TARGET_SM``;
NVRTC then compiles the program for ``compute_90a``):

* one block per ``BM x BN`` output tile of the whole domain (its own grid, the M tiles
  grouped by ``group_m`` for L2 reuse; the kernel IR's instance tiles do not matter: the
  block covers every output element exactly once), ``1 + BM / 64`` warpgroups;
* warpgroup 0 is the producer: one thread waits for a free stage (``empty`` mbarrier), arms
  the stage's ``full`` mbarrier with the stage's bytes and issues the TMA loads
  (``cp.async.bulk.tensor``) of the A and B boxes of K tile ``kt`` (64 K lanes = one 128-byte
  swizzled row per M / N index, or 64 M / N lanes per row where that axis is the contiguous
  one); lanes past an edge of M, N or K are filled with +0 by the TMA unit;
* warpgroup ``1 + c`` is consumer ``c``: rows ``64c .. 64c + 63`` of the tile, ``BN / 2`` f32
  accumulators a thread seeded by the seed; per K tile it waits on ``full``, issues four
  ``wgmma.mma_async.m64nBNk16`` (A and B from shared memory through 128-byte-swizzle matrix
  descriptors; ``imm-trans`` where the operand is M / N-major), waits for them and releases
  the stage (``empty``). ``stages`` shared stages (>= 2) pipeline the K loop;
* the epilogue rounds and stores each accumulator (the documented m64nNk16 D fragment: warp
  ``w``, lane ``l``, register ``i`` -> row ``16w + l/4 + 8((i >> 1) & 1)``, column
  ``8(i >> 2) + 2(l % 4) + (i & 1)``), masked at the M / N edges.

A padded K lane adds +0 x +0, which leaves a sum seeded by anything but -0.0 unchanged (D280's
argument). The tensor maps are made at launch from the plan (``tmaps``) by the driver's
``cuTensorMapEncodeTiled`` (``cuda_backend``) and passed as ``const __grid_constant__``
parameters.

**Host emulation** (``TF_HOST_EMULATION``, target ``cuda-host``): the same kernel with the
producer and the consumers run as alternating phases per K tile; the TMA load is emulated from
the same tensor-map description (dims, byte strides, box, coordinates; out-of-range lanes 0)
into the same swizzled stage layout, and each ``wgmma`` step reads its operands through the
same 64-bit descriptors (start address, leading / stride byte offsets, swizzle mode, decoded
bit by bit) and computes each accumulator the thread owns as an in-order f32 fold of the 16
exact products (one admitted bracketing). Everything but the PTX instructions, the mbarrier
protocol and the hardware's reading of descriptor and swizzle (the PTX ISA's canonical
layouts, as modelled here) is checked on a CPU.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace

from tilefoundry.compiler import cuda_build, kir
from tilefoundry.compiler.kir import root_of
from tilefoundry.compiler.render_cuda_mma import MmaPlan, plan_mma
from tilefoundry.compiler.spelling import CTYPE, c_literal
from tilefoundry.errors import InvalidArgumentError

__all__ = [
    "DEFAULT_TILE",
    "LAUNCH_OPTIONS",
    "WGMMA_HEAD",
    "WgTile",
    "WgmmaPlan",
    "check_launch",
    "enabled",
    "plan_wgmma",
    "render_wgmma",
]

#: the K tile: one 128-byte swizzled row of 16-bit elements (128 fp8 elements: ``bk``)
BK = 64
#: the wgmma operand dtypes: (PTX type, element bytes, K of one instruction)
WG_TYPES = {"bf16": ("bf16", 2, 16), "f16": ("f16", 2, 16), "fp8e4m3": ("e4m3", 1, 32),
            "fp8e5m2": ("e5m2", 1, 32)}
#: the promotion intervals an fp8 kernel renders (``fp8_promote``: products per f32 promotion,
#: a multiple of one instruction's K = 32 dividing the 128-lane K tile; D411, D536)
FP8_PROMOTE = (32, 64, 128)
#: f32 registers a consumer thread may give to its accumulators (the main one and the
#: promotion buffers of an fp8 kernel): 232 a thread after ``setmaxnreg``, less the addressing
ACC_REGS = 192
#: bytes of dynamic shared memory a block may use on sm_90 (227 KiB)
SMEM_LIMIT = 227 * 1024
#: blocks of one launch at most
MAX_BLOCKS = (1 << 31) - 1
#: admit an M-major A / K-major B (rendered, but no lowering reaches them today: D520)
TRANSPOSED_OK = False


@dataclass(frozen=True)
class WgTile:
    """The kernel's tunables: the block tile (``bm`` in {64, 128}: ``bm / 64`` consumer
    warpgroups; ``bn`` a multiple of 64 up to 256), shared stages, M tiles per L2 group, and
    whether the warpgroups rebalance registers (``setmaxnreg``)."""

    bm: int = 128
    bn: int = 256
    stages: int = 4
    group_m: int = 8
    maxnreg: bool = True
    #: wgmma groups a consumer leaves in flight when it moves to the next K tile (0: wait for
    #: each tile's MMAs; 1: release the previous tile's stage once its group is done)
    inflight: int = 1
    #: fp8: products per promotion to the f32 accumulator (0: not an fp8 kernel; set from the
    #: launch options, D536); each promotion group accumulates into a buffer of its own, two
    #: buffers when a group is left in flight
    promote: int = 0
    #: fp8 promoted, no group in flight, two consumers (D546): consumer 1 starts its K loop
    #: once consumer 0 has issued its first tile's wgmma group, so that each one's promotion
    #: adds run while the other's MMAs hold the tensor cores (ping-pong) instead of both
    #: warpgroups adding at once with the tensor cores idle
    stagger: bool = False

    @property
    def acc_regs(self) -> int:
        """f32 registers a consumer thread holds: the accumulator and the promotion buffers."""
        nacc = self.bn // 2
        return nacc * (1 + (1 + self.inflight if self.promote else 0))

    def fits(self) -> bool:
        return self.acc_regs <= ACC_REGS

    @property
    def consumers(self) -> int:
        return self.bm // 64

    @property
    def threads(self) -> int:
        return 128 * (1 + self.consumers)

    @property
    def stage_bytes(self) -> int:
        return (self.bm + self.bn) * 128  # a 128-byte row per M / N index, any dtype

    @property
    def smem(self) -> int:  # stages, 2 mbarriers a stage, the 1024-byte alignment slack
        return self.stages * self.stage_bytes + 16 * self.stages + 1024

    def valid(self) -> bool:
        return self.bm in (64, 128) and self.bn in (64, 128, 192, 256) and self.stages >= 2 \
            and self.group_m >= 1 and self.smem <= SMEM_LIMIT and self.inflight in (0, 1) \
            and (not self.stagger or (self.consumers == 2 and self.inflight == 0))


def parse_tile(text: str) -> WgTile:
    """``BMxBNxSTAGES[xGROUP][xnoreg][xwait0][xstagger]`` (``TF_CUDA_WGMMA_TILE``, the
    benchmark's variants): ``noreg`` no ``setmaxnreg``, ``wait0`` no wgmma group left in
    flight, ``stagger`` the two consumers half a K tile apart (with ``wait0``; D546: a
    promoted fp8 kernel's schedule only — elsewhere it changes nothing, and ``--explain`` names
    it only where it applies)."""
    f = text.lower().split("x")
    nums = [int(x) for x in f if x.isdigit()]
    flags = {x for x in f if not x.isdigit()}
    if not 3 <= len(nums) <= 4 or flags - {"noreg", "wait0", "stagger"}:
        raise InvalidArgumentError(
            f"TF_CUDA_WGMMA_TILE={text!r}: expected "
            f"BMxBNxSTAGES[xGROUP][xnoreg][xwait0][xstagger], e.g. 128x256x4")
    t = WgTile(*nums[:4], maxnreg="noreg" not in flags, inflight=0 if "wait0" in flags else 1,
               stagger="stagger" in flags)
    if not t.valid():
        raise InvalidArgumentError(
            f"TF_CUDA_WGMMA_TILE={text!r}: bm 64 / 128, bn 64..256 by 64, stages >= 2, "
            f"shared memory <= {SMEM_LIMIT} bytes; stagger needs bm 128 and wait0")
    return t


#: the tile used unless ``TF_CUDA_WGMMA_TILE`` names another
DEFAULT_TILE = WgTile()


def enabled() -> bool:
    """The wgmma mapping is on when the build target is sm_90 (Hopper; ``wgmma`` is an
    ``sm_90a`` feature, absent before and after) unless ``TF_CUDA_WGMMA`` is ``0`` (on by
    default since it was judged on an H100, 2026-12-05: the quick tier 0 FAIL and the GEMM
    oracle PASS with it, D520 amended)."""
    return cuda_build.TARGET_SM == 90 and os.environ.get("TF_CUDA_WGMMA", "1") != "0"


#: the fp8 kernel's tile: 96 accumulators a thread and one promotion buffer of 96, no group
#: left in flight — measured on an H100 (2026-12-05) the fastest of eleven variants, 0.746 -
#: 0.764x cuBLAS fast accumulation at 8192^3 against 0.648x for 128 x 128 with a group in
#: flight (D536, D548); 128 x 128 x 6 with a group in flight stays a benchmark variant
DEFAULT_TILE_FP8 = WgTile(128, 192, 4, inflight=0)


def tile(fp8: bool = False) -> WgTile:
    t = os.environ.get("TF_CUDA_WGMMA_TILE")
    return parse_tile(t) if t else DEFAULT_TILE_FP8 if fp8 else DEFAULT_TILE


@dataclass(frozen=True)
class TmaOperand:
    """One operand's tensor map: ``kmajor`` (K is the contiguous axis: one box of
    ``BK x rows``) or M / N-major (``rows / 64`` boxes of ``64 x BK``); dims inner first."""

    root: int
    offset: int  # elements from the root's start
    kmajor: bool
    dims: tuple[int, ...]
    strides: tuple[int, ...]  # bytes, dims 1..
    box: tuple[int, int]
    batch: tuple[int, ...]  # the domain axes of dims 2..

    def spec(self, dtype: str) -> dict:
        return {"root": self.root, "offset": self.offset, "dtype": dtype, "dims": list(self.dims),
                "strides": list(self.strides), "box": [*self.box, *[1] * len(self.batch)]}


def esize(dtype: str) -> int:
    """Bytes of one element of a tensor map's dtype (2 for bf16 / f16, 1 for fp8)."""
    return WG_TYPES[dtype][1]


def bk(dtype: str) -> int:
    """K lanes of one K tile: one 128-byte swizzled row."""
    return 128 // esize(dtype)


@dataclass(frozen=True)
class WgmmaPlan:
    mma: MmaPlan
    tile: WgTile
    a: TmaOperand
    b: TmaOperand
    batch: tuple[int, ...]  # the domain's batch axes (block 1)
    blocks: int

    def plan_entry(self, kc) -> dict:
        dt = kc.bm[self.mma.la.buffer].dtype
        return {"threads": self.tile.threads, "smem": self.tile.smem, "blocks": self.blocks,
                "tmaps": [self.a.spec(dt), self.b.spec(dt)]}


#: the launch options the CUDA renderer reads: ``fp8_promote`` (native fp8 tensor cores,
#: promoted to f32 every N products, D411 / D536) and ``fp8_kmajor`` (read by the lowering: B
#: copied K-major first, D489)
LAUNCH_OPTIONS = ("fp8_promote", "fp8_kmajor")


def check_launch(launch: Mapping[str, int] | None) -> dict[str, int]:
    """The CUDA target's launch options, each checked (the project's error naming the option
    and what it takes)."""
    out = dict(launch or {})
    for key, v in out.items():
        if key not in LAUNCH_OPTIONS:
            raise InvalidArgumentError(f"CUDA launch option {key!r}: not one the CUDA backend "
                                       f"reads; expected one of {LAUNCH_OPTIONS}")
        ok = (0, *FP8_PROMOTE) if key == "fp8_promote" else (0, 1)
        if isinstance(v, bool) or v not in ok:
            raise InvalidArgumentError(f"CUDA launch option {key}={v!r}: expected one of {ok}")
    return out


def _operand(kc, ld: kir.Load, rows_axis: int, d: int, rows: int, batch: tuple[int, ...]):
    """The tensor map of one operand load (``rows_axis`` x the K axis ``d``), or (None, why)."""
    k = kc.k
    es = esize(kc.bm[ld.buffer].dtype)
    sr, sk = ld.strides[rows_axis], ld.strides[d]
    root = root_of(ld.buffer, kc.bm)
    off = kc.bm[ld.buffer].offset + ld.offset
    nr, nk = k.domain[rows_axis], k.domain[d]
    if sk == 1 or (nk == 1 and sr != 1):
        kmajor, inner, outer = True, (nk, 1), (nr, sr)
    elif sr == 1 or nr == 1:
        kmajor, inner, outer = False, (nr, 1), (nk, sk)
    else:
        return None, "no operand axis of stride 1"
    bs = [(k.domain[i], ld.strides[i]) for i in batch if ld.strides[i] and k.domain[i] > 1]
    dims, strides = [inner[0], outer[0]], []
    prev = inner[0] * es
    for n, s in [outer, *bs]:
        if n == 1:  # any stride: the coordinate is always 0
            s = -(-prev // 16) * 16 // es
        if s <= 0 or (es * s) % 16 or es * s < prev:
            return None, f"stride {s} is not a TMA stride (positive, 16-byte multiple, ordered)"
        strides.append(es * s)
        prev = es * s * n
    dims += [n for n, _ in bs]
    if (off * es) % 16:
        return None, "the operand's base is not 16-byte aligned"
    if any(x >= 1 << 32 for x in dims):
        return None, "an extent of 2^32 or more (a TMA dimension is 32-bit)"
    box = (128 // es, rows) if kmajor else (64, BK)
    return TmaOperand(kc.roots[root.name], off, kmajor, tuple(dims), tuple(strides), box,
                      tuple(i for i in batch if ld.strides[i] and k.domain[i] > 1)), ""


def promote_of(kc) -> int:
    """The products an fp8 kernel's accumulation is promoted to f32 after (``fp8_promote`` of
    the launch options; 0: fp8 is staged as f16 by the ``mma.sync`` kernel, D411)."""
    return int(getattr(kc, "launch", {}).get("fp8_promote", 0))


def plan_wgmma(kc, p: MmaPlan | None = None) -> tuple[WgmmaPlan | None, str]:
    """(the wgmma plan of ``kc``'s kernel, or None and why not)."""
    if not enabled():
        return None, (f"the build target is sm_{cuda_build.TARGET_SM}" if
                      cuda_build.TARGET_SM != 90 else
                      "TF_CUDA_WGMMA=0 switches the wgmma mapping off")
    p = p or plan_mma(kc)
    if p is None:
        return None, "not the reassociated matmul shape (D280)"
    fp8 = p.src.startswith("fp8")
    promote = promote_of(kc) if fp8 else 0
    if fp8 and not promote:
        return None, (f"{p.src} operands are staged exactly as f16 (D411); fp8_promote=N "
                      f"(one of {FP8_PROMOTE}) declares native fp8 tensor cores promoted every "
                      f"N products")
    k, t = kc.k, tile(fp8)
    if promote:
        # several promotion groups a K tile: ptxas serialises every wgmma of the double-buffered
        # form (C7514, as compiled by nvcc 12 for sm_90a), so each group is waited for (D536)
        t = replace(t, promote=promote, inflight=t.inflight if promote == 128 else 0)
    if not t.fits():
        return None, (f"{t.bm}x{t.bn} tiles with fp8 promotion every {promote}: "
                      f"{t.acc_regs} accumulator registers a thread, past {ACC_REGS}")
    batch = tuple(i for i in range(k.rank) if i not in (p.m, p.n, p.d))
    a, why = _operand(kc, p.la, p.m, p.d, t.bm, batch)
    if a is None:
        return None, f"A: {why}"
    b, why = _operand(kc, p.lb, p.n, p.d, t.bn, batch)
    if b is None:
        return None, f"B: {why}"
    if fp8:  # 8-bit wgmma reads both operands K-major (no transposing descriptor)
        if not a.kmajor:
            return None, "A is M-major (fp8 wgmma reads K-major operands only)"
        if not b.kmajor:
            return None, ("B is N-major (fp8 wgmma reads K-major operands only; fp8_kmajor=1 "
                          "copies B K-major first, D489)")
    # the layouts the host emulation is exercised on by today's lowering (D520): A K-major,
    # B N-major (a transposed operand reaches the matmul as a copy); the others are rendered
    # (``imm-trans``, the descriptors) but kept off until a test program reaches them
    elif not a.kmajor and not TRANSPOSED_OK:
        return None, "A is M-major (not exercised on the host emulation)"
    elif b.kmajor and not TRANSPOSED_OK:
        return None, "B is K-major (not exercised on the host emulation)"
    nb = 1
    for i in batch:
        nb *= k.domain[i]
    blocks = nb * -(-k.domain[p.m] // t.bm) * -(-k.domain[p.n] // t.bn)
    if blocks > MAX_BLOCKS:
        return None, "too many tiles for one launch"
    return WgmmaPlan(p, t, a, b, batch, blocks), ""


WGMMA_HEAD = r"""/* Hopper wgmma + TMA matmul kernels (render_cuda_wgmma, D520) */
struct alignas(64) tf_tmap { unsigned long long v[16]; };
/* the 128-byte swizzle of TMA and wgmma: in each 1024-byte atom, 16-byte chunk c of 128-byte
 * row r is stored at chunk c ^ (r % 8) */
#define TF_SW128(off) ((off) ^ ((((off) >> 7) & 7u) << 4))
/* a wgmma shared-memory matrix descriptor: start address, leading / stride dimension byte
 * offsets (16-byte units, 14 bits each), layout 1 = 128-byte swizzle (bits 62-63) */
#define TF_WG_DESC(addr, lbo, sbo) ((uint64_t)((((uint32_t)(addr)) & 0x3FFFFu) >> 4) | \
    ((uint64_t)(((uint32_t)(lbo)) >> 4) << 16) | ((uint64_t)(((uint32_t)(sbo)) >> 4) << 32) | \
    (1ull << 62))
#ifdef TF_HOST_EMULATION
#define TF_SADDR(p) ((uint32_t)((const uint8_t *)(p) - tf_sm))
/* TMA: box `c` of the tensor map (host form: v[0] address, v[1] rank | element bytes << 8,
 * v[2..6] dims, v[7..10] byte strides of dims 1.., v[11..15] box) into shared offset dst, inner
 * dim fastest, 128-byte swizzle, lanes outside the tensor 0 */
static void tf_tma_emul(uint8_t *sm, uint32_t dst, const tf_tmap *m, const int32_t *c)
{
    const int rank = (int)(m->v[1] & 255u), es = (int)(m->v[1] >> 8);
    int64_t n = 1;
    for (int i = 0; i < rank; ++i) n *= (int64_t)m->v[11 + i];
    for (int64_t e = 0; e < n; ++e) {
        int64_t r = e, addr = 0; int in = 1;
        for (int i = 0; i < rank; ++i) {
            const int64_t b = (int64_t)m->v[11 + i], x = (int64_t)c[i] + r % b;
            r /= b;
            if (x < 0 || x >= (int64_t)m->v[2 + i]) in = 0;
            addr += x * (i ? (int64_t)m->v[6 + i] : es);
        }
        uint8_t h[2] = {0, 0};
        if (in) memcpy(h, (const char *)(uintptr_t)m->v[0] + addr, (size_t)es);
        for (int j = 0; j < es; ++j) {
            const uint32_t o = dst + (uint32_t)(e * es + j);
            sm[(o & ~1023u) | TF_SW128(o & 1023u)] = h[j];
        }
    }
}
/* element (mn, k) of a wgmma operand of `es`-byte elements read through its descriptor:
 * K-major (rows of 128 bytes along K, 8-row groups SBO apart) or MN-major (trans, 16-bit only:
 * rows of 128 bytes along M / N, 64-lane chunks LBO apart, 8-row K groups SBO apart); the
 * swizzle of the absolute address */
static uint16_t tf_wg_elem(const uint8_t *sm, uint64_t d, int trans, int mn, int k, int es)
{
    const uint32_t start = (uint32_t)(d & 0x3FFFu) << 4, lbo = (uint32_t)((d >> 16) & 0x3FFFu) << 4,
                   sbo = (uint32_t)((d >> 32) & 0x3FFFu) << 4;
    if ((d >> 62) != 1) return 0x7FC0; /* only the 128-byte swizzle is modelled */
    const uint32_t a = trans ? start + (mn / 64) * lbo + (k / 8) * sbo + (k % 8) * 128 + (mn % 64) * 2
                             : start + (mn / 8) * sbo + (mn % 8) * 128 + k * es;
    uint16_t h = 0;
    memcpy(&h, sm + ((a & ~1023u) | TF_SW128(a & 1023u)), (size_t)es);
    return h;
}
/* an operand element's value: ty 0 f16, 1 bf16, 2 fp8e4m3, 3 fp8e5m2 (every one exact in f32) */
static float tf_wg_value(uint16_t h, int ty)
{
    return ty == 0 ? tf_f16_to_f32(h) : ty == 1 ? tf_bf16_to_f32(h)
         : ty == 2 ? tf_fp8e4m3_to_f32((uint8_t)h) : tf_fp8e5m2_to_f32((uint8_t)h);
}
/* one wgmma.m64nNk16 (16-bit) / m64nNk32 (fp8) for thread `wt` of the warpgroup: its
 * accumulators (the D fragment), each an in-order f32 fold of the exact products onto the
 * accumulator (scale-d `sd` 1) or onto +0 (`sd` 0: D = A B) */
static void tf_wgmma_emul(float *acc, int n, const uint8_t *sm, uint64_t da, uint64_t db,
                          int ta, int tb, int ty, int wt, int sd)
{
    const int w = wt / 32, l = wt % 32, es = ty < 2 ? 2 : 1, kd = 32 / es;
    for (int i = 0; i < n / 2; ++i) {
        const int row = 16 * w + l / 4 + 8 * ((i >> 1) & 1), col = 8 * (i >> 2) + 2 * (l % 4) + (i & 1);
        float s = sd ? acc[i] : 0.0f;
        for (int q = 0; q < kd; ++q) {
            const uint16_t x = tf_wg_elem(sm, da, ta, row, q, es), y = tf_wg_elem(sm, db, tb, col, q, es);
            s = __fadd_rn(s, __fmul_rn(tf_wg_value(x, ty), tf_wg_value(y, ty)));
        }
        acc[i] = s;
    }
}
#else
__device__ __forceinline__ uint32_t tf_saddr(const void *p)
{ return (uint32_t)__cvta_generic_to_shared(p); }
#define TF_SADDR(p) tf_saddr(p)
__device__ __forceinline__ void tf_mbar_init(uint64_t *b, uint32_t n)
{ asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(tf_saddr(b)), "r"(n) : "memory"); }
__device__ __forceinline__ void tf_mbar_expect(uint64_t *b, uint32_t bytes)
{ asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(tf_saddr(b)),
               "r"(bytes) : "memory"); }
__device__ __forceinline__ void tf_mbar_arrive(uint64_t *b)
{ asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(tf_saddr(b)) : "memory"); }
__device__ __forceinline__ void tf_mbar_wait(uint64_t *b, uint32_t parity)
{
    uint32_t done;
    do {
        asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     " selp.u32 %0, 1, 0, p;\n}" : "=r"(done) : "r"(tf_saddr(b)), "r"(parity)
                     : "memory");
    } while (!done);
}
#define TF_WG_FENCE() asm volatile("wgmma.fence.sync.aligned;" ::: "memory")
#define TF_WG_COMMIT() asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory")
#define TF_WG_WAIT0() asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory")
#define TF_WG_WAIT1() asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory")
#endif
"""


def _tma_macro(rank: int) -> str:
    cs = ", ".join(f"c{i}" for i in range(rank))
    regs = ", ".join(f"%{i + 2}" for i in range(rank))
    ops = ", ".join(f'"r"((int32_t)(c{i}))' for i in range(rank))
    return (f"#ifndef TF_TMA{rank}\n#ifdef TF_HOST_EMULATION\n#define TF_TMA{rank}(dst, map, bar, {cs}) do {{ "
            f"const int32_t c_[{rank}] = {{{', '.join(f'(int32_t)(c{i})' for i in range(rank))}}}; "
            f"tf_tma_emul(tf_sm, TF_SADDR(dst), (map), c_); (void)(bar); }} while (0)\n#else\n"
            f"#define TF_TMA{rank}(dst, map, bar, {cs}) asm volatile(\"cp.async.bulk.tensor."
            f"{rank}d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, "
            f"{{{regs}}}], [%{rank + 2}];\" :: \"r\"(tf_saddr(dst)), "
            f"\"l\"((unsigned long long)(map)), {ops}, \"r\"(tf_saddr(bar)) : \"memory\")\n"
            f"#endif\n#endif")


def _wgmma_fn(name: str, n: int, src: str, ta: int, tb: int) -> list[str]:
    """``name(acc, da, db, sd)``: one ``wgmma.mma_async.m64n<n>k16`` (bf16 / f16) or
    ``m64n<n>k32`` (fp8: no transposing immediates) onto ``acc`` (scale-d ``sd``: 0 writes
    ``A B``, 1 adds it)."""
    ty, _, kd = WG_TYPES[src]
    regs = ", ".join(f"%{i}" for i in range(n // 2))
    ops = ", ".join(f'"+f"(d[{i}])' for i in range(n // 2))
    h = n // 2
    trans = f", {ta}, {tb}" if kd == 16 else ""
    return [f"#if !defined(TF_HOST_EMULATION) && !defined({name.upper()})",
            f"#define {name.upper()}",
            f"__device__ __forceinline__ void {name}(float *d, uint64_t da, uint64_t db, int sd)",
            "{",
            f'    asm volatile("{{\\n .reg .pred p;\\n setp.ne.b32 p, %{h + 2}, 0;\\n '
            f'wgmma.mma_async.sync.aligned.m64n{n}k{kd}.f32.{ty}.{ty} {{{regs}}}, %{h}, %{h + 1}, '
            f'p, 1, 1{trans};\\n}}"',
            f'        : {ops}', '        : "l"(da), "l"(db), "r"(sd) : "memory");', "}",
            "#endif"]


def _desc(op: TmaOperand, stage: str, r0: str, kk: str) -> str:
    """The descriptor of rows ``r0 ..`` (a multiple of 64) and K step ``kk`` of an operand's
    stage: K-major rows of 128 bytes (SBO 1024: 8 rows; LBO unused), K steps 32 bytes apart;
    M / N-major boxes of 64 x BK (LBO: the box), 8 K rows SBO 1024 apart, K steps 16 rows."""
    if op.kmajor:
        return f"TF_WG_DESC(TF_SADDR({stage} + ({r0}) * 128 + ({kk}) * 32), 16, 1024)"
    return (f"TF_WG_DESC(TF_SADDR({stage} + (({r0}) / 64) * {64 * BK * 2} + ({kk}) * 2048), "
            f"{64 * BK * 2}, 1024)")


def _loads(op: TmaOperand, tm: str, rows: int, stage: str, r0: str, bar: str) -> list[str]:
    """The TMA loads of one operand's ``rows x BK`` tile at K ``k0`` into ``stage``."""
    rank = len(op.dims)
    bc = [f"b{i}" for i in op.batch]
    if op.kmajor:
        return [f"TF_TMA{rank}({stage}, &{tm}, {bar}, {', '.join(['k0', r0, *bc])});"]
    return [f"TF_TMA{rank}({stage} + {j * 64 * BK * 2}, &{tm}, {bar}, "
            f"{', '.join([f'{r0} + {64 * j}', 'k0', *bc])});" for j in range(rows // 64)]


def _consumer(fn, da, db, t: WgTile, tycode, ta, tb, ktiles, per, groups, cons, group,
              promote) -> tuple[list[str], list[str]]:
    """(the host emulation's consumer phase of K tile ``kt``, the device consumer's K loop).

    Without promotion each K tile's four instructions accumulate onto ``tf_acc``. With it
    (fp8, D536) each group of ``per`` instructions writes a buffer (scale-d 0 first) whose sum
    is then added onto ``tf_acc`` in f32; with a group left in flight (one group a tile) two
    buffers alternate by tile, the K loop unrolled by two tiles so that every buffer index is a
    constant."""
    i12 = " " * 12
    if not t.promote:
        host = [f"{i12}for (int kk = 0; kk < 4; ++kk)",
                f"{i12}    tf_wgmma_emul(TF_R(tf_acc), {t.bn}, tf_sm, {da}, {db}, {ta}, {tb}, "
                f"{tycode}, tid & 127, 1);"]
        dev = ["#pragma unroll 1",
               f"        for (int kt = 0; kt < {ktiles}; ++kt) {{",
               *[f"{i12}{x}" for x in cons("kt")],
               f"{i12}tf_mbar_wait(&tf_full[s], (kt / {t.stages}) & 1);",
               f"{i12}TF_WG_FENCE();",
               "#pragma unroll",
               f"{i12}for (int kk = 0; kk < 4; ++kk) {fn}(TF_R(tf_acc), {da}, {db}, 1);",
               f"{i12}TF_WG_COMMIT();",
               *([f"{i12}TF_WG_WAIT0();",
                  f"{i12}if ((tid & 127) == 0) tf_mbar_arrive(&tf_empty[s]);"] if not t.inflight
                 else  # the previous tile's group is done: its stage is free
                 [f"{i12}TF_WG_WAIT1();",
                  f"{i12}if (kt > 0 && (tid & 127) == 0) tf_mbar_arrive(&tf_empty[(kt - 1) % "
                  f"{t.stages}]);"]),
               "        }",
               *(["        TF_WG_WAIT0();"] if t.inflight else [])]
        return host, dev
    host = []
    for g in range(groups):
        host += [f"{i12}for (int j = 0; j < {per}; ++j) {{ const int kk = {g * per} + j; "
                 f"tf_wgmma_emul(TF_R(tf_t0), {t.bn}, tf_sm, {da}, {db}, {ta}, {tb}, {tycode}, "
                 f"tid & 127, j > 0); }}", *promote("tf_t0", i12)]
    if not t.inflight:
        dev = ["#pragma unroll 1",
               f"        for (int kt = 0; kt < {ktiles}; ++kt) {{",
               *[f"{i12}{x}" for x in cons("kt")],
               f"{i12}tf_mbar_wait(&tf_full[s], (kt / {t.stages}) & 1);"]
        for g in range(groups):
            dev += [f"{i12}TF_WG_FENCE();", *group("tf_t0", g, i12), f"{i12}TF_WG_COMMIT();",
                    *([f"{i12}if (kt == 0 && c == 0) asm volatile(\"bar.arrive 1, 256;\" ::: "
                       f"\"memory\");"] if t.stagger and g == 0 else []),
                    f"{i12}TF_WG_WAIT0();", *promote("tf_t0", i12)]
        dev += [f"{i12}if ((tid & 127) == 0) tf_mbar_arrive(&tf_empty[s]);", "        }"]
        return host, dev
    # a group left in flight: only with one group a K tile (promote 128; ``plan_wgmma`` waits
    # for each group otherwise), so two buffers alternate by tile (tile kx into tf_t{kx & 1})
    # and the loop is unrolled by two tiles, every buffer index a constant
    assert groups == 1, groups
    whole = ktiles - ktiles % 2  # tiles the unrolled loop covers; an odd last one peeled

    def tile_(kx: str, u: int, ind: str) -> list[str]:
        i4 = ind + "    "
        return [f"{ind}{{", f"{i4}const int kx = {kx};", *[f"{i4}{x}" for x in cons("kx")],
                f"{i4}tf_mbar_wait(&tf_full[s], (kx / {t.stages}) & 1);",
                f"{i4}TF_WG_FENCE();", *group(f"tf_t{u}", 0, i4), f"{i4}TF_WG_COMMIT();",
                f"{i4}TF_WG_WAIT1();",  # the previous tile's group is done: its stage is free
                f"{i4}if (kx > 0) {{", *promote(f"tf_t{1 - u}", i4 + "    "),
                f"{i4}    if ((tid & 127) == 0) tf_mbar_arrive(&tf_empty[(kx - 1) % "
                f"{t.stages}]);", f"{i4}}}", f"{ind}}}"]

    # no conditional tile inside the loop: on a path that skipped one, the buffer written next
    # would still be in flight (ptxas then serialises every wgmma)
    dev = ["#pragma unroll 1", f"        for (int kt = 0; kt < {whole}; kt += 2) {{",
           *tile_("kt + 0", 0, i12), *tile_("kt + 1", 1, i12), "        }"]
    if whole < ktiles:
        dev += tile_(str(whole), 0, "        ")
    dev += ["        TF_WG_WAIT0();", *promote(f"tf_t{(ktiles - 1) & 1}", "        ")]
    return host, dev


def render_wgmma(kc, w: WgmmaPlan) -> tuple[list[str], list[str]]:
    """(the helper lines this kernel needs before it, its ``__global__`` function)."""
    k, p, t = kc.k, w.mma, w.tile
    name = f"tf_k{kc.kidx}"
    nroot = len(kc.roots)
    ty = p.src
    kd = WG_TYPES[ty][2]  # K of one instruction
    tycode = ("f16", "bf16", "fp8e4m3", "fp8e5m2").index(ty)  # the host emulation's
    nacc = t.bn // 2
    bke = bk(ty)
    ktiles = -(-k.domain[p.d] // bke)
    dm, dn = k.domain[p.m], k.domain[p.n]
    tm_, tn_ = -(-dm // t.bm), -(-dn // t.bn)
    fn = f"tf_wgmma_n{t.bn}_{ty}_{int(not w.a.kmajor)}{int(not w.b.kmajor)}"
    ta, tb = int(not w.a.kmajor), int(not w.b.kmajor)
    ranks = sorted({len(w.a.dims), len(w.b.dims)})
    helpers = [_tma_macro(r) for r in ranks] + _wgmma_fn(fn, t.bn, ty, ta, tb)
    steps = 128 // 32  # instructions per K tile: 32 bytes of K each
    per = t.promote // kd if t.promote else steps  # instructions per promotion group
    groups = steps // per
    params = [f"char *p{i}" for i in range(nroot)] + \
        ["char *S0", "int64_t lo", "int64_t hi", "const __grid_constant__ tf_tmap tf_ma",
         "const __grid_constant__ tf_tmap tf_mb"]
    ps = ", ".join(f"p{i}" for i in range(nroot)) or "0"
    sab = t.bm * 128
    regs = min(240, (65536 - 128 * 40) // (128 * t.consumers) // 8 * 8)
    # the tile: batch index, then M tiles grouped by group_m with N inside a group
    tile = ["    const int64_t tf_q = lo + (int64_t)blockIdx.x;",
            f"    const int64_t tf_bt = tf_q / {tm_ * tn_}ll, tf_r = tf_q % {tm_ * tn_}ll;",
            f"    const int64_t tf_g = tf_r / {t.group_m * tn_}ll, tf_f = tf_g * {t.group_m}ll;",
            f"    const int64_t tf_gs = {tm_}ll - tf_f < {t.group_m}ll ? {tm_}ll - tf_f : "
            f"{t.group_m}ll;",
            f"    const int64_t tf_in = tf_r % {t.group_m * tn_}ll;",
            f"    const int bm0 = (int)((tf_f + tf_in % tf_gs) * {t.bm}), "
            f"bn0 = (int)((tf_in / tf_gs) * {t.bn}); (void)bm0; (void)bn0;",
            "    int64_t tf_bq = tf_bt; (void)tf_bq;"]
    for i in reversed(w.batch):
        tile.append(f"    const int64_t b{i} = tf_bq % {k.domain[i]}ll; tf_bq /= {k.domain[i]}ll; "
                    f"(void)b{i};")
    # the producer's K tile kt: stage s armed with its bytes, the A and B boxes loaded
    prod = [f"const int s = (int)(kt % {t.stages}); const int k0 = (int)(kt * {bke});",
            f"uint8_t *const sa = tf_sm + s * {t.stage_bytes}, *const sb = sa + {sab};",
            *_loads(w.a, "tf_ma", t.bm, "sa", "bm0", "&tf_full[s]"),
            *_loads(w.b, "tf_mb", t.bn, "sb", "bn0", "&tf_full[s]")]
    da = _desc(w.a, "sa", "64 * c", "kk")
    db = _desc(w.b, "sb", "0", "kk")

    def cons(kt: str) -> list[str]:  # the consumer's stage of K tile ``kt``
        return [f"const int s = (int)({kt} % {t.stages});",
                f"const uint8_t *const sa = tf_sm + s * {t.stage_bytes}, *const sb = sa + {sab};"]

    def promote(buf: str, ind: str) -> list[str]:  # a promotion: the group's sum onto tf_acc
        return [f"{ind}#pragma unroll", f"{ind}for (int j = 0; j < {nacc}; ++j) "
                f"TF_R(tf_acc)[j] = __fadd_rn(TF_R(tf_acc)[j], TF_R({buf})[j]);"]

    def group(buf: str, g: int, ind: str) -> list[str]:  # group g's instructions onto ``buf``
        return [f"{ind}{{ const int kk = {g * per + j}; {fn}(TF_R({buf}), {da}, {db}, {int(j > 0)});"
                f" }}" for j in range(per)]
    sptr, _, sbase, _ = kc.ptr(p.st.buffer, write=True)
    sb_ = [f"b{i} * {s}ll" for i, s in enumerate(p.st.strides) if s and i in w.batch]
    soff = " + ".join([f"{sbase + p.st.offset}ll", *sb_])
    val = kc.round_f32("v", p.rnd.to, p.rnd.overflow) if p.rnd is not None else "v"
    seed = c_literal(p.seed, "f32")
    ind = "        "
    epi = [f"{ind}const int c = wg - 1, wt = tid & 127, wq = wt / 32, l = wt % 32;",
           f"{ind}#pragma unroll",
           f"{ind}for (int i = 0; i < {nacc}; ++i) {{",
           f"{ind}    const int64_t gm = bm0 + 64 * c + 16 * wq + l / 4 + 8 * ((i >> 1) & 1);",
           f"{ind}    const int64_t gn = bn0 + 8 * (i >> 2) + 2 * (l % 4) + (i & 1);",
           f"{ind}    if (gm < {dm}ll && gn < {dn}ll) {{",
           f"{ind}        const float v = TF_R(tf_acc)[i];",
           f"{ind}        {sptr}[{soff} + gm * {p.st.strides[p.m]}ll + gn * "
           f"{p.st.strides[p.n]}ll] = ({CTYPE[kc.bm[p.st.buffer].dtype]})({val});",
           f"{ind}    }}",
           f"{ind}}}"]
    host_steps, dev_loop = _consumer(fn, da, db, t, tycode, ta, tb, ktiles, per, groups,
                                     cons, group, promote)
    out = [f"/* wgmma mapping (D520): {t.bm}x{t.bn} tiles, {t.consumers} consumer warpgroup(s) of "
           f"m64n{t.bn}k{kd}.{ty}, {t.stages} TMA stages of K {bke}, A {'K' if w.a.kmajor else 'M'}-"
           f"major, B {'K' if w.b.kmajor else 'N'}-major"
           + (f", promoted to f32 every {t.promote} products (D536)" if t.promote else "") + " */",
           f'extern "C" __global__ void __launch_bounds__({t.threads}, 1) {name}(',
           "    " + ", ".join(params) + ")", "{",
           "    if (lo + (int64_t)blockIdx.x >= hi) return;",
           f"    char *const P[{max(nroot, 1)}] = {{{ps}}};", "    (void)P; (void)S0;",
           *tile,
           "#ifdef TF_HOST_EMULATION",
           f"    static thread_local uint8_t tf_smh[{t.smem}]; /* offsets from tf_sm: any alignment */",
           "    uint8_t *const tf_sm = tf_smh;",
           "#else",
           "    extern __shared__ uint8_t tf_dsm[];",
           "    uint8_t *const tf_sm = tf_dsm + ((1024u - (tf_saddr(tf_dsm) & 1023u)) & 1023u);",
           "#endif",
           f"    uint64_t *const tf_full = (uint64_t *)(tf_sm + {t.stages * t.stage_bytes}), "
           f"*const tf_empty = tf_full + {t.stages}; (void)tf_full; (void)tf_empty;",
           f"    TF_REG(float, tf_acc, {t.threads}, {nacc});",
           *[f"    TF_REG(float, tf_t{i}, {t.threads}, {nacc});"
             for i in range((1 + t.inflight) if t.promote else 0)],
           "#ifdef TF_HOST_EMULATION",
           "    TF_PHASE_BEGIN",
           "        const int tid = (int)threadIdx.x, wg = tid / 128;",
           f"        if (wg > 0) for (int j = 0; j < {nacc}; ++j) TF_R(tf_acc)[j] = {seed};",
           "    TF_PHASE_END",
           f"    for (int64_t kt = 0; kt < {ktiles}ll; ++kt) {{",
           "        TF_PHASE_BEGIN",
           "        if (threadIdx.x == 0) {",
           *[f"            {x}" for x in prod],
           "        }",
           "        TF_PHASE_END",
           "        TF_PHASE_BEGIN",
           "        const int tid = (int)threadIdx.x, wg = tid / 128;",
           "        if (wg > 0) {",
           "            const int c = wg - 1;",
           *[f"            {x}" for x in cons("kt")],
           *host_steps,
           "        }",
           "        TF_PHASE_END",
           "    }",
           "    TF_PHASE_BEGIN",
           "    {",
           "        const int tid = (int)threadIdx.x, wg = tid / 128;",
           "        if (wg > 0) {",
           *[f"    {x}" for x in epi],
           "        }",
           "    }",
           "    TF_PHASE_END",
           "#else",
           "    const int tid = (int)threadIdx.x, wg = tid / 128;",
           "    if (tid == 0) {",
           f"        for (int s = 0; s < {t.stages}; ++s) {{ tf_mbar_init(&tf_full[s], 1); "
           f"tf_mbar_init(&tf_empty[s], {t.consumers}); }}",
           '        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");',
           '        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");',
           "    }",
           "    __syncthreads();",
           "    if (wg == 0) {",
           *(['        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");'] if t.maxnreg else []),
           "        if (tid == 0) {",
           "#pragma unroll 1",
           f"            for (int kt = 0; kt < {ktiles}; ++kt) {{",
           f"                if (kt >= {t.stages}) tf_mbar_wait(&tf_empty[kt % {t.stages}], "
           f"((kt / {t.stages}) + 1) & 1);",
           f"                tf_mbar_expect(&tf_full[kt % {t.stages}], {t.stage_bytes}u);",
           *[f"                {x}" for x in prod],
           "            }",
           "        }",
           "        return;",
           "    }",
           *([f'    asm volatile("setmaxnreg.inc.sync.aligned.u32 {regs};");'] if t.maxnreg
             else []),
           "    {",
           "        const int c = wg - 1;",
           "#pragma unroll",
           f"        for (int j = 0; j < {nacc}; ++j) TF_R(tf_acc)[j] = {seed};",
           # consumer 1 waits for consumer 0's first wgmma group (D546)
           *(['        if (c == 1) asm volatile("bar.sync 1, 256;" ::: "memory");']
             if t.stagger and t.promote else []),
           *dev_loop,
           "    }",
           "    {",
           *epi,
           "    }",
           "#endif",
           "}"]
    return helpers, out


def render_whole(kc) -> str | None:
    """The wgmma kernel where it applies, else the ``mma.sync`` kernel (D280), else None; sets
    ``kc.wgmma`` / ``kc.mma``, the threads and the ``why`` of ``--explain``."""
    from tilefoundry.compiler import render_cuda_mma

    p = render_cuda_mma.plan_mma(kc)
    if p is None:
        return None
    w, no = plan_wgmma(kc, p)
    kc.mma, kc.scratch = p, 0
    if w is not None:
        kc.wgmma, kc.block = w, w.tile.threads
        staggered = ", consumers staggered (D546)" if w.tile.stagger else ""
        fp8 = (f", native {p.src} promoted to f32 every {w.tile.promote} products "
               f"(fp8_promote, D411 / D536){staggered}" if w.tile.promote else "")
        kc.why = (f"wgmma mapping: a reassociated {p.src} matmul on sm_90 (wgmma + TMA, "
                  f"{w.tile.bm}x{w.tile.bn}x{bk(p.src)} tiles, {w.tile.stages} stages, "
                  f"{w.tile.inflight} group(s) in flight{fp8}; D520)")
        helpers, fn = render_wgmma(kc, w)
        return "\n".join([kc.comment(), *helpers, *fn])
    kc.block = render_cuda_mma.MMA_THREADS
    kc.why = f"tensor-core mapping: a reassociated matmul on mma.sync (D280); wgmma declined: {no}"
    return "\n".join(render_cuda_mma.render_mma(kc, p))
