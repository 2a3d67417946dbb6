"""Backends that are the reference evaluator except for one planted behaviour (issue 16).

Each backend patches one evaluator entry (or the mesh dispatch) for the duration of ``run``:

* **bugs** the quick tier must catch (one per blind spot the issue names):
  ``matmul_first_product_seed`` (the K fold seeded by the first product: −0 where every
  product is −0, D200), ``stale_partial_consumer`` (an op consuming a completed Partial reads
  its device's own partial — a consumer launched before the all-reduce finished),
  ``reshape_local_fortran`` (each device reshapes its block of a sharded value in Fortran
  order), ``cast_ties_away_bf16`` (f32 → bf16 rounds ties away from zero instead of to even),
  ``fold_as_pairwise`` (a ``fold_left`` / ``fold_right`` reduction computed as a balanced tree,
  the weaker ``ordered_tree``), ``ordered_as_lanes`` (an ``ordered_tree`` sum accumulated in
  two SIMD lanes over even / odd leaves: a permutation, the weaker ``unordered_tree``; a
  reversed fold would *not* be a bug — it is the right fold, an ordered tree),
  ``accumulate_in_bf16`` (a bf16 sum whose partial sums round to bf16),
  ``bf16_chain_in_f32`` (issue 33: a narrow backend claiming only Binary / Unary / Reduce / Cast /
  SoftMax / RMSNorm on f32 and bf16 that computes each bf16 elementwise chain in f32 and rounds
  once at its end — the most common fused-kernel bug; its twin ``bf16_chain_rounded`` rounds
  after every op and must pass),
  ``scan_exclusive_off_by_one`` (an exclusive Scan that returns the inclusive prefixes),
  ``scan_permuting`` (a Scan(add) over the fiber rotated by one, ``[1, 2, 3]`` read as
  ``[3, 1, 2]``: the reduction's permutation freedom wrongly inherited);
* **legal freedoms** it must pass: ``topk_index_order`` (TopK sorted=False in index order),
  ``partial_reverse_order`` (every Partial(sum) completed in reverse device order),
  ``matmul_fma_zeros`` (matmuls as the zeros-seeded fma chain), ``scan_ordered_tree_pairwise``
  (an ordered-tree float Scan(add) whose every prefix is the balanced pairwise tree of its own
  leaves, seed first: a regrouping that keeps the leaf order).

Load one as ``tests.conformance.planted_backends:<name>`` (each name is a factory).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator

import numpy as np

from tilefoundry.conformance.backend import (
    ALL_OVERFLOW,
    ALL_POLICIES,
    ALL_ROUNDING,
    Capabilities,
    ReferenceBackend,
)
from tilefoundry.semantics.dtypes import cast, from_bits
from tilefoundry.semantics.evaluator import core, families  # noqa: F401  (registers)
from tilefoundry.semantics.evaluator.mesh import Sharded
from tilefoundry.semantics.evaluator.registry import EVALUATORS, EvalCtx
from tilefoundry.semantics.formats import DType, dtype_of
from tilefoundry.semantics.ops import Cast, MatMul, Reduce, Reshape, Reshard, Scan, TopK
from tilefoundry.semantics.types import Partial, TensorType

Patch = Callable[[], contextlib.AbstractContextManager]


@contextlib.contextmanager
def _wrap_eval(op_cls: type, make: Callable[[Callable], Callable]) -> Iterator[None]:
    good = EVALUATORS[op_cls]
    EVALUATORS[op_cls] = make(good)
    try:
        yield
    finally:
        EVALUATORS[op_cls] = good


class Planted(ReferenceBackend):
    """A sharded output comes back as device 0's view of it (what a real backend hands back
    after its own gather), so a diverged replica is a wrong value, not a malformed output."""

    def __init__(self, name: str, patch: Patch):
        self.name = f"planted-{name}"
        self._patch = patch

    def run(self, compiled, inputs):
        with self._patch():
            out = super().run(compiled, inputs)
        return tuple(_device0(o) for o in out) if isinstance(out, tuple) else _device0(out)


def _device0(v):
    from tilefoundry.semantics.evaluator.mesh import unshard
    from tilefoundry.semantics.types import Broadcast

    if not isinstance(v, Sharded):
        return v
    lay = v.layout
    if all(isinstance(t, Broadcast) for t in lay.attrs):
        first = (0,) * len(lay.mesh.axis_extents)
        return np.ascontiguousarray(v.data[first]).reshape(tuple(lay.layout.axis_extents))
    return unshard(v)


def _ctx(ctx: EvalCtx, op) -> EvalCtx:
    return EvalCtx(op, ctx.call, ctx.out_type, [], ctx.args, ctx.dims)


# ---------------------------------------------------------------------------------------------
# bugs
# ---------------------------------------------------------------------------------------------
def _all_neg_zero_products(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    from tilefoundry.semantics.dtypes import widen_to_f32

    a32, b32 = widen_to_f32(a), widen_to_f32(b)
    with np.errstate(all="ignore"):
        p = a32[..., :, :, None] * b32[..., None, :, :]
    return ((p == 0) & np.signbit(p)).all(axis=-2) if a.shape[-1] else np.zeros((), bool)


def matmul_first_product_seed() -> Planted:
    def make(good):
        def bad(ctx, args):
            r = good(ctx, args)
            a, b = args
            if not (isinstance(a, np.ndarray) and dtype_of(a).is_float):
                return r
            neg = np.broadcast_to(_all_neg_zero_products(a, b), r.shape)
            nz = cast(np.full(r.shape, -0.0, np.float32), dtype_of(r))
            return np.where(neg, nz, r)
        return bad
    return Planted("matmul-first-product-seed", lambda: _wrap_eval(MatMul, make))


@contextlib.contextmanager
def _stale_partials() -> Iterator[None]:
    stale: dict[int, tuple[Sharded, np.ndarray]] = {}
    good_reshard, good_mesh = EVALUATORS[Reshard], core.eval_on_mesh

    def reshard(ctx, args):
        r = good_reshard(ctx, args)
        (x,) = args
        if isinstance(x, Sharded) and isinstance(r, Sharded) and \
                any(isinstance(t, Partial) for t in x.layout.attrs) and \
                r.data.shape == x.data.shape:
            stale[id(r)] = (r, x.data)  # each device still holds its own partial
        return r

    def on_mesh(ctx, impl, args):
        args = tuple(Sharded(a.layout, stale[id(a)][1]) if id(a) in stale and
                     stale[id(a)][0] is a else a for a in args)
        return good_mesh(ctx, impl, args)

    EVALUATORS[Reshard] = reshard
    core.eval_on_mesh = on_mesh
    try:
        yield
    finally:
        EVALUATORS[Reshard] = good_reshard
        core.eval_on_mesh = good_mesh


def stale_partial_consumer() -> Planted:
    return Planted("stale-partial-consumer", _stale_partials)


@contextlib.contextmanager
def _fortran_reshape() -> Iterator[None]:
    from tilefoundry.semantics.evaluator import sharding

    good = sharding.eval_on_mesh

    def on_mesh(ctx, impl, args):
        t = ctx.out_type
        if isinstance(ctx.op, Reshape) and isinstance(t, TensorType) and t.shard is not None \
                and isinstance(args[0], Sharded):
            x = args[0]
            ext = tuple(x.layout.mesh.axis_extents)
            local = tuple(t.shard.local_axis_extents())
            flat = x.data.reshape((*ext, -1))
            data = np.stack([np.reshape(flat[c], local, order="F")
                             for c in np.ndindex(*ext)]).reshape((*ext, *local))
            return Sharded(t.shard, np.ascontiguousarray(data))
        return good(ctx, impl, args)

    core.eval_on_mesh = on_mesh
    try:
        yield
    finally:
        core.eval_on_mesh = good


def reshape_local_fortran() -> Planted:
    return Planted("reshape-local-fortran", _fortran_reshape)


def cast_ties_away_bf16() -> Planted:
    def make(good):
        def bad(ctx, args):
            (x,) = args
            op = ctx.op
            r = good(ctx, args)
            if not (isinstance(x, np.ndarray) and dtype_of(x) is DType.F32 and
                    op.dtype is DType.BF16 and op.rounding == "nearest"):
                return r
            bits = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
            away = from_bits(((bits + 0x8000) >> 16).astype(np.uint16), DType.BF16)
            finite = np.isfinite(np.asarray(x, np.float32)) & \
                np.isfinite(np.asarray(away, np.float32))
            return np.where(finite, away, r)
        return bad
    return Planted("cast-ties-away-bf16", lambda: _wrap_eval(Cast, make))


def fold_as_pairwise() -> Planted:
    def make(good):
        def bad(ctx, args):
            op = ctx.op
            if op.policy in ("fold_left", "fold_right"):
                return good(_ctx(ctx, dataclasses.replace(op, policy="ordered_tree")), args)
            return good(ctx, args)
        return bad
    return Planted("fold-as-pairwise", lambda: _wrap_eval(Reduce, make))


def _one_axis_sum(ctx, x) -> int | None:
    """The reduced axis of an f32 / bf16 sum over exactly one axis of length >= 2, else None."""
    op = ctx.op
    if op.kind.value != "sum" or not isinstance(x, np.ndarray) or x.ndim == 0 or \
            dtype_of(x) not in (DType.F32, DType.BF16) or len(op.axes) != 1:
        return None
    ax = op.axes[0] % x.ndim
    return ax if x.shape[ax] >= 2 else None


def ordered_as_lanes() -> Planted:
    """SIMD-lane accumulation: lane 0 folds the even leaves, lane 1 the odd ones, then the lanes
    add — a permutation of the leaves, admitted by unordered_tree but not by ordered_tree."""
    from tilefoundry.semantics.dtypes import widen_to_f32

    def make(good):
        def bad(ctx, args):
            (x,) = args
            ax = _one_axis_sum(ctx, x)
            if ctx.op.policy != "ordered_tree" or ax is None:
                return good(ctx, args)
            r = good(ctx, args)
            w = np.moveaxis(widen_to_f32(x), ax, -1)
            with np.errstate(all="ignore"):
                lanes = [np.cumsum(w[..., j::2], axis=-1, dtype=np.float32)[..., -1]
                         for j in (0, 1)]
                s32 = (lanes[0] + lanes[1]).astype(np.float32)
            return cast(s32, dtype_of(x)).reshape(np.shape(r))
        return bad
    return Planted("ordered-as-lanes", lambda: _wrap_eval(Reduce, make))


def accumulate_in_bf16() -> Planted:
    """A bf16 sum accumulated in bf16 (every partial sum rounded to bf16), not in f32."""
    def make(good):
        def bad(ctx, args):
            (x,) = args
            ax = _one_axis_sum(ctx, x)
            if ax is None or dtype_of(x) is not DType.BF16:
                return good(ctx, args)
            r = good(ctx, args)
            w = np.moveaxis(x, ax, -1)
            acc = w[..., 0]
            with np.errstate(all="ignore"):
                for j in range(1, w.shape[-1]):  # the planted bug itself: a bf16 fold
                    acc = cast((np.asarray(acc, np.float32) + np.asarray(w[..., j], np.float32))
                               .astype(np.float32), DType.BF16)
            return np.asarray(acc).reshape(np.shape(r))
        return bad
    return Planted("accumulate-in-bf16", lambda: _wrap_eval(Reduce, make))


def scan_exclusive_off_by_one() -> Planted:
    """An exclusive Scan computed as the inclusive one: prefix i includes x[i]."""
    def make(good):
        def bad(ctx, args):
            op = ctx.op
            if op.inclusive:
                return good(ctx, args)
            return good(_ctx(ctx, dataclasses.replace(op, inclusive=True)), args)
        return bad
    return Planted("scan-exclusive-off-by-one", lambda: _wrap_eval(Scan, make))


def scan_permuting() -> Planted:
    """A Scan(add) over each fiber rotated by one ([x0, x1, x2] read as [x2, x0, x1]): the
    unordered-tree permission a scan must not inherit."""
    def make(good):
        def bad(ctx, args):
            (x,) = args
            op = ctx.op
            if op.combine != "add" or np.ndim(x) == 0 or x.shape[op.axis % x.ndim] < 2:
                return good(ctx, args)
            return good(ctx, (np.ascontiguousarray(np.roll(x, 1, axis=op.axis % x.ndim)),))
        return bad
    return Planted("scan-permuting", lambda: _wrap_eval(Scan, make))


# ---------------------------------------------------------------------------------------------
# legal freedoms
# ---------------------------------------------------------------------------------------------
def scan_ordered_tree_pairwise() -> Planted:
    """An ordered-tree float Scan(add) whose prefix j is the balanced pairwise tree over its
    own leaves (seed first, then x0..xj): order-preserving regrouping, which ordered_tree
    admits (the reference is the left fold)."""
    from tilefoundry.semantics.dtypes import widen_to_f32
    from tilefoundry.semantics.reductions import pairwise

    def make(good):
        def legal(ctx, args):
            (x,) = args
            op = ctx.op
            r = good(ctx, args)
            if op.policy != "ordered_tree" or op.combine != "add" or \
                    not dtype_of(x).is_float or np.ndim(x) == 0 or r.size == 0:
                return r
            ax = op.axis % x.ndim
            w = np.moveaxis(widen_to_f32(x), ax, -1)
            if op.seed is not None:
                sd = np.full((*w.shape[:-1], 1), op.seed, np.float32)
                w = np.concatenate([sd, w], -1)
            off = (1 if op.inclusive else 0) + (1 if op.seed is not None else 0)
            out = np.moveaxis(np.array(r, copy=True), ax, -1)
            with np.errstate(all="ignore"):
                for j in range(out.shape[-1]):
                    if j + off == 0:
                        continue  # exclusive[0] without a seed: the identity
                    out[..., j] = cast(np.asarray(pairwise(w[..., :j + off], np.add),
                                                  np.float32), dtype_of(x))
            return np.ascontiguousarray(np.moveaxis(out, -1, ax))
        return legal
    return Planted("scan-ordered-tree-pairwise", lambda: _wrap_eval(Scan, make))


def topk_index_order() -> Planted:
    def make(good):
        def legal(ctx, args):
            v, i = good(ctx, args)
            if ctx.op.sorted or np.ndim(v) == 0:
                return v, i
            ax = ctx.op.axis % np.ndim(v)
            order = np.argsort(i, axis=ax, kind="stable")
            return (np.ascontiguousarray(np.take_along_axis(v, order, ax)),
                    np.ascontiguousarray(np.take_along_axis(i, order, ax)))
        return legal
    return Planted("topk-index-order", lambda: _wrap_eval(TopK, make))


def partial_reverse_order() -> Planted:
    def make(good):
        def legal(ctx, args):
            (x,) = args
            if isinstance(x, Sharded):
                axes = tuple(i for i, t in enumerate(x.layout.attrs)
                             if isinstance(t, Partial) and t.reduction == "sum")
                if axes:
                    x = Sharded(x.layout, np.ascontiguousarray(np.flip(x.data, axis=axes)))
            return good(ctx, (x,))
        return legal
    return Planted("partial-reverse-order", lambda: _wrap_eval(Reshard, make))


def matmul_fma_zeros() -> Planted:
    from tilefoundry.semantics import matmul as mm

    def make(good):
        def legal(ctx, args):
            a, b = args
            if not (isinstance(a, np.ndarray) and dtype_of(a).is_float and a.shape[-1]):
                return good(ctx, args)
            r = good(ctx, args)
            a32, b32 = mm.widen(a, dtype_of(a)), mm.widen(b, dtype_of(b))
            shape = (*np.broadcast_shapes(a.shape[:-2], b.shape[:-2]), a.shape[-2], b.shape[-1])
            return mm.round_to(mm._mm_f32(a32, b32, shape, True), dtype_of(r))
        return legal
    return Planted("matmul-fma-zeros", lambda: _wrap_eval(MatMul, make))


BUGS = {"matmul_first_product_seed": ("MatMul",), "stale_partial_consumer": ("Reshard",),
        "reshape_local_fortran": ("Reshape",), "cast_ties_away_bf16": ("Cast",),
        "fold_as_pairwise": ("Reduce",), "ordered_as_lanes": ("Reduce",),
        "accumulate_in_bf16": ("Reduce",), "scan_exclusive_off_by_one": ("Scan",),
        "scan_permuting": ("Scan",),
        "nan_quieting_copies": ("Transpose", "Reshape", "Slice", "Concat")}
LEGAL = {"topk_index_order": ("TopK",), "partial_reverse_order": ("Reshard",),
         "matmul_fma_zeros": ("MatMul",), "scan_ordered_tree_pairwise": ("Scan",)}


def max_min_zero_sign_free() -> Planted:
    """A legal freedom under ``nsz`` only (issue 32): max / min of two zeros returns the first
    operand's zero (x86 maxps / minps do), not +0 / -0."""
    from tilefoundry.semantics.ops.math import Binary, BinaryKind

    def make(good):
        def bad(ctx, args):
            r = good(ctx, args)
            if ctx.op.kind not in (BinaryKind.MAX, BinaryKind.MIN):
                return r
            a, b = args
            if not (isinstance(a, np.ndarray) and dtype_of(a).is_float):
                return r
            fa, fb = cast(a, DType.F32), cast(b, DType.F32)
            both0 = np.broadcast_to((fa == 0) & (fb == 0), np.shape(r))
            return np.where(both0, np.broadcast_to(a, np.shape(r)), r)
        return bad
    return Planted("max-min-zero-sign-free", lambda: _wrap_eval(Binary, make))


