"""SMT semantics of the HIR ops the ``lower`` pass consumes (an elaborated, canonicalized entry).

The reference's definitions (``semantics/evaluator``, ``semantics/reductions``), transcribed with
``validate.encode``'s value encodings; the table ``HIR_OPS`` names the encoded op classes, and
any other op is ``Unsupported("unsupported op <Class>")``:

* ``Binary`` / ``Unary``: f32 IEEE; a low-precision float widens exactly to f32, computes, and
  rounds once to its dtype (``dtypes.apply_lowp``); comparisons widen to f32; integers wrap.
  Transcendental ``Unary`` kinds are the correctly rounded function in the operand's dtype: the
  same uninterpreted function as the kernel IR's ``math`` (both are that one definition).
* nn ``ReLU``: ``Unary(relu)`` (the evaluator's own definition of it). nn ``LayerNorm`` /
  ``RMSNorm``: the reference's exact float64 algorithm, step for step (``validate/hir_nn.py``).
  nn ``Sigmoid`` / ``Tanh`` / ``Silu`` / ``Gelu``: their ``math`` function (uninterpreted, as
  ``exp``); nn ``SoftMax``: its ULP contract's f64 formula over an uninterpreted ``exp``, a
  counterexample judged by the contract (``hir_nn``, D523).
* ``Cast``: ``encode.cast``. ``Select``: an ``If`` per element (bits move unchanged).
* ``Bitcast`` (f32 <-> u32, D522): the bits a value entered with (an input, a constant, a
  u32 -> f32 bitcast; through ``If``), NaN payloads included; a computed f32 value's bits are
  ``fp.to_ieee_bv`` with a NaN read as the positive quiet NaN (recorded as an abstraction).
* ``Reduce`` (``reductions._reduce_fibers``): lanes in lexicographic order of the reduced
  axes; floats widened to f32; sum / mean by the policy (trees: the balanced pairwise tree;
  ``unordered_tree``: its admitted set, abstracted as in ``symexec``), mean divided by f32(n),
  one rounding; max / min / abs_max NaN-propagating with -0 < +0; integers in their dtype;
  bool max / min are or / and (any / all), in every op below too (``Scan``, ``MaskedScan`` /
  ``SegmentedScan``, ``SeededReduce`` / ``MaskedReduce``).
* ``Scan`` (``reductions.scan``): each inclusive prefix is the reduction of its own leaves (the
  seed first, if any) under the policy — ``fold_left`` the left chain, ``ordered_tree`` a
  choice among the prefix's order-preserving regroupings, one per prefix (``scan_admits``);
  floats widened to f32, each output rounded once; exclusive shifts in the seed / identity.
* ``MaskedScan`` / ``SegmentedScan`` (``scan_flags.flagged_scan``): its loop, an ``If`` per
  flag; a float add under ``ordered_tree`` is unsupported (its admitted set depends on flags).
* ``CustomReduce`` (``reducers.custom_reduce``) under a fold: the seed, then each lifted
  contribution merged in, every declared expression one f32 operation (``_reducer_expr``);
  under a tree policy one choice among every merge tree of ``[seed, lift(x0), ...]`` (D537;
  more than 256 trees: unsupported).
* ``MatMul`` (any rank >= 2, batch dims broadcast as the reference's): f32 products
  (operands widened), the K-order left fold from +0
  (``semantics.matmul``: ``matmul(a, b)`` is ``mma(a, b, zeros)``, D200), one rounding;
  integers in i64, wrapped back.
* ``Mma`` (tile family, D516): the ``MatMul`` fold seeded by the accumulator widened to f32
  instead of +0, rounded once to the accumulator's dtype; batch dims shared.
* ``Sort`` / ``TopK`` and ``CustomReduce`` with the Top-K merge reducer: ``validate/
  hir_order.py`` (the total order's ranks, D514; the merge's region form, D515).
* Data movement (``MOVEMENT``: the op classes whose fact ``COPIES_BITS`` holds, but Select
  — encoded as a choice — and Bitcast — a reinterpretation: Reshape, Transpose, Slice, Concat,
  Stack, Gather, InsertSlice, CacheUpdate): the reference
  evaluator's own implementation run on *index arrays* (each operand element's position in the
  concatenation of the operands, int64) gives, per output element, the operand element it
  copies; the output is those terms, moved unchanged (bit-exact, NaN payloads included, D478).
  An integer operand whose terms are all constants (an index in an unrolled loop) is passed
  as its value; an implementation that does not return such an index map (it computes, fills
  or converts) is "unsupported".
* Value-independent ops (``CONSTANT_OPS``: ShapeOf, Rank, Zeros): the reference evaluator on
  zero operands of the operands' shapes; the result is constants.
* ``Tuple`` / ``TupleGetItem``: a tuple of encoded values / one of them (a tuple result is
  compared output by output, in the kernel IR's output order).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import z3

from tilefoundry.compiler import kir
from tilefoundry.semantics.formats import dtype_of
from tilefoundry.semantics.ir import (
    Call,
    Constant,
    Function,
    GridRegionExpr,
    Tuple,
    TupleGetItem,
    Var,
)
from tilefoundry.semantics.ops import (
    ALL_OPS,
    Binary,
    Bitcast,
    Cast,
    Gather,
    MaskedReduce,
    MaskedScan,
    MatMul,
    Mma,
    Rank,
    Reduce,
    ReLU,
    Reshard,
    Scan,
    SeededReduce,
    SegmentedScan,
    Select,
    ShapeOf,
    Unary,
    Zeros,
)
from tilefoundry.semantics.ops.math import UnaryKind
from tilefoundry.semantics.types import ShardLayout
from tilefoundry.validate import encode as E
from tilefoundry.validate.choices import abstracted
from tilefoundry.validate.encode import Unsupported
from tilefoundry.validate.hir_custom import CUSTOM_OPS
from tilefoundry.validate.hir_dynamic import gather, scalar_positions
from tilefoundry.validate.hir_nn import NN_OPS
from tilefoundry.validate.hir_order import ORDER_OPS, is_topk_reduce, topk_reduce
from tilefoundry.validate.symexec import _vmap, bitcast, reduce_lanes

__all__ = ["CONSTANT_OPS", "HIR_OPS", "MOVEMENT", "LocalCall", "call_op", "run_hir"]

Val = tuple[np.ndarray, str]  # (object array of terms, kernel-IR dtype name)
_MATH = {"exp", "log", "exp2", "log2", "rsqrt"}


def _lowp(dt: str) -> bool:
    return kir.is_float(dt) and dt != "f32"


def _binary(op: Binary, args: list[Val], abstr: set[str]) -> Val:
    (a, dt), (b, _) = args
    kind = op.kind.value
    if kind in ("and", "or", "xor"):
        return _vmap(E.binary(kind, "bool"), a, b), "bool"
    if kind in kir.COMPARISONS:
        if kir.is_float(dt) and dt != "f32":
            a = _vmap(lambda x: E.widen(x, dt, "f32"), a)
            b = _vmap(lambda x: E.widen(x, dt, "f32"), b)
        return _vmap(E.binary(kind, "f32" if kir.is_float(dt) else dt), a, b), "bool"
    if _lowp(dt):
        fn = E.binary(kind, "f32")
        return _vmap(lambda x, y: E.round_to(fn(E.widen(x, dt, "f32"), E.widen(y, dt, "f32")),
                                             "f32", dt, "nonfinite"), a, b), dt
    return _vmap(E.binary(kind, dt), a, b), dt


def _relu(op: ReLU, args: list[Val], abstr: set[str]) -> Val:
    """nn ``ReLU`` is ``Unary(relu)`` (evaluator/nn.py: "ReLU is Unary(relu) ... Exact")."""
    return _unary(Unary(UnaryKind.RELU), args, abstr)


def _unary(op: Unary, args: list[Val], abstr: set[str]) -> Val:
    (x, dt), = args
    kind = op.kind.value
    if kind == "logical_not":
        return _vmap(z3.Not, x), dt
    if kind in _MATH:
        if not kir.is_float(dt):
            raise Unsupported(f"unsupported op Unary.{kind} on {dt}")
        abstr.add(f"math.{kind} (uninterpreted)")
        return _vmap(E.math_apply(kind, dt), x), dt
    if _lowp(dt):
        fn = E.unary(kind, "f32")
        return _vmap(lambda v: E.round_to(fn(E.widen(v, dt, "f32")), "f32", dt, "nonfinite"),
                     x), dt
    return _vmap(E.unary(kind, dt), x), dt


def _cast(op: Cast, args: list[Val], abstr: set[str]) -> Val:
    (x, dt), = args
    to = op.dtype.value
    return _vmap(lambda v: E.cast(v, dt, to, op.overflow, op.rounding, abstr), x), to


def _select(op: Select, args: list[Val], abstr: set[str]) -> Val:
    (c, _), (a, dt), (b, _) = args
    return _vmap(z3.If, c, a, b), dt


def _bitcast(op: Bitcast, args: list[Val], abstr: set[str]) -> Val:
    """f32 <-> u32, bit-exact where the bits are known (``symexec.bitcast``, D522)."""
    (x, dt), = args
    return bitcast(x, dt, op.dtype.value, abstr), op.dtype.value


def _reduce(op: Reduce, args: list[Val], abstr: set[str]) -> Val:
    (x, dt), = args
    kind = op.kind.value
    axes = sorted(a % x.ndim for a in op.axes) if x.ndim else []
    keep = [i for i in range(x.ndim) if i not in axes]
    batch = tuple(x.shape[i] for i in keep)
    f = np.transpose(x, keep + axes).reshape(math.prod(batch),
                                             math.prod(x.shape[a] for a in axes))
    keep_shape = tuple(1 if i in axes else n for i, n in enumerate(x.shape))
    n = f.shape[1]
    acc = "f32" if kir.is_float(dt) else dt
    out = np.empty(f.shape[0], object)
    if n == 0:  # the reference's identity of the kind in the operand's own dtype
        from tilefoundry.semantics.reductions import identity

        if kind == "mean":
            raise Unsupported("Reduce.mean over zero elements (an evaluation error)")
        out.fill(E.const(identity(kind, dt), dt))
        return out.reshape(keep_shape if op.keepdim else batch), dt
    for r in range(f.shape[0]):
        lanes = list(f[r])
        if kir.is_float(dt) and dt != "f32":
            lanes = [E.widen(v, dt, "f32") for v in lanes]
        k = "sum" if kind == "mean" else kind
        if k == "sum" and dt == "bool":
            raise Unsupported("unsupported op Reduce.sum on bool")
        s = reduce_lanes(lanes, acc, k, op.policy, None, abstr)
        if kind == "mean":
            if n == 0:
                raise Unsupported("Reduce.mean over zero elements (an evaluation error)")
            s = E.binary("div", "f32")(s, E.const(np.float32(n), "f32"))
        if kir.is_float(dt) and dt != "f32":
            s = E.round_to(s, "f32", dt, "nonfinite")
        out[r] = s
    return out.reshape(keep_shape if op.keepdim else batch), dt


def _matmul(op: MatMul, args: list[Val], abstr: set[str]) -> Val:
    """``semantics.matmul.matmul``: [..., M, K] @ [..., K, N] with broadcast batch dims; per
    output element the K-order fold (f32 products of the widened operands from +0, one
    rounding; integers in i64, wrapped back)."""
    (a, dt), (b, bdt) = args
    if a.ndim < 2 or b.ndim < 2 or a.shape[-1] != b.shape[-2] or bdt != dt:
        raise Unsupported(f"MatMul of {dt}{list(a.shape)} x {bdt}{list(b.shape)} (an evaluation "
                          f"error)")
    try:
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        raise Unsupported(f"MatMul batch shapes {a.shape[:-2]} and {b.shape[:-2]} do not "
                          f"broadcast (an evaluation error)") from None
    acc = "f32" if kir.is_float(dt) else "i64"
    if dt == "bool":
        raise Unsupported("unsupported op MatMul on bool")
    up = (lambda v: E.widen(v, dt, "f32")) if _lowp(dt) else \
        (lambda v: E.cast(v, dt, "i64", "nonfinite", "nearest")) if acc == "i64" and dt != "i64" \
        else (lambda v: v)
    mul, add = E.binary("mul", acc), E.binary("add", acc)
    m, k = a.shape[-2:]
    n = b.shape[-1]
    a = np.broadcast_to(a, (*batch, m, k))
    b = np.broadcast_to(b, (*batch, k, n))
    out = np.empty((*batch, m, n), object)
    for bt in np.ndindex(*batch):
        for i in range(m):
            for j in range(n):
                s = E.zero(acc)  # +0: matmul(a, b) is mma(a, b, zeros) (D200)
                for t in range(k):
                    s = add(s, mul(up(a[(*bt, i, t)]), up(b[(*bt, t, j)])))
                if _lowp(dt):
                    s = E.round_to(s, "f32", dt, "nonfinite")
                elif acc == "i64" and dt != "i64":
                    s = E.cast(s, "i64", dt, "nonfinite", "nearest")
                out[(*bt, i, j)] = s
    return out, dt


def _mma(op: Mma, args: list[Val], abstr: set[str]) -> Val:
    """``matmul.mma`` (tile-family ``Mma``, D516): a and b widen exactly to f32, the
    accumulator widens exactly to f32 and seeds the unfused K-order fold ``acc = fl(acc +
    fl(a_k·b_k))`` (K = 0: acc itself), rounded once to acc's dtype (f32, f16 or bf16,
    D389); batch dims ``[*B]`` shared by the three operands. The reference is this one value
    for both ``allow_reassociation`` settings (True only widens the admitted set, which is not
    encoded: a reassociating lowering would be reported against this member)."""
    from tilefoundry.semantics.matmul import MMA_ACC_DTYPES

    (a, dt), (b, bdt), (c, cdt) = args
    if not kir.is_float(dt) or dt in ("f8e8m0", "f64") or bdt != dt:
        raise Unsupported(f"unsupported op Mma on {dt} x {bdt} (an evaluation error)")
    if cdt not in {d.value for d in MMA_ACC_DTYPES}:
        raise Unsupported(f"unsupported op Mma with a {cdt} accumulator (an evaluation error)")
    if a.ndim < 2 or b.ndim != a.ndim or c.ndim != a.ndim or a.shape[-1] != b.shape[-2] or \
            c.shape != (*a.shape[:-1], b.shape[-1]) or b.shape[:-2] != a.shape[:-2]:
        raise Unsupported(f"Mma of shapes {a.shape}, {b.shape}, {c.shape} (an evaluation error)")
    def up(v: Any, d: str) -> Any:
        return v if d == "f32" else E.widen(v, d, "f32")

    mul, add = E.binary("mul", "f32"), E.binary("add", "f32")
    k = a.shape[-1]
    out = np.empty(c.shape, object)
    for idx in np.ndindex(*c.shape):
        *bt, i, j = idx
        s = up(c[idx], cdt)
        for t in range(k):
            s = add(s, mul(up(a[(*bt, i, t)], dt), up(b[(*bt, t, j)], dt)))
        out[idx] = s if cdt == "f32" else E.round_to(s, "f32", cdt, "nonfinite")
    return out, cdt


def _fibers(x: np.ndarray, axes_in: tuple) -> tuple[np.ndarray, tuple, tuple]:
    axes = sorted(a % x.ndim for a in axes_in) if x.ndim else []
    keep = [i for i in range(x.ndim) if i not in axes]
    batch = tuple(x.shape[i] for i in keep)
    f = np.transpose(x, keep + axes).reshape(math.prod(batch),
                                             math.prod(x.shape[a] for a in axes))
    keep_shape = tuple(1 if i in axes else n for i, n in enumerate(x.shape))
    return f, batch, keep_shape


def _seeded(op: SeededReduce, args: list[Val], abstr: set[str]) -> Val:
    """``reducers._seeded_fibers``: the seed is the state the contributions enter; floats
    widened to f32 and rounded once; a MaskedReduce's inactive lanes are absent (an ``If`` per
    lane for the folds and max / min; a masked tree sum's admitted set depends on the mask's
    value, which is not encoded)."""
    (x, dt), (sd, _) = args[0], args[1]
    masked = isinstance(op, MaskedReduce)
    kind, policy = op.kind, op.policy
    if dt == "bool" and kind == "sum":
        raise Unsupported(f"unsupported op {type(op).__name__}.sum on bool (an evaluation "
                          f"error: bool has no arithmetic)")
    fp = kir.is_float(dt)
    tree_uf = masked and fp and kind == "sum" and policy in ("ordered_tree", "unordered_tree")
    f, batch, keep_shape = _fibers(x, op.axes)
    mf = _fibers(args[2][0], op.axes)[0] if masked else None
    seeds = sd.reshape(-1)
    acc = "f32" if fp else dt
    up = (lambda v: E.widen(v, dt, "f32")) if _lowp(dt) else (lambda v: v)
    out = np.empty(f.shape[0], object)
    if f.shape[1] == 0:  # no contribution: the seed itself (the reference's widen-and-round of
        # it differs only in a NaN's encoding, which the NaN-class rule does not fix)
        out[:] = list(seeds)
        return out.reshape(keep_shape if op.keepdim else batch), dt
    for r in range(f.shape[0]):
        lanes, init = [up(v) for v in f[r]], up(seeds[r])
        if not masked:
            res = reduce_lanes(lanes, acc, kind, policy, init, abstr)
        elif tree_uf:  # its admitted set depends on the mask's value: abstracted (D542)
            res = abstracted(f"a masked {policy} sum", f"masked_sum.{policy}", [init, *lanes],
                             list(mf[r]), abstr)
        elif kind == "sum":
            add = E.binary("add", acc)
            order = range(len(lanes) - 1, -1, -1) if policy == "fold_right" else \
                range(len(lanes))
            res = init
            for i in order:
                step = add(lanes[i], res) if policy == "fold_right" else add(res, lanes[i])
                res = z3.If(mf[r, i], step, res)
        else:  # max / min: exact, every policy gives this value
            pick = (lambda a, b: E.fminmax(a, b, kind == "max")) if fp else \
                E.binary(kind, acc)
            res = init
            for i in range(len(lanes)):
                res = z3.If(mf[r, i], pick(res, lanes[i]), res)
        out[r] = E.round_to(res, "f32", dt, "nonfinite") if _lowp(dt) else res
    return out.reshape(keep_shape if op.keepdim else batch), dt


def _scan(op: Scan, args: list[Val], abstr: set[str]) -> Val:
    """``reductions.scan``: the left recurrence, each inclusive prefix the reduction of its own
    leaves (the seed, if any, first; then x0..xi) under the policy — ``fold_left`` that chain
    exactly, ``ordered_tree`` any order-preserving regrouping of the prefix (a choice per
    prefix, as ``scan_admits`` judges each prefix on its own leaves); floats widened to f32
    and each output rounded once; integers wrap; exclusive[0] is the seed, else the combine's
    identity in x's dtype."""
    from tilefoundry.semantics.reductions import identity

    (x, dt), = args
    if x.ndim == 0:
        raise Unsupported("Scan of a rank-0 value (an evaluation error)")
    ax = op.axis % x.ndim
    v = np.moveaxis(x, ax, -1)
    batch, n = v.shape[:-1], v.shape[-1]
    if n == 0:
        return x.copy(), dt
    fp = kir.is_float(dt)
    if (dt == "bool" and op.combine in ("add", "mul")) or (op.combine == "mul" and fp):
        raise Unsupported(f"unsupported op Scan.{op.combine} on {dt} (an evaluation error)")
    kind = {"add": "sum", "mul": "prod"}.get(op.combine, op.combine)
    acc = "f32" if fp else dt
    up = (lambda t: E.widen(t, dt, "f32")) if _lowp(dt) else (lambda t: t)
    seed = None if op.seed is None else E.const(op.seed, dt)
    out = np.empty(v.shape, object)
    for b in np.ndindex(*batch):
        leaves = ([] if seed is None else [up(seed)]) + [up(t) for t in v[b]]
        first = int(seed is not None)
        for i in range(n):
            s = reduce_lanes(leaves[:first + i + 1], acc, kind, op.policy, None, abstr)
            out[(*b, i)] = E.round_to(s, "f32", dt, "nonfinite") if _lowp(dt) else s
    if not op.inclusive:
        start = seed if seed is not None else E.const(
            1 if op.combine == "mul" else identity(kind, dt), dt)
        shifted = np.empty(v.shape, object)
        shifted[..., 1:] = out[..., :-1]
        shifted[..., 0] = start
        out = shifted
    return np.moveaxis(out, -1, ax), dt


