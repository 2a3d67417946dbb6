"""Planted-bug candidates for meta-testing the oracle and the reducer (and for the tutorial).

``truncating_candidate(op_cls, kind)`` is the reference evaluator except that one op kind rounds
its bf16 results by **truncation** (dropping the low 16 bits of the f32 result) instead of to
nearest even — the classic bug of a hand-written bf16 conversion. ``buried_program(n_ops, seed)``
builds a deterministic bf16 elementwise DAG of ``n_ops`` ops with exactly one ``mul`` somewhere
in the middle (the other ops are add / sub / max / min / neg / abs / relu), so that a candidate
whose ``mul`` truncates fails only through that one op.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator

import ml_dtypes
import numpy as np

from tilefoundry.semantics.dtypes import from_bits, widen_to_f32
from tilefoundry.semantics.evaluator import families  # noqa: F401  (registers)
from tilefoundry.semantics.evaluator.registry import EVALUATORS, EvalCtx
from tilefoundry.semantics.formats import DType, dtype_of
from tilefoundry.semantics.ir import Call, Function, Module, Var
from tilefoundry.semantics.ops.math import Binary, BinaryKind, Unary, UnaryKind
from tilefoundry.semantics.types import TensorType

__all__ = ["buried_program", "truncating_candidate"]


def _truncate_bf16(f32: np.ndarray) -> np.ndarray:
    bits = np.asarray(f32, np.float32).view(np.uint32) >> np.uint32(16)
    return from_bits(bits.astype(np.uint16), DType.BF16)


@contextlib.contextmanager
def _patched(op_cls: type, kind: object) -> Iterator[None]:
    good = EVALUATORS[op_cls]

    def bad(ctx: EvalCtx, args: tuple):
        if getattr(ctx.op, "kind", None) is kind and all(
                isinstance(a, np.ndarray) and dtype_of(a) is DType.BF16 for a in args):
            a, b = (widen_to_f32(x) for x in args)
            fn = {BinaryKind.MUL: np.multiply, BinaryKind.ADD: np.add,
                  BinaryKind.SUB: np.subtract}[kind]
            with np.errstate(all="ignore"):
                return _truncate_bf16(fn(a, b))
        return good(ctx, args)

    EVALUATORS[op_cls] = bad
    try:
        yield
    finally:
        EVALUATORS[op_cls] = good


def truncating_candidate(op_cls: type = Binary, kind: object = BinaryKind.MUL):
    """A candidate callable ``(module, entry, inputs) -> outputs`` with the planted bug."""
    from tilefoundry.semantics.evaluator.core import evaluate

    def candidate(module: Module, entry: str, inputs: list):
        with _patched(op_cls, kind):
            return evaluate(module, entry, inputs)

    return candidate


_BIN = [BinaryKind.ADD, BinaryKind.SUB, BinaryKind.MAX, BinaryKind.MIN]
_UN = [UnaryKind.NEG, UnaryKind.ABS, UnaryKind.RELU]


def buried_program(n_ops: int = 30, seed: int = 0, n: int = 64,
                   n_inputs: int = 4) -> tuple[Module, str, list[np.ndarray]]:
    """A bf16 DAG of ``n_ops`` elementwise ops with one ``mul`` at position n_ops // 2; the
    result is the last op. Inputs are seeded random bf16 values in [-4, 4)."""
    rng = random.Random(seed)
    t = TensorType((n,), DType.BF16)
    params = [Var(f"x{i}", t) for i in range(n_inputs)]
    vals: list = list(params)
    for k in range(n_ops):
        if k == n_ops // 2:
            node = Call(Binary(BinaryKind.MUL), (vals[-1], vals[rng.randrange(len(vals))]))
        elif rng.random() < 0.7:
            a, b = vals[-1], vals[rng.randrange(len(vals))]
            node = Call(Binary(rng.choice(_BIN)), (a, b))
        else:
            node = Call(Unary(rng.choice(_UN)), (vals[-1],))
        vals.append(node)
    module = Module((Function("buried", tuple(params), vals[-1], None),))
    gen = np.random.default_rng(seed)
    inputs = [gen.uniform(-4, 4, n).astype(np.float32).astype(ml_dtypes.bfloat16)
              for _ in range(n_inputs)]
    return module, "buried", inputs




#: importable planted candidates (``tilefoundry.oracle.planted:truncating_mul``) for reproducers
truncating_mul = truncating_candidate(Binary, BinaryKind.MUL)
truncating_add = truncating_candidate(Binary, BinaryKind.ADD)