# ---------------------------------------------------------------------------------------------
# issue 33: a fused backend that keeps bf16 intermediates in f32
# ---------------------------------------------------------------------------------------------
#: what the author's narrow backend of issue 33 claims: these ops in f32 and bf16, nothing else
CHAIN_CAPS = Capabilities(ops=frozenset({"Binary", "Unary", "Reduce", "Cast", "SoftMax",
                                         "RMSNorm"}),
                          dtypes=frozenset({DType.F32, DType.BF16}), policies=ALL_POLICIES,
                          overflow_modes=ALL_OVERFLOW, rounding_modes=ALL_ROUNDING)


def widen_bf16_chains(module, entry: str, round_each: bool, extra: tuple = (),
                      narrow: tuple = (DType.BF16,)):
    """``module`` with every bf16 elementwise op (a Binary or Unary with a bf16 result, and the
    op classes ``extra``; dtypes ``narrow``) computed in f32: its narrow operands are widened
    (exactly), a chain of such ops stays in f32, and the chain's value rounds to its dtype once
    where something else consumes it (another op, a Cast, the output) — a fused kernel that
    keeps its intermediates in registers. ``round_each``: the fixed twin, rounding each op's
    f32 result at once (the HIR rule: widen, operate, round once per op)."""
    from tilefoundry.semantics.ir import Call, Function, Module, Tuple, TupleGetItem
    from tilefoundry.semantics.ops import Binary, Unary
    from tilefoundry.semantics.typeinfer.core import Session
    from tilefoundry.semantics.typeinfer.functions import infer_module

    m = infer_module(module, Session())
    fn = m[entry]
    memo: dict[int, tuple] = {}
    fusable = (Binary, Unary, *extra)

    def to(dt, e):
        return Call(Cast(dt), (e,))

    def dtype(e):
        t = e.checked_type if e.has_type else None
        return t.dtype if isinstance(t, TensorType) else None

    def plain(e):  # the value as its own dtype: a wide chain rounds here, once
        new, wide = visit(e)
        return to(wide, new) if wide is not None else new

    def visit(e):
        if id(e) in memo:
            return memo[id(e)]
        dt = dtype(e)
        if isinstance(e, Call) and isinstance(e.op, fusable) and dt in narrow:
            args = []
            for a in e.args:
                new, wide = visit(a)
                args.append(new if wide is not None else to(DType.F32, new)
                            if dtype(a) in narrow else new)
            out = Call(e.op, tuple(args))
            res = (to(DType.F32, to(dt, out)) if round_each else out, dt)
        elif isinstance(e, Call):
            res = (Call(e.op, tuple(plain(a) for a in e.args)), None)
        elif isinstance(e, Tuple):
            res = (Tuple(tuple(plain(f) for f in e.fields)), None)
        elif isinstance(e, TupleGetItem):
            res = (TupleGetItem(plain(e.tuple_value), e.index), None)
        else:
            res = (e, None)
        memo[id(e)] = res
        return res

    body = plain(fn.body)
    return Module((Function(fn.name, fn.params, body, None),
                   *(f for f in m.functions if f.name != fn.name)))