def _flagged_scan(op: MaskedScan | SegmentedScan, args: list[Val], abstr: set[str]) -> Val:
    """``scan_flags.flagged_scan`` transcribed step for step (an ``If`` per flag): a masked
    scan skips a contribution whose mask is false; a segmented scan's lifted ``(head, value)``
    state restarts at a head. Exact for every policy but a float add under ``ordered_tree``,
    whose admitted set depends on the flags' values (not encoded: "unsupported")."""
    from tilefoundry.semantics.reductions import identity

    (x, dt), (fl, _) = args
    name = type(op).__name__
    if x.ndim == 0:
        raise Unsupported(f"{name} of a rank-0 value (an evaluation error)")
    fp = kir.is_float(dt)
    if (dt == "bool" and op.combine in ("add", "mul")) or (op.combine == "mul" and fp):
        raise Unsupported(f"unsupported op {name}.{op.combine} on {dt} (an evaluation error)")
    tree_uf = fp and op.combine == "add" and op.policy == "ordered_tree"
    ax = op.axis % x.ndim
    v, f = np.moveaxis(x, ax, -1), np.moveaxis(np.broadcast_to(fl, x.shape), ax, -1)
    n = v.shape[-1]
    if n == 0:
        return x.copy(), dt
    low = _lowp(dt)
    up = (lambda t: E.widen(t, dt, "f32")) if low else (lambda t: t)
    wdt = "f32" if low else dt
    if fp and op.combine != "add":
        comb = lambda a, b: E.fminmax(a, b, op.combine == "max")  # noqa: E731
    else:
        comb = E.binary(op.combine, wdt)
    ident = up(E.const(1 if op.combine == "mul" else identity(
        "sum" if op.combine == "add" else op.combine, dt), dt))
    back = (lambda t: E.round_to(t, "f32", dt, "nonfinite")) if low else (lambda t: t)
    out = np.empty(v.shape, object)
    for b in np.ndindex(*v.shape[:-1]):
        if tree_uf:  # each prefix's admitted set depends on the flags' values (D542)
            lanes, flags = [up(t) for t in v[b]], list(f[b])
            seed = up(E.const(op.seed, dt)) if op.seed is not None else None
            for i in range(n):
                out[(*b, i)] = back(_tree_prefix(op, i, lanes, flags, seed, ident, abstr))
            continue
        has = z3.BoolVal(op.seed is not None)
        state = up(E.const(op.seed, dt)) if op.seed is not None else ident
        for i in range(n):
            xi, fi = up(v[b][i]), f[b][i]
            if isinstance(op, MaskedScan):
                if not op.inclusive:
                    out[(*b, i)] = back(z3.If(has, state, ident))
                state = z3.If(fi, z3.If(has, comb(state, xi), xi), state)
                has = z3.Or(has, fi)
                if op.inclusive:
                    out[(*b, i)] = back(z3.If(has, state, ident))
            else:
                if not op.inclusive:
                    out[(*b, i)] = back(z3.If(z3.And(has, z3.Not(fi)), state, ident))
                state = z3.If(has, z3.If(fi, xi, comb(state, xi)), xi)
                has = z3.BoolVal(True)
                if op.inclusive:
                    out[(*b, i)] = back(state)
    return np.moveaxis(out, -1, ax), dt


