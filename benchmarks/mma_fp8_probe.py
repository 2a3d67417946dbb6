"""How many bits does one native tensor-core ``mma.sync`` keep? (issue 18; not a test)

    python benchmarks/mma_fp8_probe.py [--json FILE]

Needs a CUDA GPU (sm_89 or later for the fp8 forms). One warp issues one PTX instruction,
``mma.sync.aligned.m16n8k32.row.col.f32.{e4m3|e5m2}`` (native fp8, K = 32) or
``mma.sync.aligned.m16n8k16.row.col.f32.{f16|bf16}`` (the forms the CUDA backend uses, fp8 staged
exactly as f16: D263 / D280), on data whose every f32 bracketing is exact, so the admitted set of
a reassociated dot (any bracketing of IEEE f32 additions of the exact products) is one value,
computed here with ``fractions.Fraction`` — an exact model independent of the GPU:

* ``one-then-small``: seed 0, one product of 1 and K − 1 products of 2^-15 (A constant, so the
  pairing of K lanes is immaterial): the sum is 1 + (K − 1)·2^-15, which needs 15 bits below the
  leading one (f32 keeps 23);
* ``seeded``: seed 1, K products of 2^-15: 1 + K·2^-15.

An accumulator that aligns the addends to the largest and keeps fewer than 15 bits drops the
small products. Every output element of the 16 x 8 tile is the same value (all rows of A and all
columns of B are alike), so the fragment layouts need only cover each K lane once.
"""

from __future__ import annotations

import argparse
import json
import sys
from fractions import Fraction

import ml_dtypes
import numpy as np

SOURCE = r"""
#include "tf_numerics.h"  /* the fixed-width integer types under NVRTC */
/* m16n8k32, 8-bit operands (PTX ISA): A a0..a3 = rows g / g+8 / g / g+8, k 4t..4t+3 (+16 for
 * a2, a3); B b0, b1 = k 4t..4t+3 (+16 for b1), column g; C / D rows g, g+8, columns 2t, 2t+1 */
#define PROBE_FP8(NAME, TY) \
extern "C" __global__ void NAME(const uint8_t *A, const uint8_t *B, const float *C, float *D) \
{ \
    const int lane = threadIdx.x, g = lane >> 2, t = lane & 3; \
    uint32_t a[4], b[2]; float c[4], d[4]; \
    for (int i = 0; i < 4; ++i) { \
        const int row = g + (i & 1) * 8, k = 4 * t + (i >> 1) * 16; \
        a[i] = 0; \
        for (int j = 0; j < 4; ++j) a[i] |= (uint32_t)A[row * 32 + k + j] << (8 * j); \
    } \
    for (int i = 0; i < 2; ++i) { \
        const int k = 4 * t + i * 16; \
        b[i] = 0; \
        for (int j = 0; j < 4; ++j) b[i] |= (uint32_t)B[(k + j) * 8 + g] << (8 * j); \
    } \
    for (int r = 0; r < 4; ++r) c[r] = C[(g + (r >> 1) * 8) * 8 + 2 * t + (r & 1)]; \
    asm volatile("mma.sync.aligned.m16n8k32.row.col.f32." TY "." TY ".f32 " \
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};" \
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3]) \
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), \
          "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3])); \
    for (int r = 0; r < 4; ++r) D[(g + (r >> 1) * 8) * 8 + 2 * t + (r & 1)] = d[r]; \
}
PROBE_FP8(probe_e4m3, "e4m3")
PROBE_FP8(probe_e5m2, "e5m2")
/* m16n8k16, 16-bit operands: A a0..a3 = (row g, k 2t), (g+8, 2t), (g, 2t+8), (g+8, 2t+8);
 * B b0, b1 = k 2t..2t+1 (+8), column g */
#define PROBE_16(NAME, TY) \
extern "C" __global__ void NAME(const uint16_t *A, const uint16_t *B, const float *C, float *D) \
{ \
    const int lane = threadIdx.x, g = lane >> 2, t = lane & 3; \
    uint32_t a[4], b[2]; float c[4], d[4]; \
    for (int i = 0; i < 4; ++i) { \
        const int row = g + (i & 1) * 8, k = 2 * t + (i >> 1) * 8; \
        a[i] = (uint32_t)A[row * 16 + k] | (uint32_t)A[row * 16 + k + 1] << 16; \
    } \
    for (int i = 0; i < 2; ++i) { \
        const int k = 2 * t + i * 8; \
        b[i] = (uint32_t)B[k * 8 + g] | (uint32_t)B[(k + 1) * 8 + g] << 16; \
    } \
    for (int r = 0; r < 4; ++r) c[r] = C[(g + (r >> 1) * 8) * 8 + 2 * t + (r & 1)]; \
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." TY "." TY ".f32 " \
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};" \
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3]) \
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), \
          "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3])); \
    for (int r = 0; r < 4; ++r) D[(g + (r >> 1) * 8) * 8 + 2 * t + (r & 1)] = d[r]; \
}
PROBE_16(probe_f16, "f16")
PROBE_16(probe_bf16, "bf16")
"""