class ChainInF32(ReferenceBackend):
    """Claims ``CHAIN_CAPS``; runs ``widen_bf16_chains`` of the program on the reference."""

    def __init__(self, round_each: bool):
        self.round_each = round_each
        self.name = "planted-bf16-chain-" + ("rounded" if round_each else "in-f32")

    def capabilities(self):
        return CHAIN_CAPS

    def compile(self, module, entry):
        return widen_bf16_chains(module, entry, self.round_each), entry


def bf16_chain_in_f32() -> ChainInF32:
    return ChainInF32(round_each=False)


def bf16_chain_rounded() -> ChainInF32:
    return ChainInF32(round_each=True)


def compare_as_not_complement() -> Planted:
    """A float ``a < b`` computed as ``!(a >= b)`` (and ``<=`` / ``>`` / ``>=`` likewise): true
    where an operand is NaN — a select on it picks the wrong operand (issue 33: 0 of 2,000
    generated programs had a float comparison in a Select's condition)."""
    from tilefoundry.semantics.ops.math import Binary, BinaryKind

    flip = {BinaryKind.LT: np.greater_equal, BinaryKind.LE: np.greater,
            BinaryKind.GT: np.less_equal, BinaryKind.GE: np.less}

    def make(good):
        def bad(ctx, args):
            r = good(ctx, args)
            op = flip.get(ctx.op.kind)
            a, b = args
            if op is None or not (isinstance(a, np.ndarray) and dtype_of(a).is_float):
                return r
            with np.errstate(invalid="ignore"):
                return np.logical_not(op(cast(a, DType.F32), cast(b, DType.F32)))
        return bad
    return Planted("compare-as-not-complement", lambda: _wrap_eval(Binary, make))


def _quieted(r):
    """``r`` with every float NaN made the format's canonical quiet NaN of positive sign (what a
    copy through an f32 register and the integer narrowing algorithm produces)."""
    if not (isinstance(r, np.ndarray) and dtype_of(r).is_float):
        return r
    dt = dtype_of(r)
    with np.errstate(invalid="ignore"):
        nan = np.isnan(cast(r, DType.F32))
    if not nan.any():
        return r
    return np.where(nan, cast(np.array(np.nan, np.float32), dt), r).astype(r.dtype)


def nan_quieting_copies() -> Planted:
    """Transpose / Reshape / Slice / Concat that return every NaN as the canonical quiet NaN:
    the copy loses the payload and sign, which "load/store copying preserve the encoded value
    ... preserve NaN payloads" forbids (issue 37: such a backend used to PASS)."""
    from tilefoundry.semantics.ops import Concat, Slice, Transpose

    @contextlib.contextmanager
    def patch():
        with contextlib.ExitStack() as st:
            for cls in (Transpose, Reshape, Slice, Concat):
                st.enter_context(_wrap_eval(cls, lambda good: lambda ctx, args:
                                            _quieted(good(ctx, args))))
            yield
    return Planted("nan-quieting-copies", patch)