def _tree_prefix(op: MaskedScan | SegmentedScan, i: int, lanes: list, flags: list, seed: Any,
                 ident: Any, abstr: set[str]) -> Any:
    """Prefix ``i`` of a flagged float add scan under ``ordered_tree`` (D542, D544): the masked
    tree sum of the lanes it keeps — an ordered tree over them, the seed first where it takes
    part (``choices.abstracted``, the admitted set abstracted) — and the combine's identity
    where it keeps no lane and no seed. A masked scan keeps lane ``j <= i`` (``< i``
    exclusive) where its mask is set, the seed always; a segmented scan keeps ``j`` where no
    head lies in ``(j, i]`` (``i``'s segment), the seed only in the segment before the first
    head. So the kernel IR's masked sums (``lower_tile_scan_flags``: lane masks, a seeded and
    an unseeded sum selected by the segment, a lane count selecting the identity) are the same
    terms when the lowering keeps the lanes, the masks and the seed."""
    hi = i + 1 if op.inclusive else i
    masked = isinstance(op, MaskedScan)
    keep = flags[:hi] if masked else \
        [z3.And(*(z3.Not(h) for h in flags[j + 1:i + 1])) for j in range(hi)]

    def summed(values: list) -> Any:
        return abstracted("a masked ordered_tree sum", "masked_sum.ordered_tree", values, keep,
                          abstr)

    if seed is not None and masked:  # the seed always takes part: never empty
        return summed([seed, *lanes[:hi]])
    empty = z3.Not(z3.Or(*keep)) if keep else z3.BoolVal(True)
    rest = z3.If(empty, ident, summed(lanes[:hi]))
    if seed is None:
        return rest
    first = z3.And(*(z3.Not(h) for h in flags[:i + 1]))  # before the first head: seeded
    return z3.If(first, summed([seed, *lanes[:hi]]), rest)


