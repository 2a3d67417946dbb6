"""A narrow test backend (issue 16, deliverable 5): it declares only Binary / Unary / Cast on f32
and bf16 and runs the reference evaluator.

``correct()`` is that backend as it should be. ``truncating()`` plants one realistic bug: its
f32 -> bf16 Cast **truncates** (drops the low 16 bits of the f32 pattern: round toward zero)
instead of rounding to nearest even — the classic hand-written bf16 conversion. Non-finite
sources (NaN, inf) convert as the reference does, so the bug is the rounding alone.
``misnamed_op()`` / ``misnamed_dtype()`` declare a capability name that does not exist (the
runner must reject them before any case runs, naming the closest valid name)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numpy as np

from tilefoundry.conformance.backend import ALL_FEATURES, ALL_OVERFLOW, ALL_ROUNDING, Capabilities
from tilefoundry.semantics.dtypes import from_bits
from tilefoundry.semantics.evaluator import families  # noqa: F401  (registers the evaluators)
from tilefoundry.semantics.evaluator.core import evaluate
from tilefoundry.semantics.evaluator.registry import EVALUATORS, EvalCtx
from tilefoundry.semantics.formats import DType, dtype_of
from tilefoundry.semantics.ops.tensor import Cast

NARROW = Capabilities(ops=frozenset({"Binary", "Unary", "Cast"}),
                      dtypes=frozenset({DType.F32, DType.BF16}), overflow_modes=ALL_OVERFLOW,
                      rounding_modes=ALL_ROUNDING, features=ALL_FEATURES)


def truncate_to_bf16(x: np.ndarray) -> np.ndarray:
    """f32 -> bf16 by dropping the low 16 bits (round toward zero), vectorized."""
    bits = np.asarray(x, np.float32).view(np.uint32) >> np.uint32(16)
    return from_bits(bits.astype(np.uint16).reshape(np.shape(x)), DType.BF16)


@contextlib.contextmanager
def _truncating_cast() -> Iterator[None]:
    good = EVALUATORS[Cast]

    def bad(ctx: EvalCtx, args: tuple):
        out = good(ctx, args)
        x = args[0]
        if ctx.op.dtype is DType.BF16 and isinstance(x, np.ndarray) and \
                dtype_of(x) is DType.F32:
            return np.where(np.isfinite(x), truncate_to_bf16(x), out).astype(out.dtype)
        return out

    EVALUATORS[Cast] = bad
    try:
        yield
    finally:
        EVALUATORS[Cast] = good


class NarrowBackend:
    name = "narrow"

    def capabilities(self) -> Capabilities:
        return NARROW

    def compile(self, module, entry):
        return module, entry

    def run(self, compiled, inputs):
        module, entry = compiled
        return evaluate(module, entry, inputs)


class TruncatingCastBackend(NarrowBackend):
    name = "narrow-truncating-cast"

    def run(self, compiled, inputs):
        with _truncating_cast():
            return super().run(compiled, inputs)


class _Misnamed(NarrowBackend):
    def __init__(self, caps: Capabilities):
        self.caps = caps

    def capabilities(self) -> Capabilities:
        return self.caps


def correct() -> NarrowBackend:
    return NarrowBackend()


def truncating() -> TruncatingCastBackend:
    return TruncatingCastBackend()


def misnamed_op() -> NarrowBackend:
    return _Misnamed(Capabilities(ops=frozenset({"Binary", "Unray", "Cast"}),
                                  dtypes=NARROW.dtypes))


def misnamed_dtype() -> NarrowBackend:
    return _Misnamed(Capabilities(ops=NARROW.ops,
                                  dtypes=frozenset({DType.F32, "bf61"})))  # type: ignore[arg-type]


def misspelled_kinds() -> NarrowBackend:
    """Issue 22's silent green: ``{"Binary.ad", "Redcue"}`` claimed nothing, so every case was
    NOT_SUPPORTED and the run passed."""
    return _Misnamed(Capabilities(ops=frozenset({"Binary.ad", "Redcue"}), dtypes=NARROW.dtypes))


def misnamed_policy() -> NarrowBackend:
    return _Misnamed(Capabilities(ops=NARROW.ops, dtypes=NARROW.dtypes,
                                  policies=frozenset({"fold-left"})))
