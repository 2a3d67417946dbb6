"""Spec-derived conformance cases of the tile-family ``Mma`` (an extension of the HIR catalog),
each quoting the Tile design sentence it tests. Called from ``catalog._spec_cases``."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ops.tile_mma import Mma

__all__ = ["S_MMA", "S_MMA_K_ORDER", "S_MMA_PRECISION", "spec_tile_mma"]

S_MMA = ("Tile design: \"acc = mma(a, b, acc); // FP16 inputs, FP32 accumulator\"; "
         "\"mma(A, B, C)[b, m, n] = accumulate_policy(C[b, m, n], { convert(A[b, m, k]) * "
         "convert(B[b, k, n]) | k in K })\"; \"Inputs are converted to the accumulator type by "
         "the reference realization.\"")
S_MMA_K_ORDER = ("Tile design: \"acc = mma(a, b, acc, {.allow_reassociation = false}); // "
                 "preserve contraction order\"; \"Disabling reassociation retains the reference "
                 "K order\".")
S_MMA_PRECISION = ("Tile design: \"MMA permits reassociation by default, but does not permit "
                   "silently reducing input precision (for example, substituting TF32 for "
                   "FP32).\"")
S_MMA_ACC = ("Tile design: \"mma(a, b, acc) is one fused update, so acc += mma(a, b) would "
             "ambiguously add the accumulator twice.\" — the accumulator seeds the K fold.")


def spec_tile_mma(acc) -> None:
    from tilefoundry.conformance.catalog.build import (
        BF16,
        E4M3,
        E5M2,
        ENTRY,
        F16,
        F32,
        case_rng,
        make_call,
        make_module,
        make_var,
        random_float,
        special_values,
    )
    from tilefoundry.conformance.catalog.special import _SPECIAL_SPEC

    add = acc.add

    def mma_case(cid: str, dt: DType, batch: tuple, m: int, k: int, n: int, reassoc: bool,
                 lo: float = -4.0, hi: float = 4.0) -> Callable:
        def build():
            r = case_rng(cid)
            a = random_float(r, (*batch, m, k), dt, lo, hi)
            b = random_float(r, (*batch, k, n), dt, lo, hi)
            c = random_float(r, (*batch, m, n), F32, -16.0, 16.0)
            av, bv, cv = (make_var(nm, v.shape, t) for nm, v, t in
                          (("a", a, dt), ("b", b, dt), ("acc", c, F32)))
            return make_module([av, bv, cv], make_call(Mma(reassoc), av, bv, cv)), ENTRY, [a, b, c]

        return build

    for dt in (F16, BF16, E4M3, E5M2, F32):
        for reassoc in (True, False):
            w = "reassociate" if reassoc else "k-order"
            cid = f"spec/mma/f32-accumulator-{w}/{dt}"
            add(cid, "tile", mma_case(cid, dt, (), 4, 12, 3, reassoc), ops=("Mma",),
                dtypes=(dt, F32), spec=S_MMA + (" " + S_MMA_K_ORDER if not reassoc else ""),
                tier="quick")
    for dt in (F16, BF16):
        cid = f"spec/mma/batch-m-k-n-roles/{dt}"
        add(cid, "tile", mma_case(cid, dt, (2,), 3, 5, 4, True), ops=("Mma",),
            dtypes=(dt, F32), spec=S_MMA, tier="quick")
        cid = f"spec/mma/long-k-tiled/{dt}"
        add(cid, "tile", mma_case(cid, dt, (), 2, 37, 3, False), ops=("Mma",),
            dtypes=(dt, F32), spec=S_MMA_K_ORDER, tier="quick")
    # inputs with full f32 significands: a backend rounding them (TF32, bf16) first leaves the
    # admitted set even with reassociation allowed
    cid = "spec/mma/input-precision-kept/f32"
    add(cid, "tile", mma_case(cid, F32, (), 4, 8, 4, True, 0.5, 1.0), ops=("Mma",),
        dtypes=(F32,), spec=S_MMA_PRECISION, tier="quick")
    cid = "spec/mma/input-precision-kept/f16"
    add(cid, "tile", mma_case(cid, F16, (), 4, 8, 4, True, 0.5, 1.0), ops=("Mma",),
        dtypes=(F16, F32), spec=S_MMA_PRECISION, tier="quick")

    def k_order_absorb(reassoc: bool) -> Callable:
        # acc = 2^24 and products of 1: the K-order fold absorbs each +1 (ties to even), a sum
        # of the products first gives 2^24 + K; only the first is the reference K order
        def build():
            a = np.ones((2, 4), np.float32)
            b = np.ones((4, 2), np.float32)
            c = np.full((2, 2), 2.0 ** 24, np.float32)
            c[1, 1] = np.float32(-(2.0 ** 24))
            av, bv, cv = make_var("a", a.shape, F32), make_var("b", b.shape, F32), make_var("acc", c.shape,
                                                                                 F32)
            return make_module([av, bv, cv], make_call(Mma(reassoc), av, bv, cv)), ENTRY, [a, b, c]

        return build

    for reassoc in (False, True):
        w = "reassociate" if reassoc else "k-order"
        add(f"spec/mma/accumulator-absorbs-{w}/f32", "tile", k_order_absorb(reassoc),
            ops=("Mma",), dtypes=(F32,), spec=S_MMA_K_ORDER + " " + S_MMA_ACC, tier="quick")

    def signed_zero_acc() -> Callable:
        # every product is -0 and acc is -0: the fold from acc gives -0; a backend that folds
        # from +0 and adds acc afterwards (acc += mma(a, b)) gives +0
        def build():
            a = np.asarray([[-0.0, 1.0], [0.0, -0.0]], np.float32)
            b = np.asarray([[1.0, -0.0], [-0.0, 1.0]], np.float32)
            c = np.asarray([[-0.0, -0.0], [-0.0, 0.0]], np.float32)
            av, bv, cv = make_var("a", a.shape, F32), make_var("b", b.shape, F32), make_var("acc", c.shape,
                                                                                 F32)
            return make_module([av, bv, cv], make_call(Mma(False), av, bv, cv)), ENTRY, [a, b, c]

        return build

    add("spec/mma/signed-zero-accumulator-k-order/f32", "tile", signed_zero_acc(),
        ops=("Mma",), dtypes=(F32,), spec=S_MMA_ACC + " " + S_MMA_K_ORDER, tier="quick")

    def empty_k(dt: DType) -> Callable:
        def build():
            a = np.zeros((3, 0), np.float32).astype(np.float16 if dt is F16 else np.float32)
            b = np.zeros((0, 2), a.dtype)
            c = np.asarray([[1.5, -0.0], [0.0, -2.0], [np.inf, 3.0]], np.float32)
            av, bv, cv = make_var("a", a.shape, dt), make_var("b", b.shape, dt), make_var("acc", c.shape,
                                                                               F32)
            return make_module([av, bv, cv], make_call(Mma(), av, bv, cv)), ENTRY, [a, b, c]

        return build

    for dt in (F32, F16):
        add(f"spec/mma/empty-k-returns-acc/{dt}", "tile", empty_k(dt), ops=("Mma",),
            dtypes=(dt, F32), spec=S_MMA, tier="quick")

    def special(dt: DType, reassoc: bool) -> Callable:
        def build():
            v = special_values(dt)
            f = special_values(F32)
            r = case_rng(f"special/tile/mma/{dt}")
            k = 4
            m = v.size // k
            a = np.ascontiguousarray(v[: m * k].reshape(m, k))
            b = np.ascontiguousarray(v[r.permutation(v.size)][: k * 3].reshape(k, 3))
            c = np.ascontiguousarray(f[r.permutation(f.size)][: m * 3].reshape(m, 3))
            av, bv, cv = make_var("a", a.shape, dt), make_var("b", b.shape, dt), make_var("acc", c.shape,
                                                                               F32)
            return make_module([av, bv, cv], make_call(Mma(reassoc), av, bv, cv)), ENTRY, [a, b, c]

        return build

    for dt in (F32, BF16, F16, E4M3, E5M2):
        for reassoc in (False, True):
            w = "reassociate" if reassoc else "k-order"
            add(f"special/tile/mma-{w}/{dt}", "tile", special(dt, reassoc), ops=("Mma",),
                dtypes=(dt, F32), spec=_SPECIAL_SPEC.format(op="Mma") + " " + S_MMA,
                tier="quick")
