"""Reductions, folds and scans: reference results and the sets of results they admit.

Contracts (ARCHITECTURE.md "Numeric contracts"; Tile design "Reference fold and permitted
regrouping", "Why not just infer it from reduce?"). Low-precision floats widen exactly to f32,
accumulate with IEEE f32 operations (numpy float32, round to nearest even) and round once to the
result dtype with ``dtypes.cast``. Every reference is vectorized across fibers: Python loops run
only over a reduced-axis length, tree levels or enumerated trees, never over elements.

Decisions the contracts leave open (docs/decisions.md): no seed enters a non-empty reduction
(fold_left starts at x0, fold_right at x_{n-1}; equal to seeding with -0, IEEE addition's exact
identity), so a sum over [-0.] is -0 and only an empty fiber gives the HIR identity +0. The
reference tree is balanced pairwise in source order (odd last element carried up); multi-axis
order is lexicographic. mean = fl32(f32 sum / f32(n)), rounded once. f8e8m0 refuses sum/mean;
its abs_max is max and its empty max/abs_max is 2^-127. Integer abs_max wraps |iinfo.min| to
itself. unordered_tree enumerates the (2n-3)!! unordered trees (IEEE addition is commutative, so
they reach every bracketing of every permutation). The bound method judges a zero sum's sign
exactly, but not a matmul's. matmul without reassociation admits the unfused and the fma K-order
chains, both seeded by the first product.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from itertools import combinations

import numpy as np

from tilefoundry.errors import EmptyReductionError, InvalidArgumentError, bad_choice
from tilefoundry.semantics.combine_laws import SCAN_COMBINES
from tilefoundry.semantics.dtypes import cast, dtype_of, widen_to_f32
from tilefoundry.semantics.formats import FORMATS, DType, require_evaluable

__all__ = [
    "ENUMERATE_MAX", "KINDS", "POLICIES", "SCAN_OPS", "SCAN_POLICIES", "Admission", "admits",
    "fold_left", "fold_right", "gamma", "identity", "normalize_axes",
    "normalize_axis", "reduce", "scan", "scan_admits",
]

KINDS = ("sum", "mean", "max", "min", "abs_max")
POLICIES = ("unordered_tree", "ordered_tree", "fold_left", "fold_right")
SCAN_OPS = SCAN_COMBINES  # mul: integer dtypes only (semantics/combine_laws.py)
SCAN_POLICIES = ("ordered_tree", "fold_left")
ENUMERATE_MAX = 6
U32 = 2.0 ** -24  # unit roundoff of f32
F32_OVERFLOW = 2.0 ** 128 - 2.0 ** 103  # an exact result of this magnitude or more rounds to inf
ETA_F32 = 2.0 ** -150  # absolute error of an f32 product that underflows
_TINY = np.float32(2.0 ** -149)
_CHUNK = 8192  # fibers per enumeration batch
_F32, _F64 = np.float32, np.float64


def gamma(k: int) -> float:
    """Higham's γ(k) = k·u / (1 − k·u) for f32 (u = 2^-24); inf once k·u ≥ 1."""
    ku = k * U32
    return math.inf if ku >= 1 else ku / (1 - ku)


# --- argument handling -----------------------------------------------------------------------
def _choice(what: str, got: object, allowed: tuple[str, ...], fix: str | None = None) -> None:
    if not isinstance(got, str) or got not in allowed:
        raise InvalidArgumentError(bad_choice(what, got, allowed, fix))


def normalize_axes(axes: int | tuple[int, ...] | list[int] | None, ndim: int,
                   what: str = "reduce") -> tuple[int, ...]:
    """Sorted non-negative axes; None means all. Out-of-range or repeated axes raise."""
    if axes is None:
        return tuple(range(ndim))
    items = (axes,) if isinstance(axes, int | np.integer) else tuple(axes)
    out: list[int] = []
    for a in items:
        if isinstance(a, bool) or not isinstance(a, int | np.integer):
            raise InvalidArgumentError(f"{what}: axis {a!r} is not an integer")
        if not -ndim <= a < ndim:
            valid = f"{-ndim}..{ndim - 1}" if ndim else "none (a rank-0 array has no axes)"
            raise InvalidArgumentError(
                f"{what}: axis {int(a)} is out of range for an array of rank {ndim}; valid axes "
                f"are {valid}")
        out.append(int(a) % ndim)
    if len(set(out)) != len(out):
        raise InvalidArgumentError(f"{what}: axes {tuple(items)} name an axis twice")
    return tuple(sorted(out))


