"""Cast throughput, side by side with the peers in one run (not a test; no assertions).

    .venv/bin/python benchmarks/bench_cast.py [--n 10000000] [--repeat 3]

Prints the best-of-``repeat`` wall time of 10^7 f32 → bf16 and f32 → fp8e4m3 casts for
tilefoundry (bit-exact, vectorized numpy), ml_dtypes (C++ astype) and torch CPU (``.to``), with
ratios, and the time of the exhaustive 2^16 sweep (every f16 and bf16 pattern to every narrower
format, both overflow modes).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from tilefoundry.semantics.dtypes import FORMATS, DType, cast, from_bits


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=10_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    x = rng.standard_normal(args.n).astype(np.float32) * np.float32(100)
    try:
        import torch

        tx = torch.from_numpy(x)
        torch_types = {DType.BF16: torch.bfloat16, DType.FP8E4M3: torch.float8_e4m3fn}
        torch.set_num_threads(2)
    except ImportError:  # pragma: no cover
        torch = None
    print(f"n = {args.n:,} f32 values, best of {args.repeat}")
    for dst in (DType.BF16, DType.FP8E4M3):
        ours = best(lambda dst=dst: cast(x, dst), args.repeat)
        ml = best(lambda dst=dst: x.astype(FORMATS[dst].storage), args.repeat)
        line = (f"f32 -> {dst!s:8}: tilefoundry {ours:.3f} s | ml_dtypes {ml:.3f} s "
                f"(tilefoundry/ml_dtypes = {ours / ml:.1f}x)")
        if torch is not None:
            tt = best(lambda dst=dst: tx.to(torch_types[dst]), args.repeat)
            line += f" | torch {tt:.3f} s (tilefoundry/torch = {ours / tt:.1f}x)"
        print(line)

    def sweep16():
        for src in (DType.F16, DType.BF16):
            pats = from_bits(np.arange(1 << 16, dtype=np.uint32).astype(np.uint16), src)
            for dst in (DType.F16, DType.BF16, DType.FP8E4M3, DType.FP8E5M2, DType.F8E8M0):
                if dst is not src:
                    for ov in ("nonfinite", "saturate"):
                        cast(pats, dst, overflow=ov)

    from tilefoundry.semantics import dtypes

    dtypes._table.cache_clear()
    cold = best(sweep16, 1)
    print(f"exhaustive 2^16 sweep (f16 and bf16 -> 4 formats x 2 overflow modes, cold): "
          f"{cold:.3f} s")


if __name__ == "__main__":
    main()
