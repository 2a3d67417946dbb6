"""Conformance cases of the ``tile`` family's reductions (``SeededReduce``, ``MaskedReduce``,
``CustomReduce``): ``spec/tile/...`` cite the Tile design sentence each tests; ``special/tile/...``
run special values (NaN, ±inf, ±0, subnormals, max finite) with seeds and masks. The spec cases
are quick; the special-value cases are quick in f32 under one fold and one tree policy (and one
policy per reducer), full otherwise."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tilefoundry.semantics.dtypes import FORMATS, DType, bits_dtype, from_bits
from tilefoundry.semantics.ir import Call, Function, Module, Var
from tilefoundry.semantics.ops.tile_reduce import CustomReduce, MaskedReduce, SeededReduce
from tilefoundry.semantics.reductions import POLICIES
from tilefoundry.semantics.types import TensorType

F32, F16, BF16 = DType.F32, DType.F16, DType.BF16
E4M3, E5M2 = DType.FP8E4M3, DType.FP8E5M2
I32, I8, BOOL = DType.I32, DType.I8, DType.BOOL
ENTRY = "f"

S_SEED = ('Tile design, reduction policies table: fold_left "op(op(op(z, x0), x1), x2)", '
          'fold_right "op(x0, op(x1, op(x2, z)))", ordered_tree "Regroup; preserve leaf order '
          'and the seed\'s reference position", unordered_tree "Regroup and permute '
          'contributions; seed exactly once"')
S_EMPTY = ('Tile design: "incoming state is included once, in its specified position; it is '
           'not copied into every worker\'s partial. Empty fibers return that seed."')
S_MASK = ('Tile design: "Masked-out occurrences are skipped; padded physical lanes may use an '
          'identity only when it is valid under the selected arithmetic semantics, otherwise '
          'partials carry validity."')
S_WELFORD = ('Tile design: "A custom state reduction remains compact. Welford normalization, '
             'for example, uses one state"; "Without exact laws, the tree policy must admit the '
             'changed results for that compatible reducer."')
S_PRODUCT = ('Tile design: "Independent states may form a product reducer with permissions '
             'checked for each component"')
S_RIGHT = ('Tile design: "Right fold visits contributions in reverse source order and uses the '
           'stated element/state operand orientation" ... "For x = [1, 2, 3] these examples '
           'yield left = -6, right = 2."')


def _cast(vals, dt: DType) -> np.ndarray:
    from tilefoundry.semantics.dtypes import cast

    a = np.asarray(vals, np.float64)
    if dt.is_float:
        return np.ascontiguousarray(cast(a.astype(np.float32), dt))
    return np.ascontiguousarray(a.astype(FORMATS[dt].storage))


def _module(op, arrays: list[np.ndarray], dts: list[DType]) -> tuple[Module, str, list]:
    params = [Var(n, TensorType(tuple(a.shape), d)) for n, a, d in
              zip(("x", "seed", "mask"), arrays, dts, strict=False)]
    return Module((Function(ENTRY, tuple(params), Call(op, tuple(params)), None),)), ENTRY, arrays


def _seeded(kind: str, policy: str, dt: DType, x, z, mask=None, axes=(1,),
            keepdim=False) -> Callable:
    def build():
        xa, za = _cast(x, dt), _cast(z, dt)
        if mask is None:
            return _module(SeededReduce(axes, kind, policy, keepdim), [xa, za], [dt, dt])
        return _module(MaskedReduce(axes, kind, policy, keepdim),
                       [xa, za, np.asarray(mask, bool)], [dt, dt, BOOL])
    return build


def _custom(name: str, policy: str, dt: DType, x, s, axes=(1,)) -> Callable:
    def build():
        xa, sa = _cast(x, dt), np.asarray(s, np.float32)
        return _module(CustomReduce(axes, name, policy, False), [xa, sa], [dt, F32])
    return build


def _special(dt: DType) -> np.ndarray:
    from tilefoundry.conformance.catalog.build import special_values

    return special_values(dt)


def _special_seeded(kind: str, policy: str, dt: DType, masked: bool, cid: str) -> Callable:
    def build():
        import hashlib

        rng = np.random.default_rng(int.from_bytes(hashlib.sha256(cid.encode()).digest()[:8],
                                                   "little"))
        sp = _special(dt)
        x = sp[rng.integers(0, sp.size, (6, 5))]
        z = sp[rng.integers(0, sp.size, (6,))]
        arrays, dts = [np.ascontiguousarray(x), np.ascontiguousarray(z)], [dt, dt]
        if masked:
            arrays.append(rng.random((6, 5)) < 0.6)
            dts.append(BOOL)
            op = MaskedReduce((1,), kind, policy, False)
        else:
            op = SeededReduce((1,), kind, policy, False)
        return _module(op, arrays, dts)
    return build


def _special_custom(name: str, policy: str, dt: DType, cid: str) -> Callable:
    def build():
        import hashlib

        from tilefoundry.semantics.reducers import REDUCERS

        r = REDUCERS[name]
        rng = np.random.default_rng(int.from_bytes(hashlib.sha256(cid.encode()).digest()[:8],
                                                   "little"))
        sp = _special(dt)
        x = np.ascontiguousarray(sp[rng.integers(0, sp.size, (6, 3))])
        ident = r.identity if r.identity is not None else (0.0,) * len(r.state)
        s = np.tile(np.asarray(ident, np.float32), (6, 1))
        s[3:] = _special(F32)[rng.integers(0, _special(F32).size, (3, len(r.state)))]
        if name == "welford":  # well-formed prior states: (count, mean, m2) with count > 0
            s[3:, 0] = np.float32(2.0)
            s[3:, 2] = np.abs(s[3:, 2])
        return _module(CustomReduce((1,), name, policy, False), [x, s], [dt, F32])
    return build


def _empty(dt: DType) -> np.ndarray:
    if dt.is_float:
        return np.ascontiguousarray(from_bits(np.zeros((3, 0), bits_dtype(dt)), dt))
    return np.zeros((3, 0), FORMATS[dt].storage)


def tile_reduce_cases(acc) -> None:
    add = acc.add
    big = 2.0 ** 24
    # --- the seed's position, per policy ------------------------------------------------------
    # fold_left ((z + 1) + 1) - 2^24 = 0 with z = 2^24 first; seeding last would give 2
    for policy, x, z in (("fold_left", [[1.0, 1.0, -big]], [big]),
                         ("fold_right", [[-big, 1.0, 1.0]], [big])):
        add(f"spec/tile/seeded-reduce/seed-position-{policy}/f32", "tile",
            _seeded("sum", policy, F32, x, z), ops=("SeededReduce",), dtypes=(F32,),
            spec=S_SEED, tier="quick")
    for policy in ("ordered_tree", "unordered_tree"):
        # the leaves [2^24, 1, 1]: trees give 2^24 or 2^24 + 2; a seed per leaf gives 2^25 + ...
        add(f"spec/tile/seeded-reduce/seed-once-{policy}/f32", "tile",
            _seeded("sum", policy, F32, [[1.0, 1.0], [3.0, -3.0]], [big, 0.5]),
            ops=("SeededReduce",), dtypes=(F32,), spec=S_SEED, tier="quick")
    for policy in POLICIES:
        for dt in (F32, BF16, E4M3, I32):
            add(f"spec/tile/seeded-reduce/sum-{policy}/{dt}", "tile",
                _seeded("sum", policy, dt, [[1, 2, 3, 4], [-1, 0.5 if dt.is_float else 5, 7, 2]],
                        [10, -3]), ops=("SeededReduce",), dtypes=(dt,), spec=S_SEED,
                tier="quick")
    # --- empty fibers return the seed ---------------------------------------------------------
    for kind in ("sum", "max", "min"):
        for dt in (F32, F16, E4M3, I8, BOOL):
            if dt is BOOL and kind == "sum":
                continue
            for policy in ("fold_left", "unordered_tree"):
                seeds = [True, False, True] if dt is BOOL else \
                    ([-0.0, 7.0, -2.5] if dt.is_float else [-5, 7, 0])

                def build(kind=kind, dt=dt, policy=policy, seeds=seeds):
                    za = np.asarray(seeds, bool) if dt is BOOL else _cast(seeds, dt)
                    xa = np.zeros((3, 0), bool) if dt is BOOL else _empty(dt)
                    return _module(SeededReduce((1,), kind, policy, False), [xa, za], [dt, dt])

                add(f"spec/tile/seeded-reduce/empty-returns-seed-{kind}-{policy}/{dt}", "tile",
                    build, ops=("SeededReduce",), dtypes=(dt,), spec=S_EMPTY, tier="quick")
    # --- masks: skipped, never padded -----------------------------------------------------------
    for policy in POLICIES:
        # active leaves all -0 with a -0 seed: -0; a masked lane read as +0 gives +0
        add(f"spec/tile/masked-reduce/skip-not-plus-zero-{policy}/f32", "tile",
            _seeded("sum", policy, F32, [[-0.0, 5.0, -0.0, 3.0], [2.0, 1.0, -0.0, -0.0]],
                    [-0.0, -0.0], mask=[[True, False, True, False], [False, False, True, True]]),
            ops=("MaskedReduce",), dtypes=(F32,), spec=S_MASK, tier="quick")
        add(f"spec/tile/masked-reduce/all-masked-returns-seed-{policy}/f32", "tile",
            _seeded("sum", policy, F32, [[1.0, 2.0], [3.0, -0.0]], [-0.0, 2.5],
                    mask=[[False, False], [False, False]]),
            ops=("MaskedReduce",), dtypes=(F32,), spec=S_MASK + " / " + S_EMPTY, tier="quick")
    for kind in ("max", "min"):
        # fp8e4m3 has no infinity: a masked-out NaN lane is skipped, the seed -448 stays valid
        add(f"spec/tile/masked-reduce/{kind}-skips-nan-lane/fp8e4m3", "tile",
            _seeded(kind, "unordered_tree", E4M3, [[float("nan"), 1.0, 2.0], [448, -448, 0.5]],
                    [-448.0, 448.0], mask=[[False, True, True], [False, False, True]]),
            ops=("MaskedReduce",), dtypes=(E4M3,), spec=S_MASK, tier="quick")
    add("spec/tile/masked-reduce/int-sum/i8", "tile",
        _seeded("sum", "fold_left", I8, [[100, 100, 27], [-128, 1, 1]], [0, -1],
                mask=[[True, True, False], [True, False, True]]),
        ops=("MaskedReduce",), dtypes=(I8,), spec=S_MASK, tier="quick")
    # --- custom reducers ------------------------------------------------------------------------
    w0 = [[0.0, 0.0, 0.0]] * 2
    for policy in POLICIES:
        add(f"spec/tile/custom-reduce/welford-{policy}/f32", "tile",
            _custom("welford", policy, F32, [[1.0, 2.0, 3.0, 4.0], [0.1, 0.7, -3.0, 1e6]], w0),
            ops=("CustomReduce",), dtypes=(F32,), spec=S_WELFORD, tier="quick")
        add(f"spec/tile/custom-reduce/sum-max-{policy}/bf16", "tile",
            _custom("sum_max", policy, BF16, [[1.0, 2.0, 3.0, -0.0], [0.1, 0.7, -3.0, 9.0]],
                    [[-0.0, float("-inf")], [2.0, 100.0]]),
            ops=("CustomReduce",), dtypes=(BF16,), spec=S_PRODUCT, tier="quick")
    # a Welford seed carrying a prior state: merged once, leftmost
    add("spec/tile/custom-reduce/welford-seeded-state/f32", "tile",
        _custom("welford", "ordered_tree", F32, [[5.0, 6.0], [1.0, 1.0]],
                [[2.0, 1.5, 0.5], [0.0, 0.0, 0.0]]),
        ops=("CustomReduce",), dtypes=(F32,), spec=S_WELFORD + " / " + S_EMPTY, tier="quick")
    # Welford beyond enumeration (issue 37): judged by the bound of every merge tree, never
    # UNJUDGED; rows: a trend, near-cancelling large values, mixed magnitudes; a prior state
    for n, policy, tier in ((8, "ordered_tree", "quick"), (1000, "unordered_tree", "quick"),
                            (8, "unordered_tree", "full"), (1000, "ordered_tree", "full")):
        i = np.arange(n, dtype=np.float64)
        rows = [i, 1e6 + (i % 7) * 0.125, np.where(i % 2, 3.0, -1e-3) * (1 + i / n)]
        add(f"spec/tile/custom-reduce/welford-{policy}-len{n}/f32", "tile",
            _custom("welford", policy, F32, rows,
                    [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [3.0, 2.5, 1.25]]),
            ops=("CustomReduce",), dtypes=(F32,), spec=S_WELFORD, tier=tier)
    for policy in ("fold_left", "fold_right"):
        add(f"spec/tile/custom-reduce/difference-{policy}-orientation/f32", "tile",
            _custom("difference", policy, F32, [[1.0, 2.0, 3.0]], [[0.0]]),
            ops=("CustomReduce",), dtypes=(F32,), spec=S_RIGHT, tier="quick")
    # --- special values -------------------------------------------------------------------------
    for dt in (F32, BF16, F16):
        for name in ("welford", "sum_max", "difference"):
            for policy in POLICIES:
                if name == "difference" and not policy.startswith("fold"):
                    continue
                cid = f"special/tile/custom-reduce-{name}-{policy}/{dt}"
                quick = dt is F32 and (name, policy) in (("welford", "ordered_tree"),
                                                          ("sum_max", "unordered_tree"),
                                                          ("difference", "fold_right"))
                add(cid, "tile", _special_custom(name, policy, dt, cid), ops=("CustomReduce",),
                    dtypes=(dt,), spec="special values through a custom reducer",
                    tier="quick" if quick else "full")
    for dt in (F32, BF16, F16, E4M3, E5M2):
        for kind in ("sum", "max", "min"):
            for masked in (False, True):
                for policy in ("fold_left", "fold_right", "ordered_tree", "unordered_tree"):
                    if policy.startswith("fold_right") and kind != "sum":
                        continue
                    op = "masked-reduce" if masked else "seeded-reduce"
                    cid = f"special/tile/{op}-{kind}-{policy}/{dt}"
                    add(cid, "tile", _special_seeded(kind, policy, dt, masked, cid),
                        ops=("MaskedReduce" if masked else "SeededReduce",), dtypes=(dt,),
                        spec="special values through a seeded / masked reduction",
                        tier="quick" if dt is F32 and policy in ("fold_left", "unordered_tree")
                        else "full")
