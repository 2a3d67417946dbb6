"""Reference-evaluator throughput, side by side with the peers in one run (not a test).

    .venv/bin/python benchmarks/bench_evaluator.py [--n 16777216] [--repeat 3] [--quick]

(a) An 8-op bf16 elementwise chain built as a HIR Module and run through ``evaluate``:

        t1 = add(x, y)   t2 = mul(t1, y)   t3 = sub(t2, x)   t4 = abs(t3)
        t5 = sqrt(t4)    t6 = max(t5, x)   t7 = div(t6, y)   t8 = neg(t7)

    reported as elements/s per op (``n * 8 / time``), next to the same chain in torch bf16 on CPU
    and in numpy f32 (a second peer; f32, so not the same numbers), as ratios. One bf16
    ``Unary(exp)`` (a transcendental: float64 libm, one rounding) is timed on its own.
(b) bf16 RMSNorm over the last axis of a 4096 x 4096 tensor through ``evaluate`` (when the
    evaluator has an RMSNorm implementation; otherwise a "not implemented yet" line), next to
    ``torch.nn.functional.rms_norm`` in bf16 on CPU, as rows/s and a ratio.

Times are the median of ``--repeat`` runs (the machine is shared; medians are steadier than
minima across runs). torch runs with ``--torch-threads`` threads (default 1: the reference is
single-threaded numpy). Bit-exactness is not checked here; the tests do that.
"""

from __future__ import annotations

import argparse
import statistics
import time

import ml_dtypes
import numpy as np

from tilefoundry.semantics.evaluator.core import evaluate
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ir import Call, Function, Module, Var
from tilefoundry.semantics.ops import Binary, BinaryKind, Unary, UnaryKind
from tilefoundry.semantics.types import TensorType

BF16 = DType.BF16
BK, UK = BinaryKind, UnaryKind
#: The chain, in order: (op kind, operand names); "t" is the previous result.
CHAIN = (
    (BK.ADD, ("x", "y")), (BK.MUL, ("t", "y")), (BK.SUB, ("t", "x")), (UK.ABS, ("t",)),
    (UK.SQRT, ("t",)), (BK.MAX, ("t", "x")), (BK.DIV, ("t", "y")), (UK.NEG, ("t",)),
)
N_OPS = len(CHAIN)


