"""The exported hypothesis strategies (oracle/strategies.py): dtypes, shapes with DimVars and
envelopes, arrays weighted toward special values (bit patterns, exact in every format), meshes
and ShardLayouts."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import find, given
from hypothesis import strategies as st

from tilefoundry.oracle.strategies import (
    ALL_DTYPES,
    EVALUABLE_DTYPES,
    FLOAT_DTYPES,
    RandomSource,
    ValueSpec,
    arrays,
    bind,
    bindings,
    dimvars,
    draw_array,
    dtypes,
    meshes,
    shapes,
    shard_layouts,
    special_codes,
    tie_and_carry_codes,
    topology_of,
)
from tilefoundry.semantics.dtypes import cast, to_bits
from tilefoundry.semantics.evaluator.core import evaluate
from tilefoundry.semantics.evaluator.mesh import shard, unshard
from tilefoundry.semantics.formats import FORMATS, DType, dtype_of
from tilefoundry.semantics.ir import Call, Function, Module, Var
from tilefoundry.semantics.ops import Reshard
from tilefoundry.semantics.types import (
    Broadcast,
    DimVar,
    Layout,
    Partial,
    ShardLayout,
    Split,
    TensorType,
)


# ---------------------------------------------------------------------------------------------
# dtypes
# ---------------------------------------------------------------------------------------------
@given(dtypes(ints=False, bools=False))
def test_dtypes_filters(dt):
    assert dt.is_float and FORMATS[dt].evaluable


def test_dtypes_reach_the_type_level_only_format_only_when_asked():
    assert find(dtypes(evaluable_only=False), lambda d: d is DType.F4E2M1) is DType.F4E2M1
    assert DType.F4E2M1 not in EVALUABLE_DTYPES and DType.F4E2M1 in ALL_DTYPES
    assert find(dtypes(), lambda d: True) is DType.F32  # shrinks to f32
    with pytest.raises(ValueError):
        dtypes(floats=False, ints=False, bools=False)


# ---------------------------------------------------------------------------------------------
# shapes
# ---------------------------------------------------------------------------------------------
@given(shapes(max_rank=4, max_side=5))
def test_static_shapes(shape):
    assert 0 <= len(shape) <= 4 and all(isinstance(d, int) and 1 <= d <= 5 for d in shape)


@given(st.data())
def test_symbolic_shapes_bindings_and_bind(data):
    shape = data.draw(shapes(symbolic=True, min_rank=1, max_envelope=6))
    for d in shape:
        assert (isinstance(d, int) and 1 <= d <= 4) or (
            isinstance(d, DimVar) and 1 <= d.lo < d.hi <= 6)
    env = data.draw(bindings(shape))
    dvs = {d.name: d for d in shape if isinstance(d, DimVar)}
    assert set(env) == set(dvs)
    assert all(dvs[k].lo <= v < dvs[k].hi for k, v in env.items())
    assert bind(shape, env) == tuple(env[d.name] if isinstance(d, DimVar) else d for d in shape)


@given(dimvars("K", min_lo=2, max_hi=9))
def test_dimvars_envelopes(dv):
    assert dv.name == "K" and 2 <= dv.lo < dv.hi <= 9


# ---------------------------------------------------------------------------------------------
# arrays
# ---------------------------------------------------------------------------------------------
@given(st.data())
def test_arrays_have_the_storage_dtype_and_shape(data):
    dt = data.draw(dtypes(evaluable_only=False))
    shape = data.draw(shapes(min_rank=0, max_rank=3))
    a = data.draw(arrays(dt, shape, specials=data.draw(st.booleans())))
    assert dtype_of(a) is dt and a.dtype == FORMATS[dt].storage
    assert a.shape == shape and a.flags.c_contiguous


@given(st.data())
def test_arrays_of_a_symbolic_shape_stay_in_the_envelope(data):
    n = DimVar("N", 2, 5)
    a = data.draw(arrays(DType.BF16, (n, 3)))
    assert 2 <= a.shape[0] < 5 and a.shape[1] == 3


def test_arrays_shrink_to_the_simplest_value():
    a = find(arrays(DType.F32, (4,)), lambda a: True)
    assert to_bits(a).tolist() == [0, 0, 0, 0]  # +0: the first special value


def _codes(dt: DType, n: int = 6000, specials: bool = True) -> np.ndarray:
    a = draw_array(RandomSource(11), dt, (n,), ValueSpec(specials=specials))
    return to_bits(a).astype(np.uint64)


@pytest.mark.parametrize("dt", FLOAT_DTYPES)
def test_float_arrays_are_weighted_toward_every_special_value(dt):
    info = FORMATS[dt]
    codes = set(int(c) for c in _codes(dt))
    sign = info.sign_bit
    want = {info.max_code}  # max finite
    if info.has_sign:
        want |= {info.max_code | sign}
    if info.implicit_bit:
        want |= {0, 1 << info.mbits}  # +0, smallest normal
        if info.has_sign:
            want.add(sign)  # -0
        if info.mbits:
            want |= {1, (1 << info.mbits) - 1}  # smallest / largest subnormal
    if info.has_inf:
        want |= {info.inf_code, info.inf_code | sign}
    if info.nan_code is not None:
        want.add(info.nan_code)
    missing = {hex(c) for c in want - codes}
    assert not missing, f"{dt}: special codes never drawn: {missing}"
    assert want <= set(special_codes(dt))
    # a good share of the draws are specials (30 % by construction)
    arr = _codes(dt)
    share = np.isin(arr, np.array(special_codes(dt), np.uint64)).mean()
    assert share > 0.25


@pytest.mark.parametrize("dt", [d for d in FLOAT_DTYPES if FORMATS[d].mbits > 1])
def test_ties_and_carries_for_every_narrower_format_are_drawn(dt):
    info = FORMATS[dt]
    pats = tie_and_carry_codes(info)
    mant = _codes(dt) & np.uint64((1 << info.mbits) - 1)
    drawn = set(int(m) for m in mant)
    for k in {FORMATS[d].mbits for d in FLOAT_DTYPES if FORMATS[d].mbits < info.mbits}:
        drop = info.mbits - k
        tie = 1 << (drop - 1)
        assert tie in pats and tie in drawn  # exactly half an ulp of the narrower format
        carry = (((1 << k) - 1) << drop) | tie  # all-ones kept bits: rounding up carries
        assert carry in pats and carry in drawn


def test_tie_patterns_are_exact_ties_and_carries_carry():
    """f32 -> bf16: low 16 bits 0x8000 lie exactly halfway between the two bf16 neighbours
    (round to even decides); all-ones kept bits with a tie carry into the exponent."""
    for kept, expect_up in ((0x00, False), (0x01, True), (0x7F, True)):
        code = (127 << 23) | (kept << 16) | 0x8000
        x = float(np.array([code], np.uint32).view(np.float32)[0])
        lo = float(np.array([code & 0xFFFF0000], np.uint32).view(np.float32)[0])
        hi = float(np.array([(code & 0xFFFF0000) + 0x10000], np.uint32).view(np.float32)[0])
        assert x - lo == hi - x > 0  # an exact tie
        y = cast(np.array([x], np.float32), DType.BF16)
        assert (int(to_bits(y)[0]) != code >> 16) == expect_up
        if kept == 0x7F:  # the carry reaches the exponent: 2^1
            assert float(y.astype(np.float32)[0]) == 2.0


@pytest.mark.parametrize("dt", FLOAT_DTYPES)
def test_ordinary_values_are_finite_and_moderate(dt):
    a = draw_array(RandomSource(3), dt, (2000,), ValueSpec(specials=False)).astype(np.float64)
    assert np.isfinite(a).all()
    nz = np.abs(a[a != 0])
    assert nz.size == 0 or (nz.min() >= 2.0 ** -4 and nz.max() <= 2.0 ** 4)


@pytest.mark.parametrize("dt", [DType.I8, DType.U8, DType.I32, DType.I64])
def test_int_arrays_reach_the_extremes(dt):
    info = FORMATS[dt]
    a = draw_array(RandomSource(5), dt, (4000,))
    vals = set(a.tolist())
    lo, hi = (-(1 << (info.bits - 1)), (1 << (info.bits - 1)) - 1) if info.signed else \
        (0, (1 << info.bits) - 1)
    assert {lo, hi, 0, 1} <= vals
    assert len(vals) > 50


@pytest.mark.parametrize("dt", [DType.F32, DType.BF16, DType.FP8E4M3, DType.I8, DType.U8])
def test_value_specs(dt):
    src = RandomSource(9)
    lo = 0 if dt is DType.U8 else -3
    a = draw_array(src, dt, (500,), ValueSpec.int_range(lo, 3)).astype(np.float64)
    assert set(a.tolist()) == set(range(lo, 4))
    if dt.is_float:
        r = draw_array(src, dt, (500,), ValueSpec.real_range(-2, 2)).astype(np.float64)
        assert np.isfinite(r).all() and np.abs(r).max() <= 2
        assert (r != np.round(r)).any()  # fractions, including ties k + 0.5
        assert np.isin(r, [-1.5, -0.5, 0.5, 1.5]).any()


def test_seeded_arrays_are_deterministic():
    for dt in ALL_DTYPES:
        a = draw_array(RandomSource(42), dt, (3, 4))
        b = draw_array(RandomSource(42), dt, (3, 4))
        assert a.tobytes() == b.tobytes()


# ---------------------------------------------------------------------------------------------
# meshes and ShardLayouts
# ---------------------------------------------------------------------------------------------
@given(st.data())
def test_meshes_and_shard_layouts_are_valid_and_distribute(data):
    mesh = data.draw(meshes())
    assert 1 <= len(mesh.axis_names) <= 2 and mesh.size <= 8
    shape = tuple(data.draw(st.lists(st.sampled_from([1, 2, 3, 4, 6]), min_size=1,
                                     max_size=3)))
    lay = data.draw(shard_layouts(shape, mesh))
    assert isinstance(lay, ShardLayout) and lay.layout.axis_extents == shape
    for a, m in zip(lay.attrs, mesh.axis_extents, strict=True):
        if isinstance(a, Split):
            assert lay.layout.positions[a.position] % m == 0
    x = data.draw(arrays(DType.F32, shape, spec=ValueSpec.int_range(-3, 3)))
    assert np.array_equal(unshard(shard(x, lay)), x)
    # a module over the mesh's topology takes the layout and Reshards it to Broadcast
    p = Var("x", TensorType(shape, DType.F32, lay))
    bcast = ShardLayout(mesh, (Broadcast(),) * len(mesh.axis_names), Layout(shape))
    m = Module((Function("f", (p,), Call(Reshard(layout=bcast), (p,)), None),),
               topology=topology_of(mesh))
    assert np.array_equal(unshard(evaluate(m, "f", [x])), x)


@given(st.data())
def test_shard_layouts_without_partials(data):
    mesh = data.draw(meshes(max_axes=1))
    lay = data.draw(shard_layouts((4, 6), mesh, partials=(), refine=False))
    assert not any(isinstance(a, Partial) for a in lay.attrs)
    assert lay.layout.shape == (4, 6)
    assert math.prod(mesh.axis_extents) == mesh.size