HIR_OPS: dict[type, Callable[[Any, list[Val], set[str]], Val]] = {
    Binary: _binary, Unary: _unary, Cast: _cast, Select: _select, Reduce: _reduce,
    MatMul: _matmul, SeededReduce: _seeded, MaskedReduce: _seeded, Scan: _scan,
    MaskedScan: _flagged_scan, SegmentedScan: _flagged_scan,
    ReLU: _relu, Mma: _mma, Bitcast: _bitcast}
def _reshard(op: Reshard, args: list[Val], abstr: set[str]) -> Val:
    """A ``Reshard`` to a (non-sharded) ``Layout`` or a storage kind: the value unchanged (the
    reference's ``eval_reshard`` on a plain array); to a ``ShardLayout`` unsupported."""
    if isinstance(op.layout, ShardLayout):
        raise Unsupported("Reshard to a ShardLayout (a sharded program)")
    (x, dt), = args
    return x, dt


HIR_OPS[Reshard] = _reshard
HIR_OPS.update(NN_OPS)  # LayerNorm, RMSNorm: the reference's exact f64 algorithm (hir_nn)
HIR_OPS.update(CUSTOM_OPS)  # CustomReduce: folds and merge-tree choices (hir_custom)
HIR_OPS.update(ORDER_OPS)  # Sort, TopK: the total order's ranks (hir_order)

