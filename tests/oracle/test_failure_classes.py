"""The distinct classes of an output's rejected elements (issue 22, deliverable 5: 'the
distinct failing element classes — not just the worst one'). Expected classes are derived by
hand from the bit patterns below."""

from __future__ import annotations

import numpy as np

from tilefoundry.oracle.compare import failure_classes


def test_float_classes_by_kind_and_ulp_bucket():
    one_up = np.nextafter(np.float32(1.0), np.float32(2.0))  # 0x3f800001
    e = np.array([1.0, 2.0, np.nan, 0.0, 3.0, 1e-45, 5.0, 4.0], np.float32)
    o = np.array([one_up, 2.0, 1.0, -0.0, 3.0000005, 0.0, np.inf, 4.0000005], np.float32)
    ok = e.view(np.uint32) == o.view(np.uint32)
    got = [(c[0], c[1], c[2], c[3], c[4]) for c in failure_classes(ok, e, o)]
    # 4.0000005 rounds to 0x40800001, one ulp above 4.0; 3.0000005 to 0x40400002 (two ulp).
    # The most frequent class first, then by the first index.
    assert got == [
        ("normal -> normal (1 ulp)", 2, (0,), "0x3f800000", "0x3f800001"),
        ("NaN -> normal", 1, (2,), "0x7fc00000", "0x3f800000"),
        ("+0 -> -0", 1, (3,), "0x00000000", "0x80000000"),
        ("normal -> normal (2-15 ulp)", 1, (4,), "0x40400000", "0x40400002"),
        ("subnormal -> +0 (1 ulp)", 1, (5,), "0x00000001", "0x00000000"),
        ("normal -> +inf", 1, (6,), "0x40a00000", "0x7f800000"),
    ]


def test_integer_classes_and_nothing_rejected():
    e = np.array([1, 2, 3, 7], np.int32)
    o = np.array([2, 2, 0, 9], np.int32)
    got = failure_classes(e == o, e, o)
    assert [(c[0], c[1], c[2]) for c in got] == [("observed > expected", 2, (0,)),
                                                 ("observed < expected", 1, (2,))]
    assert failure_classes(np.ones(3, bool), e[:3], e[:3]) == ()
