"""Conformance cases of Mma with an f16 / bf16 accumulator (D389), each quoting the Tile design:
"XIR lowers FP16/BF16 MMA accumulators through FP32 internal accumulation when
MmaPolicy::allow_reassociation is enabled, then rounds the result to the declared type." The
result is the f32 sum over the K products and the widened accumulator (any order), rounded once
to the accumulator's dtype; an accumulation rounded to the narrow dtype at every step is not
admitted. Quick: every input dtype with both accumulators, a long K (a TileLoop over K), K = 1,
a batch; full: special values."""

from __future__ import annotations

from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ops.tile_mma import Mma

__all__ = ["tile_mma_acc_cases"]

S_ACC = ('Tile design: "XIR lowers FP16/BF16 MMA accumulators through FP32 internal accumulation '
         'when MmaPolicy::allow_reassociation is enabled, then rounds the result to the declared '
         'type. Strict BF16 accumulation still rejects"')


def tile_mma_acc_cases(acc) -> None:
    from tilefoundry.conformance.catalog import build as c

    def case(cid: str, dt: DType, acc_dt: DType, batch: tuple, m: int, k: int, n: int,
             special: bool = False):
        def build():
            r = c.case_rng(cid)
            if special:
                a = c.fill_shape(c.special_values(dt), (*batch, m, k), r)
                b = c.fill_shape(c.special_values(dt), (*batch, k, n), r)
            else:
                a = c.random_float(r, (*batch, m, k), dt, -4.0, 4.0)
                b = c.random_float(r, (*batch, k, n), dt, -4.0, 4.0)
            z = c.random_float(r, (*batch, m, n), acc_dt, -16.0, 16.0)
            av, bv, cv = (c.make_var(nm, v.shape, t) for nm, v, t in
                          (("a", a, dt), ("b", b, dt), ("acc", z, acc_dt)))
            return c.make_module([av, bv, cv], c.make_call(Mma(True), av, bv, cv)), c.ENTRY, [a, b, z]
        return build

    for acc_dt in (DType.BF16, DType.F16):
        for dt in (DType.F32, DType.F16, DType.BF16, DType.FP8E4M3, DType.FP8E5M2):
            cid = f"spec/tile/mma/acc-{acc_dt}/{dt}"
            acc.add(cid, "tile", case(cid, dt, acc_dt, (), 4, 9, 5), ops=("Mma",),
                    dtypes=(dt, acc_dt), spec=S_ACC, tier="quick")
        for name, shape in (("long-k", ((), 3, 70, 4)), ("k1-batched", ((2,), 3, 1, 5))):
            cid = f"spec/tile/mma/acc-{acc_dt}-{name}/bf16"
            acc.add(cid, "tile", case(cid, DType.BF16, acc_dt, *shape), ops=("Mma",),
                    dtypes=(DType.BF16, acc_dt), spec=S_ACC, tier="quick")
            cid = f"special/tile/mma/acc-{acc_dt}/bf16"
        acc.add(cid, "tile", case(cid, DType.BF16, acc_dt, (), 3, 6, 4, special=True),
                ops=("Mma",), dtypes=(DType.BF16, acc_dt), spec=S_ACC, tier="full")