#: loops longer than this are "unsupported" (each iteration's terms are built)
MAX_UNROLL = 64

#: pure data movement: encoded through the reference evaluator's index map (positions offset
#: by ``_BASE``, so that a value the implementation fills in — a Gather's fill, a zero — is
#: never mistaken for a position)
MOVEMENT: tuple[type, ...] = tuple(
    c for c in ALL_OPS if getattr(c, "COPIES_BITS", False) and c not in (Select, Bitcast))
#: operands of the MOVEMENT ops that are positions, not data: constants only
INDEX_INPUTS = frozenset({"indices", "offsets", "cur_pos", "s"})
_BASE = 1 << 40
#: results that do not depend on the operands' values
CONSTANT_OPS: tuple[type, ...] = (ShapeOf, Rank, Zeros)


def _ctx(call: Call, env: Mapping[str, int]):
    from tilefoundry.semantics.evaluator.registry import EvalCtx

    return EvalCtx(call.op, call, call.checked_type if call.has_type else None, [], (), env)


def _run_ref(call: Call, operands: tuple, env: Mapping[str, int]) -> Any:
    import tilefoundry.semantics.evaluator.families  # noqa: F401  (registers every evaluator)
    from tilefoundry.semantics.evaluator.registry import EVALUATORS

    name = type(call.op).__name__
    try:
        return EVALUATORS[type(call.op)](_ctx(call, env), operands)
    except Exception as e:  # the reference refuses these operands: not encodable this way
        raise Unsupported(f"unsupported op {name}: the reference evaluator on index / zero "
                          f"operands raised {type(e).__name__}: {e}") from None