def median_time(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


# ---------------------------------------------------------------------------------------------
# programs
# ---------------------------------------------------------------------------------------------
def chain_module(n: int) -> Module:
    x = Var("x", TensorType((n,), BF16))
    y = Var("y", TensorType((n,), BF16))
    env = {"x": x, "y": y}
    t = None
    for kind, names in CHAIN:
        args = tuple(t if a == "t" else env[a] for a in names)
        op = Binary(kind) if isinstance(kind, BinaryKind) else Unary(kind)
        t = Call(op, args)
    return Module((Function("chain", (x, y), t, None),))


def exp_module(n: int) -> Module:
    x = Var("x", TensorType((n,), BF16))
    return Module((Function("exp1", (x,), Call(Unary(UK.EXP), (x,)), None),))


def rmsnorm_module(rows: int, cols: int, eps: float):
    from tilefoundry.semantics.ops.nn import RMSNorm

    x = Var("x", TensorType((rows, cols), BF16))
    w = Var("w", TensorType((cols,), BF16))
    return Module((Function("rms", (x, w), Call(RMSNorm(eps=eps), (x, w)), None),))


def rmsnorm_registered() -> bool:
    from tilefoundry.semantics.evaluator import families  # noqa: F401
    from tilefoundry.semantics.evaluator.registry import EVALUATORS
    from tilefoundry.semantics.ops.nn import RMSNorm

    return RMSNorm in EVALUATORS


# ---------------------------------------------------------------------------------------------
# peers
# ---------------------------------------------------------------------------------------------
def torch_chain(torch, x, y):
    t = torch.add(x, y)
    t = torch.mul(t, y)
    t = torch.sub(t, x)
    t = torch.abs(t)
    t = torch.sqrt(t)
    t = torch.maximum(t, x)
    t = torch.div(t, y)
    return torch.neg(t)


def numpy_chain(x, y):
    t = np.add(x, y)
    t = np.multiply(t, y)
    t = np.subtract(t, x)
    t = np.abs(t)
    t = np.sqrt(t)
    t = np.maximum(t, x)
    t = np.divide(t, y)
    return np.negative(t)


# ---------------------------------------------------------------------------------------------
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1 << 24, help="chain length (default 2^24)")
    ap.add_argument("--rows", type=int, default=4096)
    ap.add_argument("--cols", type=int, default=4096)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--torch-threads", type=int, default=1)
    ap.add_argument("--quick", action="store_true", help="smoke sizes (n = 2^16, 256 x 256)")
    args = ap.parse_args()
    if args.quick:
        args.n, args.rows, args.cols, args.repeat = 1 << 16, 256, 256, 1
    try:
        import torch

        torch.set_num_threads(args.torch_threads)
    except ImportError:  # pragma: no cover
        torch = None

    rng = np.random.default_rng(args.seed)
    n = args.n
    xf = rng.standard_normal(n).astype(np.float32)
    yf = (rng.standard_normal(n).astype(np.float32) + np.float32(3.0))
    x, y = xf.astype(ml_dtypes.bfloat16), yf.astype(ml_dtypes.bfloat16)
    x32, y32 = x.astype(np.float32), y.astype(np.float32)
    rows: list[tuple[str, str, float, str]] = []  # (case, impl, seconds, figure)

    chain = chain_module(n)
    evaluate(chain, "chain", [x, y])  # warm-up: imports, type inference, cast tables
    t_ours = median_time(lambda: evaluate(chain, "chain", [x, y]), args.repeat)
    rows.append(("chain8 bf16", "tilefoundry evaluate", t_ours,
                 f"{n * N_OPS / t_ours / 1e6:8.1f} M el/s/op"))
    if torch is not None:
        tx, ty = torch.from_numpy(x.view(np.int16)).view(torch.bfloat16), \
            torch.from_numpy(y.view(np.int16)).view(torch.bfloat16)
        torch_chain(torch, tx, ty)
        t_torch = median_time(lambda: torch_chain(torch, tx, ty), args.repeat)
        rows.append(("chain8 bf16", "torch CPU bf16", t_torch,
                     f"{n * N_OPS / t_torch / 1e6:8.1f} M el/s/op"))
    numpy_chain(x32, y32)
    t_np = median_time(lambda: numpy_chain(x32, y32), args.repeat)
    rows.append(("chain8 f32", "numpy f32", t_np, f"{n * N_OPS / t_np / 1e6:8.1f} M el/s/op"))

    ex = exp_module(n)
    evaluate(ex, "exp1", [x])
    t_exp = median_time(lambda: evaluate(ex, "exp1", [x]), args.repeat)
    rows.append(("exp bf16", "tilefoundry evaluate", t_exp, f"{n / t_exp / 1e6:8.1f} M el/s"))
    if torch is not None:
        t_texp = median_time(lambda: torch.exp(tx), args.repeat)
        rows.append(("exp bf16", "torch CPU bf16", t_texp, f"{n / t_texp / 1e6:8.1f} M el/s"))

    r, c, eps = args.rows, args.cols, 1e-6
    rms_line = None
    xr = rng.standard_normal((r, c)).astype(np.float32).astype(ml_dtypes.bfloat16)
    wr = (np.float32(1.0) + np.float32(0.1) * rng.standard_normal(c).astype(np.float32))
    wr = wr.astype(ml_dtypes.bfloat16)
    t_rms = None
    if not rmsnorm_registered():
        rms_line = "RMSNorm: not implemented yet (no evaluator registered for RMSNorm)"
    else:
        rm = rmsnorm_module(r, c, eps)
        try:
            evaluate(rm, "rms", [xr, wr])
        except Exception as e:  # an implementation in progress: report, do not abort
            rms_line = f"RMSNorm: not implemented yet ({type(e).__name__}: {e})"
        else:
            t_rms = median_time(lambda: evaluate(rm, "rms", [xr, wr]), args.repeat)
            rows.append((f"RMSNorm {r}x{c} bf16", "tilefoundry evaluate", t_rms,
                         f"{r / t_rms:10.0f} rows/s"))
    if torch is not None:
        txr = torch.from_numpy(xr.view(np.int16)).view(torch.bfloat16)
        twr = torch.from_numpy(wr.view(np.int16)).view(torch.bfloat16)
        f = torch.nn.functional.rms_norm
        f(txr, (c,), twr, eps)
        t_trms = median_time(lambda: f(txr, (c,), twr, eps), args.repeat)
        rows.append((f"RMSNorm {r}x{c} bf16", "torch CPU bf16", t_trms,
                     f"{r / t_trms:10.0f} rows/s"))

    print(f"n = {n:,} elements (chain: add mul sub abs sqrt max div neg), RMSNorm {r} x {c}, "
          f"median of {args.repeat}, torch threads = {args.torch_threads}, numpy single-threaded")
    print(f"{'case':<22} {'implementation':<22} {'time (ms)':>9}  figure")
    for case, impl, t, fig in rows:
        print(f"{case:<22} {impl:<22} {t * 1e3:9.1f}  {fig}")
    print("ratios (time / time; > 1 means tilefoundry is slower):")
    by = {(case, impl): t for case, impl, t, _ in rows}
    ours = "tilefoundry evaluate"
    rms_case = f"RMSNorm {r}x{c} bf16"
    for case, peer in (("chain8 bf16", "torch CPU bf16"), ("chain8 bf16", "numpy f32"),
                       ("exp bf16", "torch CPU bf16"), (rms_case, "torch CPU bf16")):
        peer_case = "chain8 f32" if peer == "numpy f32" else case
        if (case, ours) in by and (peer_case, peer) in by:
            print(f"  {case:<22} tilefoundry / {peer:<15} = "
                  f"{by[(case, ours)] / by[(peer_case, peer)]:6.2f}x")
    if rms_line:
        print(rms_line)


if __name__ == "__main__":
    main()