def normalize_axis(axis: int, ndim: int, what: str) -> int:
    """One non-negative axis (see ``normalize_axes``)."""
    if isinstance(axis, bool) or not isinstance(axis, int | np.integer):
        raise InvalidArgumentError(f"{what}: axis must be one integer, got {axis!r}")
    return normalize_axes(int(axis), ndim, what)[0]


def _operand(x: np.ndarray, what: str) -> tuple[np.ndarray, DType]:
    x = np.asarray(x)
    dt = dtype_of(x)
    require_evaluable(dt, what)
    return x, dt


def _check_kind_dtype(kind: str, dt: DType, what: str) -> None:
    if dt is DType.BOOL and kind in ("sum", "mean", "abs_max"):
        raise InvalidArgumentError(
            f"{what} {kind}: bool has no arithmetic; Cast x to an integer dtype (e.g. i32) first")
    if dt.is_int and kind == "mean":
        raise InvalidArgumentError(
            f"{what} mean: an integer mean is not representable in {dt}; Cast x to f32 first")
    if dt is DType.F8E8M0 and kind in ("sum", "mean"):
        raise InvalidArgumentError(
            f"{what} {kind}: f8e8m0 is a scale format with no zero and no sign, so sums are not "
            f"defined in it; Cast x to f32 first")


def _fibers(x: np.ndarray, axes: tuple[int, ...]) -> tuple[np.ndarray, tuple, tuple]:
    """``x`` with the reduced axes moved last and flattened in source (lexicographic) order."""
    keep = [a for a in range(x.ndim) if a not in axes]
    batch = tuple(x.shape[a] for a in keep)
    n = math.prod(x.shape[a] for a in axes)
    keep_shape = tuple(1 if a in axes else s for a, s in enumerate(x.shape))
    return np.transpose(x, keep + list(axes)).reshape((*batch, n)), batch, keep_shape


def _cast(a: np.ndarray, dt: DType) -> np.ndarray:
    return cast(np.asarray(a), dt)


def widen(a: np.ndarray, dt: DType) -> np.ndarray:
    a = np.asarray(a)
    return np.asarray(a, _F32) if dt is DType.F32 else widen_to_f32(a)


def round_to(a: np.ndarray, dt: DType) -> np.ndarray:
    return np.asarray(a, _F32) if dt is DType.F32 else _cast(np.asarray(a, _F32), dt)