def _concrete_int(a: np.ndarray, dt: str) -> np.ndarray | None:
    """An integer operand whose every term is a constant (an unrolled loop's induction
    variable, a folded index) as a numpy array of ``dt``, else None."""
    if not kir.is_int(dt) or not all(z3.is_bv_value(t) for t in a.reshape(-1)):
        return None
    npdt = kir.numpy_dtype(dt)
    vals = [t.as_signed_long() if np.issubdtype(npdt, np.signedinteger) else t.as_long()
            for t in a.reshape(-1)]
    return np.asarray(vals, npdt).reshape(a.shape)


def _movement(call: Call, args: list[Val], env: Mapping[str, int], abstr: set[str]) -> Val:
    """Data movement as the reference's own index map (module docstring); an integer operand
    whose terms are all constants (a start index) is passed as its concrete value; position
    operands that are data (a ``Gather``'s indices, rank-0 offsets) an ``If`` chain over the
    positions the same index map gives for each of their values (``hir_dynamic``, D528)."""
    name = type(call.op).__name__
    names = tuple(type(call.op).INPUTS)
    if names and len(args) > len(names):  # a variadic last input (InsertSlice's offsets)
        names += (names[-1],) * (len(args) - len(names))
    # the operands that are positions, not data (a Gather's ``indices``)
    index = [i for i, n in enumerate(names) if n in INDEX_INPUTS and i < len(args)]
    concrete = {i: _concrete_int(*args[i]) for i in index}
    data = [i for i in range(len(args)) if i not in concrete]
    dts = {args[i][1] for i in data}
    if len(dts) != 1:
        raise Unsupported(f"unsupported op {name} over operands of dtypes {sorted(dts)}")
    dt = dts.pop()
    offs = np.cumsum([0, *(args[i][0].size for i in data)])
    flat = np.empty(int(offs[-1]), object)  # the data operands' terms, in operand order
    for o, i in zip(offs, data, strict=False):
        flat[o:o + args[i][0].size] = args[i][0].reshape(-1)

    def index_map(positions: Mapping[int, np.ndarray], refused_ok: bool = False
                  ) -> np.ndarray | None:
        """Where each result element comes from in ``flat``, the position operands given
        concretely; None where the reference refuses them (``refused_ok``: an evaluation
        error of the program)."""
        ops: list[Any] = [None] * len(args)
        for o, i in zip(offs, data, strict=False):
            a = args[i][0]
            ops[i] = np.arange(_BASE + o, _BASE + o + a.size, dtype=np.int64).reshape(a.shape)
        for i, c in positions.items():
            ops[i] = c
        try:
            res = np.asarray(_run_ref(call, tuple(ops), env))
        except Unsupported:
            if refused_ok:
                return None
            raise
        if res.dtype != np.int64 or (res.size and (res.min() < _BASE or
                                                   res.max() >= _BASE + len(flat))):
            raise Unsupported(f"unsupported op {name}: its reference implementation is not an "
                              f"index map here (it computes or fills values)")
        return res - _BASE

    dyn = [i for i in index if concrete[i] is None]
    fixed = {i: c for i, c in concrete.items() if c is not None}
    if dyn and isinstance(call.op, Gather) and len(args) == 2 and kir.is_int(args[1][1]):
        (x, _), (idx, idt) = args
        return gather(call.op, x.shape, idx, idt, index_map, flat, dt, abstr), dt
    if dyn:
        if any(args[i][0].ndim != 0 or not kir.is_int(args[i][1]) for i in dyn):
            raise Unsupported(f"unsupported op {name} with a data-dependent "
                              f"{names[dyn[0]]} operand that is not an integer scalar")
        top = max((max(args[i][0].shape, default=1) for i in data), default=1)
        return scalar_positions(name, [(i, args[i][0][()], args[i][1]) for i in dyn], fixed,
                                top, index_map, flat, dt, abstr), dt
    res = index_map(fixed)
    # indexed flat (a 0-d index array would pick the element itself, not a 0-d array)
    return flat[res.reshape(-1)].reshape(res.shape), dt


