"""Coverage by construction (issue 16): the quick tier exercises every op feature (op x dtype x
attribute values x sharding pattern) and every cast boundary class that the full tier and the
program pool exercise; the boundary classes are decided exactly."""

from __future__ import annotations

import numpy as np
import pytest

from tilefoundry.conformance import coverage as cov
from tilefoundry.conformance.catalog import build_catalog
from tilefoundry.semantics.dtypes import cast
from tilefoundry.semantics.formats import DType

F32, BF16, E4M3 = DType.F32, DType.BF16, DType.FP8E4M3


def _classes(vals, dst, **kw) -> set[str]:
    return cov.cast_classes(np.asarray(vals, np.float32), dst, **kw)


def test_cast_boundary_classes_of_constructed_values():
    """bf16 keeps 8 significand bits: 1 + 2^-8 is the midpoint of 1 and 1 + 2^-7 (a tie),
    1 + 2^-8 + 2^-23 is one f32 ulp above it (a near-tie), 1 + 2^-7 is on the grid; 2^-130 is
    below bf16's smallest normal 2^-126 (subnormal), 2^-140 below half its smallest subnormal
    2^-133 (underflow); 3.4e38 is above bf16's max 3.3895e38."""
    assert _classes([1 + 2.0 ** -8], BF16) == {"tie"}
    assert _classes([1 + 2.0 ** -8 + 2.0 ** -23], BF16) == {"near-tie"}
    assert _classes([1 + 2.0 ** -7], BF16) == {"exact"}
    assert _classes([2.0 ** -130], BF16) == {"exact", "subnormal"}
    assert _classes([2.0 ** -140], BF16) == {"underflow"}
    assert _classes([3.4e38], BF16) == {"overflow"}
    assert _classes([np.nan, -np.inf, -0.0], BF16) == {"nan", "inf", "zero"}
    # fp8e4m3: max 448, the next step would be 480; 464 is their midpoint and ties to the
    # even 448 (above the max, rounding back to it), 470 rounds past it
    assert _classes([464.0], E4M3) == {"above-max"}
    assert _classes([470.0], E4M3) == {"overflow"}
    assert _classes([470.0], E4M3, overflow="saturate") == {"overflow"}
    assert _classes([1.5, -2.0, 3e9, np.nan], DType.I32) == {"fraction", "in-range",
                                                             "out-of-range", "nan"}
    assert cov.cast_classes(np.array([300, 5], np.int32), DType.I8) == {"in-range", "wraps"}


def test_constructed_midpoints_of_random_neighbours_are_ties():
    """Independent of the classifier: for random bf16 values a and their upper neighbours b,
    (a + b) / 2 is exact in f32 and is a tie; one f32 step either side of it is a near-tie."""
    rng = np.random.default_rng(16)
    a = cast(rng.uniform(-4, 4, 64).astype(np.float32), BF16).astype(np.float32)
    a = a[a != 0]
    bits = a.view(np.uint32) + np.uint32(1 << 16)  # the next bf16 away from zero
    b = bits.view(np.float32)
    m = ((a.astype(np.float64) + b.astype(np.float64)) / 2).astype(np.float32)
    assert np.all((a.astype(np.float64) + b.astype(np.float64)) / 2 == m)  # exact in f32
    for t in m:
        assert cov.cast_classes(np.array([t]), BF16) == {"tie"}, t
        for d in (np.float32(np.inf), np.float32(-np.inf)):
            assert cov.cast_classes(np.array([np.nextafter(t, d)]), BF16) == {"near-tie"}, t


@pytest.fixture(scope="module")
def catalog():
    return build_catalog(0)


@pytest.fixture(scope="module")
def universe(catalog):
    return cov.coverage(cov.universe_cases(catalog))


def test_the_quick_tier_has_no_holes(catalog, universe):
    """Against the full tier plus the program pool. A failure lists the holes; after a change
    to the catalog or the generator run `tilefoundry conformance coverage --write-fill`."""
    quick = cov.coverage(catalog.tier("quick"))
    op_h, cast_h = cov.holes(quick, universe)
    assert not quick.errors and not universe.errors, (quick.errors, universe.errors)
    assert not op_h and not cast_h, cov.report(quick, universe, "quick", limit=20)
    assert len(universe.ops) > 1000 and len(universe.casts) > 500  # it measures something


def test_dropping_a_case_opens_a_hole(catalog, universe):
    """The measure can fail: without the fill the quick tier has holes (counted), and the
    report names them."""
    fill = cov.load_fill()
    assert fill["promote"] and fill["programs"]
    unfilled = [c for c in catalog.tier("quick") if c.id not in set(fill["promote"]) and
                not c.id.startswith("program/cover/")]
    without = cov.coverage(unfilled)
    op_h, cast_h = cov.holes(without, universe)
    assert op_h and cast_h
    text = cov.report(without, universe, "quick", limit=5)
    assert f"holes in quick: {len(op_h)} op features, {len(cast_h)} cast boundary" in text


def test_the_fill_ships_with_the_package():
    """A non-editable install (the GPU machine's) had no quick_fill.json: its quick tier was the
    791 cases without the fill. The file is package data of tilefoundry.conformance."""
    import tomllib
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    st = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert "tilefoundry.conformance" in st["packages"]
    assert cov.FILL_PATH in st["package-data"]["tilefoundry.conformance"]
    assert cov.fill_file().exists()