#: (kernel, numpy dtype, K, the constant A value, B's big value, B's small value): A·big = 1,
#: A·small = 2^-15, every value exact in the dtype (e4m3's 2^-9 is its least subnormal)
FORMS = {"e4m3": ("probe_e4m3", ml_dtypes.float8_e4m3fn, 32, 2.0 ** -6, 2.0 ** 6, 2.0 ** -9),
         "e5m2": ("probe_e5m2", ml_dtypes.float8_e5m2, 32, 2.0 ** -4, 2.0 ** 4, 2.0 ** -11),
         "f16": ("probe_f16", np.float16, 16, 2.0 ** -4, 2.0 ** 4, 2.0 ** -11),
         "bf16": ("probe_bf16", ml_dtypes.bfloat16, 16, 2.0 ** -4, 2.0 ** 4, 2.0 ** -11)}


def _case(form: str, kind: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, Fraction]:
    _, npdt, k, av, big, small = FORMS[form]
    a = np.full((16, k), av, np.float32)
    b = np.full((k, 8), small, np.float32)
    c = np.zeros((16, 8), np.float32)
    if kind == "one-then-small":
        b[0, :] = big
    else:
        c[...] = 1.0
    exact = Fraction(float(c[0, 0])) + sum(Fraction(float(a[0, j])) * Fraction(float(b[j, 0]))
                                           for j in range(k))
    for x in (a, b):  # every operand exact in the dtype
        if not np.array_equal(x, x.astype(npdt).astype(np.float32)):
            raise ValueError(f"{form}: an operand is not exact in the dtype")
    return a.astype(npdt), b.astype(npdt), c, exact


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", help="write the results to this file")
    args = ap.parse_args(argv)
    from tilefoundry.compiler.cuda_backend import _Device, gpu_present

    if not gpu_present():
        print("mma_fp8_probe.py needs a CUDA GPU", file=sys.stderr)
        return 2
    dev = _Device.get()
    results = []
    for form, (fn, _, k, *_rest) in FORMS.items():
        f = dev.function(SOURCE, fn)
        for kind in ("one-then-small", "seeded"):
            a, b, c, exact = _case(form, kind)
            d = np.zeros((16, 8), np.float32)
            bufs = [dev.alloc(x.nbytes) for x in (a, b, c, d)]
            for buf, x in zip(bufs, (a, b, c), strict=False):
                dev.upload(buf, np.ascontiguousarray(x))
            dev.launch(f, 1, 32, [int(x) for x in bufs])
            dev.download(d, bufs[3])
            for buf in bufs:
                dev.free(buf)
            seen = np.unique(d).tolist()
            ok = seen == [float(exact)]
            lost = [float((exact - Fraction(v)) / Fraction(2) ** -15) for v in seen]
            r = {"form": form, "K": k, "data": kind, "exact": float(exact),
                 "observed": seen, "admitted": ok, "small_terms_lost": lost}
            results.append(r)
            print(json.dumps(r), flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