def _constant(call: Call, args: list[Val], env: Mapping[str, int]) -> Val:
    zeros = tuple(np.zeros(a.shape, kir.numpy_dtype(dt)) for a, dt in args)
    res = np.asarray(_run_ref(call, zeros, env))
    dt = dtype_of(res).value
    return _vmap(lambda c: E.const(c, dt), res.astype(object)) if res.size else \
        np.empty(res.shape, object), dt


def _fold(call: Call, args: list[Val], env: Mapping[str, int]) -> Val | None:
    """An op without an encoding whose operands are all integer constants (a shape value, a
    dim: ``ShapeExtract`` / ``ShapeCompose`` of a folded ``ShapeOf``) is the reference
    evaluator's result on them, as constants (an op of no operands — ``ShapeCompose()``, the
    empty shape — is a constant of its attributes); None when an operand is data or not an
    integer."""
    concrete = [_concrete_int(a, dt) for a, dt in args]
    if any(c is None for c in concrete):
        return None
    res = np.asarray(_run_ref(call, tuple(concrete), env))
    dt = dtype_of(res).value
    return (_vmap(lambda c: E.const(c, dt), res.astype(object)) if res.size else
            np.empty(res.shape, object)), dt


def _tensor_val(v: Any) -> Val:
    if isinstance(v, tuple) and not (len(v) == 2 and isinstance(v[0], np.ndarray)
                                     and isinstance(v[1], str)):
        raise Unsupported("a tuple value as an op's operand")
    return v


def flatten(v: Any) -> list[Val]:
    """A result's tensors in order (a tuple's fields depth first); a leaf that is not a tuple
    (a sharded value, ``validate.mesh``) is one tensor."""
    if not isinstance(v, tuple) or (len(v) == 2 and isinstance(v[0], np.ndarray) and
                                    isinstance(v[1], str)):
        return [v]
    return [t for f in v for t in flatten(f)]


def call_op(call: Any, args: list[Val], env: Mapping[str, int], abstr: set[str]) -> Val:
    """One Call of an op (not a Function) on encoded operands. ``call`` may be a
    ``LocalCall``: the op and result type a device computes (``validate.mesh``)."""
    op = call.op
    if isinstance(op, MOVEMENT):
        return _movement(call, args, env, abstr)
    if isinstance(op, CONSTANT_OPS):
        return _constant(call, args, env)
    enc = HIR_OPS.get(type(op))
    if enc is None:
        v = _fold(call, args, env)
        if v is None:
            raise Unsupported(f"unsupported op {type(op).__name__} (no HIR SMT encoding)")
        return v
    return enc(op, args, abstr)


class LocalCall:
    """A Call as one device evaluates it: the local op (a Reshape to the local extents) and
    the local result type; everything else is the Call's."""

    has_type = True

    def __init__(self, call: Call, op: Any, out_type: Any):
        self._call, self.op, self.checked_type = call, op, out_type

    def __getattr__(self, name: str) -> Any:
        return getattr(self._call, name)