def _same_f32(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Bit-level equality of f32 values up to NaN payload (signed zeros differ)."""
    return ((a == b) & (np.signbit(a) == np.signbit(b))) | (np.isnan(a) & np.isnan(b))


def _same(r: np.ndarray, ref: np.ndarray, dt: DType, what: str) -> np.ndarray:
    rdt = dtype_of(r)
    if rdt is not dt:
        raise InvalidArgumentError(f"{what}: result has dtype {rdt}, the reference has {dt}")
    if dt.is_float:
        return _same_f32(widen(r, dt), widen(ref, dt))
    return np.asarray(r == ref)


def _float_target(r: np.ndarray, what: str) -> DType:
    dt = dtype_of(r)
    if not dt.is_float or dt is DType.F8E8M0 or not FORMATS[dt].evaluable:
        raise InvalidArgumentError(
            f"{what}: a float result is judged in its own dtype, which must be one of f32, f16, "
            f"bf16, fp8e4m3, fp8e5m2; got {dt}")
    return dt


def identity(kind: str, dtype: DType | str) -> np.ndarray:
    """The HIR Reduce identity of ``kind`` in ``dtype`` (0-d array); mean has none."""
    dt = DType.parse(dtype)
    _choice("reduce kind", kind, KINDS)
    if kind == "mean":
        raise EmptyReductionError(
            "reduce mean over an axis of no elements: mean has no identity (HIR Reduce: 'mean "
            "has no identity — there is nothing to divide by — so it MUST NOT invent one'); "
            "guard the empty case or reduce with sum")
    _check_kind_dtype(kind, dt, "reduce")
    info = FORMATS[dt]
    if dt is DType.BOOL:
        return np.asarray(kind == "min")
    if dt.is_int:
        ii = np.iinfo(info.storage)
        return np.asarray({"sum": 0, "abs_max": 0, "max": ii.min, "min": ii.max}[kind],
                          info.storage)
    top = math.inf if info.has_inf else float(info.max_finite)
    least = -top if info.has_sign else float(info.min_subnormal)  # f8e8m0: 2^-127
    val = {"sum": 0.0, "abs_max": 0.0 if info.has_sign else least, "max": least, "min": top}
    return _cast(np.asarray(val[kind], _F32), dt)


# --- f32 building blocks (all vectorized over the leading axes; the fiber is the last axis) --
def pairwise(v: np.ndarray, op: Callable) -> np.ndarray:
    """Balanced pairwise tree along the last axis; an odd last element is carried up."""
    while v.shape[-1] > 1:
        m = v.shape[-1]
        pair = op(v[..., 0:m - 1:2], v[..., 1:m:2])
        v = np.concatenate([pair, v[..., m - 1:]], -1) if m % 2 else pair
    return v[..., 0]


def fold(v: np.ndarray, op: Callable, left: bool, seed: object = None) -> np.ndarray:
    """Left fold op(state, elem) or right fold op(elem, state); no seed: start at the end."""
    order = list(range(v.shape[-1]) if left else range(v.shape[-1] - 1, -1, -1))
    s = v[..., order.pop(0)] if seed is None else np.asarray(seed)
    for i in order:
        s = op(s, v[..., i]) if left else op(v[..., i], s)
    return np.asarray(s)


def _order_key(v: np.ndarray) -> np.ndarray:
    """uint32 key monotone in the f32 value with -0 < +0 (NaN is handled by callers)."""
    u = np.array(v, _F32).view(np.uint32)  # a contiguous copy, 0-d kept
    return np.where((u >> np.uint32(31)) == 1, ~u, u | np.uint32(0x80000000))


def _pick(s: np.ndarray, e: np.ndarray, largest: bool) -> np.ndarray:
    """max/min of two f32 arrays: NaN propagates, -0 < +0."""
    ks, ke = _order_key(s), _order_key(e)
    take_e = ~np.isnan(s) & (np.isnan(e) | ((ke > ks) if largest else (ke < ks)))
    return np.where(take_e, e, s)


def extreme_index(v: np.ndarray, largest: bool) -> np.ndarray:
    key = _order_key(v)
    nan = np.isnan(v)
    if largest:
        return np.where(nan, np.uint32(0xFFFFFFFF), key).argmax(-1)
    return np.where(nan, np.uint32(0), key).argmin(-1)


def reduce_fibers(f: np.ndarray, dt: DType, kind: str, policy: str) -> np.ndarray:
    n, batch = f.shape[-1], f.shape[:-1]
    if n == 0:
        return np.broadcast_to(identity(kind, dt), batch).copy()
    if dt is DType.BOOL:
        return np.asarray(f.any(-1) if kind == "max" else f.all(-1))
    if dt.is_int:
        if kind == "sum":  # modular: every policy gives the same result
            return np.asarray(np.add.reduce(f, axis=-1, dtype=f.dtype))
        if kind in ("max", "min"):
            return np.asarray(f.max(-1) if kind == "max" else f.min(-1))
        v = f.astype(np.int64)
        u = v.view(np.uint64)
        mag = np.where(v < 0, np.uint64(0) - u, u)  # exact magnitude, 2^63 included
        return _cast(np.asarray(mag.max(-1)).view(np.int64), dt)
    v = widen(f, dt)
    with np.errstate(all="ignore"):
        if kind in ("max", "min"):
            idx = extreme_index(v, kind == "max")
            return np.take_along_axis(f, idx[..., None], -1)[..., 0]
        if kind == "abs_max":
            a = np.abs(v)
            return _cast(np.take_along_axis(a, extreme_index(a, True)[..., None], -1)[..., 0], dt)
        if policy in ("unordered_tree", "ordered_tree"):
            s = pairwise(v, np.add)
        else:
            s = fold(v, np.add, policy == "fold_left")
        if kind == "mean":
            s = np.asarray(s, _F32) / _F32(n)
    return round_to(s, dt)


def reduce(x: np.ndarray, kind: str, axes: int | tuple[int, ...] | None = None, *,
           policy: str = "unordered_tree", keepdim: bool = False) -> np.ndarray:
    """Reference result of HIR ``Reduce`` (see the module docstring for the contract)."""
    x, dt = _operand(x, "reduce")
    _choice("reduce kind", kind, KINDS)
    _choice("reduce policy", policy, POLICIES)
    _check_kind_dtype(kind, dt, "reduce")
    ax = normalize_axes(axes, x.ndim, "reduce")
    f, batch, keep_shape = _fibers(x, ax)
    return np.asarray(reduce_fibers(f, dt, kind, policy)).reshape(keep_shape if keepdim
                                                                    else batch)


def fold_left(x: np.ndarray, op: Callable, seed: object = None, axis: int = -1) -> np.ndarray:
    """``op(op(op(seed, x0), x1), x2)`` along ``axis``, ``op`` vectorized (state, elem) -> state.

    ``seed=None`` starts from x0 (an empty axis then raises EmptyReductionError).
    """
    return _generic_fold(x, op, seed, axis, True)


def fold_right(x: np.ndarray, op: Callable, seed: object = None, axis: int = -1) -> np.ndarray:
    """``op(x0, op(x1, op(x2, seed)))`` along ``axis``: ``op(elem, state) -> state``.

    The element stays the left operand (Tile design: "the policy does not silently change
    state - element into element - state"). ``seed=None`` starts from the last element.
    """
    return _generic_fold(x, op, seed, axis, False)


def _generic_fold(x: np.ndarray, op: Callable, seed: object, axis: int, left: bool) -> np.ndarray:
    x = np.asarray(x)
    what = "fold_left" if left else "fold_right"
    v = np.moveaxis(x, normalize_axis(axis, x.ndim, what), -1)
    if seed is None and v.shape[-1] == 0:
        raise EmptyReductionError(f"{what}: an empty axis and no seed; pass a seed")
    return np.broadcast_to(fold(v, op, left, seed), v.shape[:-1]).copy()


# --- admitted sets ---------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class Admission:
    """Per output element: whether a result is admitted, and the method ("exact",
    "enumeration" or "bound") that decided it. ``bool(adm)`` is True iff all are admitted."""

    admitted: np.ndarray
    method: np.ndarray
    detail: str

    def __bool__(self) -> bool:
        return bool(np.all(self.admitted))


def enumerate_trees(v: np.ndarray, unordered: bool) -> list[np.ndarray]:
    """f32 results of every tree over the leaves v[..., i], each vectorized over the fibers."""
    cols = [v[..., i] for i in range(v.shape[-1])]
    memo: dict[tuple, list[np.ndarray]] = {}

    def unordered_trees(s: tuple[int, ...]) -> list[np.ndarray]:
        if len(s) == 1:
            return [cols[s[0]]]
        if s not in memo:  # the left part holds s[0]: each unordered tree is made once
            out = []
            first, rest = s[0], s[1:]
            for k in range(len(rest)):
                for extra in combinations(rest, k):
                    right = tuple(i for i in rest if i not in extra)
                    out += [a + b for a in unordered_trees((first, *extra))
                            for b in unordered_trees(right)]
            memo[s] = out
        return memo[s]

    def ordered_trees(i: int, j: int) -> list[np.ndarray]:
        if j - i == 1:
            return [cols[i]]
        if (i, j) not in memo:
            memo[(i, j)] = [a + b for k in range(i + 1, j) for a in ordered_trees(i, k)
                            for b in ordered_trees(k, j)]
        return memo[(i, j)]

    n = len(cols)
    return unordered_trees(tuple(range(n))) if unordered else ordered_trees(0, n)


def _f32_dir(v: np.ndarray, up: bool) -> np.ndarray:
    """f64 -> f32 rounded toward +inf (``up``) or -inf: RN conversion, then one step back."""
    r = np.asarray(v, _F64).astype(_F32)
    fix = (r.astype(_F64) < v) if up else (r.astype(_F64) > v)
    return np.where(fix, np.nextafter(r, _F32(np.inf if up else -np.inf)), r)


@dataclass(frozen=True)
class BoundInterval:
    """What ``bound_interval`` proves about any tree over some leaves, per fiber: results lie in
    ``[lo_t, hi_t]`` (in the target dtype, widened to f32/f64) where ``nonempty``; NaN is
    possible where ``nan_ok``; ±inf where ``pinf_v`` / ``ninf_v``. ``lo``/``hi``/``vstar``/
    ``wstar``: the f32 ends before the final rounding (for the zero-sign rule)."""

    lo_t: np.ndarray
    hi_t: np.ndarray
    nan_ok: np.ndarray
    pinf_v: np.ndarray
    ninf_v: np.ndarray
    nonempty: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    vstar: np.ndarray
    wstar: np.ndarray
    neg_t: np.ndarray
    pos_t: np.ndarray


def bound_interval(leaves: np.ndarray, k: int, target: DType, *, divisor: int | None = None,
                   eta: float = 0.0) -> BoundInterval:
    """The interval every tree over ``leaves`` (exact values in f64, fiber last) lands in; see
    ``_bound_admits`` for the bound. Shared by the membership test and the oracle's
    enclosures (``oracle/enclosure.py``)."""
    n = leaves.shape[-1]
    with np.errstate(all="ignore"):
        nan_in = np.isnan(leaves).any(-1)
        pinf_in, ninf_in = (leaves == np.inf).any(-1), (leaves == -np.inf).any(-1)
        fin = np.where(np.isfinite(leaves), leaves, 0.0)
        pos, neg = np.maximum(fin, 0.0).sum(-1), np.maximum(-fin, 0.0).sum(-1)
        s, a = fin.sum(-1), pos + neg
        g = gamma(k) + 8 * (n + 2) * 2.0 ** -53
        b = np.where(a > 0, g * a, 0.0) + 2 * n * eta
        # a partial over leaves L lies within P_L(1+γ) − N_L(1−γ) and N_L(1+γ) − P_L(1−γ)
        grow = 1 + g
        posover = pos * grow + 2 * n * eta >= F32_OVERFLOW
        negover = neg * grow + 2 * n * eta >= F32_OVERFLOW
        both = pinf_in & ninf_in
        pinf_v = ~nan_in & ~both & (pinf_in | (posover & ~ninf_in))
        ninf_v = ~nan_in & ~both & (ninf_in | (negover & ~pinf_in))
        nan_v = nan_in | both | (pinf_in & negover) | (ninf_in & posover) | (posover & negover)
        finite_v = ~(nan_in | pinf_in | ninf_in)
        lo, hi = _f32_dir(s - b, True), _f32_dir(s + b, False)
        vstar, wstar = np.minimum(hi, -_TINY), np.maximum(lo, _TINY)
        ends = np.stack([lo, hi, vstar, wstar])
        if divisor is not None:
            ends = ends / _F32(divisor)
        lo_t, hi_t, neg_t, pos_t = widen(round_to(ends, target), target)
        nonempty = finite_v & (lo <= hi)
        nan_ok = nan_v | (nonempty & (np.isnan(lo_t) | np.isnan(hi_t)))
        lo_t = np.where(np.isnan(lo_t), np.where(lo > 0, np.inf, -np.inf), lo_t)
        hi_t = np.where(np.isnan(hi_t), np.where(hi > 0, np.inf, -np.inf), hi_t)
    return BoundInterval(lo_t, hi_t, nan_ok, pinf_v, ninf_v, nonempty, lo, hi, vstar, wstar,
                         neg_t, pos_t)


def _bound_admits(leaves: np.ndarray, k: int, rw: np.ndarray, target: DType, *,
                  divisor: int | None = None, eta: float = 0.0,
                  strict_zero: bool = True) -> np.ndarray:
    """Rigorous membership test for any tree over ``leaves`` (exact values in f64, fiber last).

    Any f32 evaluation v satisfies |v − S| ≤ γ(k)·Σ|leaf| + 2·n·eta (S the exact sum; ``eta``
    is the absolute error of an underflowing product) unless a partial overflows. Sums in f64
    err by at most γ64(n−1)·Σ|leaf|; with the f64 roundings of B and S ± B that stays below
    8·(n+2)·2^-53·Σ|leaf|, which B adds. The admitted f32 values [lo, hi] then go through the
    monotone maps v -> fl(v / divisor) -> cast(·, target); a NaN end (fp8e4m3 overflow) bounds
    nothing and admits NaN.
    """
    bi = bound_interval(leaves, k, target, divisor=divisor, eta=eta)
    lo_t, hi_t, nan_ok, nonempty = bi.lo_t, bi.hi_t, bi.nan_ok, bi.nonempty
    pinf_v, ninf_v, lo, hi, vstar, wstar = bi.pinf_v, bi.ninf_v, bi.lo, bi.hi, bi.vstar, bi.wstar
    neg_t, pos_t = bi.neg_t, bi.pos_t
    with np.errstate(all="ignore"):
        ok = nonempty & (lo_t <= rw) & (rw <= hi_t)
        if strict_zero:  # a tree gives -0 only from all -0 leaves, or a tiny value rounding
            all_negzero = np.all((leaves == 0) & np.signbit(leaves), -1)
            negz = all_negzero | ((vstar >= lo) & (neg_t == 0))
            posz = (~all_negzero & (lo <= 0) & (hi >= 0)) | ((wstar <= hi) & (pos_t == 0))
            ok &= (rw != 0) | np.where(np.signbit(rw), negz, posz)
        if FORMATS[target].has_inf:
            ok |= ((rw == np.inf) & pinf_v) | ((rw == -np.inf) & ninf_v)
        else:
            nan_ok |= pinf_v | ninf_v
    return np.where(np.isnan(rw), nan_ok, ok)


def _tree_admits(v: np.ndarray, rw: np.ndarray, target: DType, unordered: bool,
                 divisor: int | None, enumerate_max: int) -> tuple[np.ndarray, str, str]:
    """Membership of widened results ``rw`` in a tree policy's set over f32 leaves ``v``."""
    n = v.shape[-1]
    if n <= enumerate_max:
        fv, fr = v.reshape(-1, n), rw.reshape(-1)
        ok = np.zeros(fr.shape, bool)
        for lo in range(0, fr.size, _CHUNK):  # bounded memory: trees x chunk of fibers
            with np.errstate(all="ignore"):
                cands = np.stack([np.broadcast_to(c, fr[lo:lo + _CHUNK].shape)
                                  for c in enumerate_trees(fv[lo:lo + _CHUNK], unordered)])
                if divisor is not None:
                    cands = cands / _F32(divisor)
            for c in widen(round_to(cands, target), target):  # each tree, all fibers at once
                ok[lo:lo + _CHUNK] |= _same_f32(c, fr[lo:lo + _CHUNK])
        return ok.reshape(rw.shape), "enumeration", f"every tree of {n} leaves enumerated"
    ok = _bound_admits(v.astype(_F64), n - 1, rw, target, divisor=divisor)
    return ok, "bound", f"bound γ({n - 1})·Σ|x| (n = {n})"


def _match_shape(r: np.ndarray, batch: tuple, keep_shape: tuple, what: str) -> np.ndarray:
    if r.shape not in (batch, keep_shape):
        raise InvalidArgumentError(
            f"{what}: result has shape {r.shape}; expected {batch} (or {keep_shape} with "
            f"keepdim)")
    return r.reshape(batch)


def admits(result: np.ndarray, x: np.ndarray, kind: str = "sum",
           axes: int | tuple[int, ...] | None = None, *, policy: str = "unordered_tree",
           enumerate_max: int = ENUMERATE_MAX) -> Admission:
    """Whether each element of ``result`` is a result the reduction ``policy`` allows.

    Tree policies on float sum/mean: fibers of at most ``enumerate_max`` elements are decided by
    enumerating every tree (ordered_tree: bracketings of the source order; unordered_tree: of
    every permutation), longer ones by the rigorous bound of ``_bound_admits``. A float result
    is judged in its own dtype (normally x's). max/min/abs_max, integer sums and the fold
    policies are exact functions: equality with the reference (NaN payload aside).
    """
    x, dt = _operand(x, "admits")
    _choice("admits kind", kind, KINDS)
    _choice("admits policy", policy, POLICIES)
    _check_kind_dtype(kind, dt, "admits")
    ax = normalize_axes(axes, x.ndim, "admits")
    f, batch, keep_shape = _fibers(x, ax)
    r0 = np.asarray(result)
    r = _match_shape(r0, batch, keep_shape, "admits")
    n = f.shape[-1]
    if not dt.is_float or kind not in ("sum", "mean") or policy.startswith("fold") or n == 0:
        ok = _same(r, reduce_fibers(f, dt, kind, policy), dt, "admits")
        method, how = "exact", "equality with the reference"
    else:
        target = _float_target(r, "admits")
        ok, method, how = _tree_admits(widen(f, dt), widen(r, target), target,
                                       policy == "unordered_tree",
                                       n if kind == "mean" else None, enumerate_max)
    detail = (f"{kind} of {dt} over axes {ax} under {policy}: {how}; "
              f"{int(ok.sum())}/{ok.size} admitted")
    if not ok.all():
        detail += f"; first rejected at output index {tuple(int(i) for i in np.argwhere(~ok)[0])}"
    return Admission(ok.reshape(r0.shape), np.full(r0.shape, method), detail)


# --- scan ------------------------------------------------------------------------------------
def _seed_value(seed: object, dt: DType, what: str) -> np.ndarray:
    """The seed as an array of ``dt``; a Python number must be exactly representable."""
    s = np.asarray(seed)
    if s.dtype == dt.storage:
        return s
    if s.dtype.kind not in "biuf":
        raise InvalidArgumentError(f"{what}: seed {seed!r} is not a number")
    with np.errstate(all="ignore"):
        c = s.astype(_F64).astype(_F32) if dt.is_float else s.astype(dt.storage)
        c = _cast(c, dt) if dt.is_float else c
        back = widen(c, dt).astype(_F64) if dt.is_float else c.astype(s.dtype)
    if not np.all((back == s) | (np.isnan(back) & np.isnan(s.astype(_F64)))):
        raise InvalidArgumentError(
            f"{what}: seed {seed!r} is not exactly representable in {dt}; pass an array of "
            f"dtype {dt}")
    return c


def _check_scan_policy(policy: str) -> None:
    if policy in ("unordered_tree", "fold_right"):
        raise InvalidArgumentError(bad_choice(
            "scan policy", policy, SCAN_POLICIES,
            "A scan never permutes contributions (Tile design: 'scan must not inherit the "
            "permission to globally permute reduction contributions') and follows the left "
            "prefix recurrence"))
    _choice("scan policy", policy, SCAN_POLICIES)


def scan(x: np.ndarray, op: str | Callable = "add", axis: int = -1, *, inclusive: bool = True,
         seed: object = None, policy: str = "ordered_tree") -> np.ndarray:
    """Prefix scan by the left recurrence prefix[0] = seed, prefix[i+1] = op(prefix[i], x[i]).

    inclusive[i] = prefix[i+1], exclusive[i] = prefix[i]. Without a seed the recurrence starts
    from x0 and exclusive[0] is op's identity. Low-precision floats carry an f32 state and each
    output rounds once. ``op`` is "add", "max", "min" or a vectorized associative callable
    ``(state, elem) -> state`` applied to the raw arrays. Empty input gives empty output.
    """
    x = np.asarray(x)
    ax = normalize_axis(axis, x.ndim, "scan")
    _check_scan_policy(policy)
    v = np.moveaxis(x, ax, -1)
    n, batch = v.shape[-1], v.shape[:-1]
    if callable(op):
        if seed is None and not inclusive:
            raise InvalidArgumentError("scan: an exclusive scan with a custom op needs a seed")
        sd = None if seed is None else np.asarray(seed)
    else:
        _choice("scan op", op, SCAN_OPS)
        x, dt = _operand(x, "scan")
        if op == "mul" and not dt.is_int:
            raise InvalidArgumentError(
                f"scan mul: a product scan is defined on integer dtypes only, got {dt}; Cast x "
                f"to an integer dtype first")
        _check_kind_dtype({"add": "sum", "mul": "max"}.get(op, op), dt, "scan")
        sd = None if seed is None else np.broadcast_to(_seed_value(seed, dt, "scan"), batch)
    if n == 0:
        return x.copy()
    inc = _prefixes(v, op, sd) if callable(op) else _scan_builtin(v, dt, op, sd)
    if not inclusive:
        first = sd if sd is not None else (
            np.asarray(1, dt.storage) if op == "mul" else identity("sum" if op == "add" else op,
                                                                    dt))
        first = np.broadcast_to(np.asarray(first, inc.dtype), batch)
        inc = np.concatenate([first[..., None], inc[..., :-1]], -1)
    return np.moveaxis(inc, -1, ax)


def _prefixes(v: np.ndarray, op: Callable, seed: np.ndarray | None) -> np.ndarray:
    """Inclusive prefixes of the left recurrence, one step per position over all fibers."""
    s, outs = seed, []
    for i in range(v.shape[-1]):
        s = v[..., i] if s is None else op(s, v[..., i])
        outs.append(np.broadcast_to(s, v.shape[:-1]))
    return np.stack(outs, -1)


def _scan_builtin(v: np.ndarray, dt: DType, op: str, sd: np.ndarray | None) -> np.ndarray:
    if dt.is_float:
        combine = np.add if op == "add" else (lambda a, b: _pick(a, b, op == "max"))
        with np.errstate(all="ignore"):
            inc = _prefixes(widen(v, dt), combine, None if sd is None else widen(sd, dt))
        return round_to(inc, dt)
    if op in ("add", "mul"):  # i64 wraparound is exact modulo 2^bits, then wraps into dt
        return _cast(_prefixes(v.astype(np.int64), np.add if op == "add" else np.multiply,
                               None if sd is None else sd.astype(np.int64)), dt)
    return _prefixes(v, np.maximum if op == "max" else np.minimum, sd)  # ints and bool


def scan_admits(result: np.ndarray, x: np.ndarray, op: str | Callable = "add", axis: int = -1,
                *, inclusive: bool = True, seed: object = None, policy: str = "ordered_tree",
                enumerate_max: int = ENUMERATE_MAX) -> Admission:
    """Whether ``result`` is an admitted scan: each prefix an ordered-tree regrouping of its own
    leaf sequence (seed first, then x0..xi), decided like ``admits``; fold_left, max/min,
    integer adds and custom ops are exact (equality with ``scan``)."""
    x, r = np.asarray(x), np.asarray(result)
    ref = scan(x, op, axis, inclusive=inclusive, seed=seed, policy=policy)
    if r.shape != ref.shape:
        raise InvalidArgumentError(f"scan_admits: result has shape {r.shape}, x has {x.shape}")
    if callable(op) or op != "add" or policy == "fold_left" or not dtype_of(x).is_float:
        ok = np.asarray((r == ref) | ((r != r) & (ref != ref)) if callable(op)
                        else _same(r, ref, dtype_of(x), "scan_admits"))
        return Admission(ok, np.full(r.shape, "exact"), f"scan {op}: equality with the "
                         f"reference; {int(ok.sum())}/{r.size} admitted")
    dt, target = dtype_of(x), _float_target(r, "scan_admits")
    ax = normalize_axis(axis, x.ndim, "scan_admits")
    w, rw = widen(np.moveaxis(x, ax, -1), dt), widen(np.moveaxis(r, ax, -1), target)
    if seed is not None:
        sd = np.broadcast_to(widen(_seed_value(seed, dt, "scan_admits"), dt), w.shape[:-1])
        w = np.concatenate([sd[..., None], w], -1)
    if rw.shape[-1] == 0:
        return Admission(np.ones(r.shape, bool), np.full(r.shape, "exact"), "empty scan")
    oks, methods = [], []
    for j in range(rw.shape[-1]):  # one prefix length at a time, all fibers at once
        m = j + int(inclusive) + int(seed is not None)
        ok, method, _ = ((_same_f32(rw[..., j], _F32(0.0)), "exact", "") if m == 0 else
                         _tree_admits(w[..., :m], rw[..., j], target, False, None, enumerate_max))
        oks.append(ok)
        methods.append(method)
    ok = np.moveaxis(np.stack(oks, -1), -1, ax)
    meth = np.moveaxis(np.broadcast_to(np.array(methods), rw.shape), -1, ax)
    return Admission(ok, np.ascontiguousarray(meth),
                     f"scan add of {dt} under ordered_tree, each prefix judged on its own leaves; "
                     f"{int(ok.sum())}/{ok.size} admitted")
