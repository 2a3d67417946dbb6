"""Gather with fill (D388) and the Tile design's Hillis–Steele scan written in IR with it: on
integers the chain's prefixes equal Scan's reference exactly; on floats each is admitted by
Scan(add, ordered_tree)'s judge (an order-preserving regrouping of its prefix) and a chain that
shifted in garbage instead of the fill is not; the chain's extent is every lane's prefix
(n = 13, not a power of two). The fill cases read the fill at every out-of-range index
(negative ones included) and move in-range elements' bits."""

from __future__ import annotations

import numpy as np
import pytest

from tilefoundry.compiler.pipeline import compile
from tilefoundry.conformance.catalog import build_catalog
from tilefoundry.semantics.dtypes import to_bits
from tilefoundry.semantics.evaluator.core import evaluate
from tilefoundry.semantics.reductions import scan, scan_admits


@pytest.fixture(scope="module")
def cases():
    return {c.id: c for c in build_catalog(0).tier("quick")
            if c.id.startswith(("spec/tile/scan/hillis-steele-in-ir/", "spec/tile/gather-fill/"))}


@pytest.mark.parametrize("dt", ["i32", "i8"])
def test_hillis_steele_in_ir_is_the_scan_on_integers(cases, dt):
    m, e, ins = cases[f"spec/tile/scan/hillis-steele-in-ir/{dt}"].build()
    hs, sc = evaluate(m, e, ins)
    assert np.array_equal(hs, sc)
    assert np.array_equal(hs, scan(ins[0], "add", 1))


@pytest.mark.parametrize("dt", ["f32", "bf16"])
def test_hillis_steele_in_ir_is_an_admitted_float_scan(cases, dt):
    m, e, ins = cases[f"spec/tile/scan/hillis-steele-in-ir/{dt}"].build()
    hs, sc = evaluate(m, e, ins)
    assert scan_admits(hs, ins[0], "add", 1, policy="ordered_tree").admitted.all()
    assert not scan_admits(hs, ins[0], "add", 1, policy="fold_left").admitted.all() or \
        np.array_equal(to_bits(hs), to_bits(sc))
    shifted_wrong = hs.copy()
    shifted_wrong[:, 1:] = hs[:, 1:] + hs[:, :1]  # the first lane entered twice
    assert not scan_admits(shifted_wrong, ins[0], "add", 1).admitted.all()


def test_fill_cases_read_the_fill_out_of_range(cases):
    m, e, ins = cases["spec/tile/gather-fill/fill-2.5-batch0/f32"].build()
    out = evaluate(m, e, ins)
    x, idx = ins
    assert idx.tolist() == [-1, 0, 5, 6, -6]
    assert out[:, [0, 3, 4]].tolist() == [[2.5] * 3] * 3
    assert np.array_equal(to_bits(out[:, 1]), to_bits(x[:, 0]))  # NaN payloads kept
    assert np.array_equal(to_bits(out[:, 2]), to_bits(x[:, 5]))
    m, e, ins = cases["spec/tile/gather-fill/fill-m0.0-batch1/f32"].build()
    out = evaluate(m, e, ins)
    assert np.signbit(out[0, 0]) and out[0, 0] == 0 and out[1, 3] == 0 and np.signbit(out[1, 3])


@pytest.mark.parametrize("target", ["interp", "simd"])
def test_fill_cases_compile_bit_identically(cases, target):
    for cid, case in cases.items():
        m, e, ins = case.build()
        ref = evaluate(m, e, ins)
        out = compile(m, e, [np.shape(a) for a in ins], target)(ins)
        refs, outs = (ref, out) if isinstance(ref, tuple) else ((ref,), (out,))
        for o, r in zip(outs, refs, strict=True):
            if cid.startswith("spec/tile/gather-fill/") or "i" in cid.rsplit("/", 1)[1]:
                assert np.array_equal(to_bits(np.asarray(o)), to_bits(np.asarray(r))), cid