def run_hir(fn: Function, inputs: Mapping[str, np.ndarray], session: Any = None,
            mesh: Callable | None = None) -> tuple[Any, set[str]]:
    """The entry's result as terms of the inputs (param name -> object array of values): a
    ``Val`` or, for a tuple result, a tuple of them. A Call of a Function (a module that is
    not elaborated) is read as the reference evaluator reads it (``Evaluator.call_function``):
    the target the typing session resolved, its dispatch variant selected by the argument
    shapes, its DimVars bound from them; that needs the module's typing ``session``.
    ``mesh(call, operands, env, abstr)``: the value of a Call on sharded operands, or None
    when none is (``validate.mesh``)."""
    from tilefoundry.semantics.evaluator.core import dim_env

    abstr: set[str] = set()
    depth = [0]

    def call(f: Function, args: list[Any]) -> Any:
        shapes = [a[0].shape if isinstance(a, tuple) else a.shape for a in args]
        if f.body is None:
            from tilefoundry.semantics.typeinfer.functions import select_variant

            f = select_variant(f, shapes)
        env = dim_env(f.params, shapes)
        bound = {id(p): a for p, a in zip(f.params, args, strict=True)}
        depth[0] += 1
        if depth[0] > 50:
            raise Unsupported("calls nest deeper than 50")
        try:
            return body(f, bound, env)
        finally:
            depth[0] -= 1

    def body(f: Function, bound: dict[int, Any], env: Mapping[str, int]) -> Any:
        return scope(f.body, dict(bound), env)

    def scope(root: Any, memo: dict[int, Any], env: Mapping[str, int]) -> Any:

        def ev(e: Any) -> Any:
            key = id(e)
            if key in memo:
                return memo[key]
            if isinstance(e, Var):
                raise Unsupported(f"variable {e.name} is not a parameter (let-bound values are "
                                  f"not encoded)")
            if isinstance(e, Constant):
                arr = np.asarray(e.value)
                dt = dtype_of(arr).value
                v = (_vmap(lambda c: E.const(c, dt), arr.astype(object)) if arr.size
                     else np.empty(arr.shape, object), dt)
            elif isinstance(e, Tuple):
                v = tuple(ev(x) for x in e.fields)
            elif isinstance(e, TupleGetItem):
                t = ev(e.tuple_value)
                if not isinstance(t, tuple) or (len(t) == 2 and isinstance(t[0], np.ndarray)):
                    raise Unsupported("TupleGetItem of a value that is not a tuple")
                v = t[e.index]
            elif isinstance(e, GridRegionExpr):
                v = loop(e, memo, env)
            elif isinstance(e, Call) and isinstance(e.op, Function):
                if session is None:
                    raise Unsupported("a Call of a Function (the module is not elaborated; no "
                                      "typing session given)")
                from tilefoundry.semantics.typeinfer.functions import resolved_target

                v = call(resolved_target(e, session), [_tensor_val(ev(a)) for a in e.args])
            elif isinstance(e, Call) and mesh is not None and \
                    (v := mesh(e, [ev(a) for a in e.args], env, abstr)) is not None:
                pass  # an op on sharded values: per device (``validate.mesh``, D534)
            elif isinstance(e, Call) and is_topk_reduce(e.op):  # the seed is a state pair
                v = topk_reduce(e.op, [_tensor_val(ev(e.args[0])), *map(ev, e.args[1:])],
                                abstr)
            elif isinstance(e, Call):
                v = call_op(e, [_tensor_val(ev(a)) for a in e.args], env, abstr)
            else:
                raise Unsupported(f"unsupported HIR node {type(e).__name__}")
            memo[key] = v
            return v

        return ev(root)

    def loop(node: GridRegionExpr, memo: dict[int, Any], env: Mapping[str, int]) -> Any:
        """Unrolled as the evaluator runs it (``Evaluator.eval_loop``): per iteration the
        induction variable a constant of its dtype, the carried values rebound, the yields
        evaluated in a scope that shares the loop-invariant values."""
        from tilefoundry.semantics.typeinfer.functions import resolve_grid_domain

        dom = resolve_grid_domain(node, dict(env))
        if len(dom) > MAX_UNROLL:
            raise Unsupported(f"a GridRegionExpr of {len(dom)} iterations (more than "
                              f"{MAX_UNROLL} are not unrolled)")
        carried = [scope(a, memo, env) for a in node.init_args]
        ivt = node.induction_var.checked_type if node.induction_var.has_type else None
        idt = ivt.dtype.value if ivt is not None and hasattr(ivt, "dtype") else "i32"
        for i in dom:
            inner = dict(memo)
            iv = np.empty((), object)
            iv[()] = E.const(np.asarray(i, kir.numpy_dtype(idt)), idt)
            inner[id(node.induction_var)] = (iv, idt)
            inner.update((id(c), v) for c, v in zip(node.carried_args, carried, strict=True))
            carried = [scope(y, inner, env) for y in node.yield_values]
        return carried[0] if len(carried) == 1 else tuple(carried)

    for p in fn.params:
        if p.name not in inputs:
            raise Unsupported(f"parameter {p.name} has no input")
    args = []
    for p in fn.params:
        t = p.checked_type if p.has_type else p.type
        v = inputs[p.name]  # an array of terms, or a sharded value (``validate.mesh``)
        args.append((v, t.dtype.value) if isinstance(v, np.ndarray) else v)
    return call(fn, args), abstr
