"""Bounded work everywhere (issue 34, item 3): value constructors refuse values past the element
limits at construction, and the DSL's static evaluator bounds every operator it runs (``%``
formatting, repetition and concatenation of nested tuples, besides ``**`` / ``<<`` / ``*``)."""

from __future__ import annotations

import numpy as np
import pytest

from tilefoundry.limits import LimitError, use_limits
from tilefoundry.semantics.dsl import DSLError, parse_module
from tilefoundry.semantics.dsl.static_bounds import FormatRefused, percent_format_bound, static_size
from tilefoundry.semantics.ir import Constant


# --- value constructors ----------------------------------------------------------------------
def test_a_broadcast_constant_of_2_32_elements_is_refused_at_construction():
    big = np.broadcast_to(np.float32(0), (1 << 32,))  # a view: costs nothing to make
    with pytest.raises(LimitError, match=r"Constant of dtype float32: shape \(4294967296,\) has "
                                         r"4,294,967,296 elements, more than the limit "
                                         r"max_elements; raise it with TILEFOUNDRY_LIMITS") as ei:
        Constant(big)
    assert ei.value.limit == "max_elements"


def test_constant_limits_follow_use_limits():
    with use_limits(max_elements=10, max_value_bytes=1 << 20):
        Constant(np.zeros(10, np.float32))
        with pytest.raises(LimitError, match="max_elements"):
            Constant(np.zeros(11, np.float32))
    with use_limits(max_value_bytes=16):
        with pytest.raises(LimitError, match=r"takes 24 bytes.*max_value_bytes") as ei:
            Constant(np.zeros(6, np.float32))
        assert ei.value.limit == "max_value_bytes"


def test_mesh_values_are_within_the_limits():
    from tilefoundry.semantics.evaluator.mesh import PerDevice, Sharded, shard
    from tilefoundry.semantics.types import Layout, Mesh, ShardLayout, Split

    mesh = Mesh("device", ("x",), (2,))
    lay = ShardLayout(mesh, (Split(0),), Layout.natural((4, 3)))
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    s = shard(x, lay)
    assert s.data.shape == (2, 2, 3)
    with use_limits(max_elements=11):
        with pytest.raises(LimitError, match=r"Sharded .*12 elements.*max_elements"):
            shard(x, lay)
        with pytest.raises(LimitError, match=r"PerDevice .*12 elements.*max_elements"):
            PerDevice(mesh, np.zeros((2, 6), np.float32))
        with pytest.raises(LimitError, match="max_elements"):
            Sharded.from_devices(lay, s.data)
    from tilefoundry.semantics.evaluator.registry import EvaluationError
    with pytest.raises(EvaluationError, match="leading axes are the mesh extents"):
        PerDevice(mesh, np.zeros((3, 6), np.float32))


# --- the DSL's static evaluator ---------------------------------------------------------------
_HEAD = "from tilefoundry.semantics.dsl import *\n"


@pytest.mark.parametrize("src, match", [
    # the probe's: a 2 GiB string from one width
    ("S = '%0*d' % (2 ** 31 - 1, 1)\n", r"formatted string has up to 2,147,483,650 characters"
                                        r".*max_static_items"),
    ("S = '%.999999999f' % 1.0\n", "max_static_items"),
    ("S = '%2000000000d' % 1\n", "max_static_items"),
    ("S = '%" + "9" * 5000 + "d' % 1\n", "max_static_items"),
    ("S = b'%0*d' % (10 ** 9, 1)\n", "max_static_items"),
    ("A = 'x' * 100000\nS = '%(a)s' * 2 % {'a': A}\n", "max_static_items"),
    ("A = 'x' * 60000\nS = '%(a)s%(a)s' % {'a': A}\n", "max_static_items"),
    ("S = '%(a(b))s' % {'a(b)': 1}\n", "not a conversion spec the DSL reads"),
    # nested repetition: each tuple short, the expansion 10^9
    ("T = (1,) * 1000\nU = (T,) * 1000\nV = (U,) * 1000\n", r"3:5: operator \*: repeating "
                                                          r"1,000 items 1,000 times"),
    ("T = ('x' * 1000,) * 60\nU = T + T\n", "the concatenation has 120,000 items"),
    ("T = ('x' * 1000,) * 60\nU = (T, T)\n", r"the tuple has .* items.*max_static_items"),
    ("S = b'ab' * 10 ** 9\n", "max_static_items"),
    ("S = f'{1:2000000000}'\n", "not supported"),
    ("S = ','.join(('ab',) * 10)\n", "attribute access on str is not supported"),
    ("S = format(1, '2000000000')\n", "'format' is not bound"),
])
def test_every_static_operator_is_bounded(src, match):
    with pytest.raises(DSLError, match=match):
        parse_module(_HEAD + src)


def test_static_formatting_within_the_bound_still_computes():
    m = parse_module(_HEAD + "S = '%0*d|%s|%%' % (5, 42, 'ok')\nK = 2 ** 2\n@func\n"
                     "def f(x: Tensor[(K,), f32]) -> Tensor[(K,), f32]:\n    return x + x\n")
    assert m["f"].params[0].type.shape == (4,)


@pytest.mark.parametrize("fmt, args", [
    ("%0*d", (12, 7)), ("x%5.3f|%s", (1.5, "hello")), ("%(a)s-%(a)r", {"a": "q'"}),
    ("%-8x%+.2e%c%%", (255, 3.25e10, 65)), (b"%b:%5d", (b"ab", -3)), ("%o %X %i", (8, -255, 1)),
    ("%s", ((1, 2), )), ("%r", (("a", ("b",)),)), ("plain", ()), ("%.0f", (1e308,)),
])
def test_the_format_bound_is_an_upper_bound(fmt, args):
    assert len(fmt % args) <= percent_format_bound(fmt, args)


def test_the_format_bound_refuses_what_it_cannot_read():
    with pytest.raises(FormatRefused):
        percent_format_bound("%(a(b))s", {})
    with pytest.raises(FormatRefused):
        percent_format_bound("50%", ())


def test_static_size_counts_nested_items_once_per_reference():
    t = ("ab",) * 3  # 3 items of 2 characters
    assert static_size(t) == 6
    assert static_size((t, t)) == 12
    assert static_size((1,) * 7) == 7 and static_size(((),) * 5) == 5
    cyclic: list = [1]
    cyclic.append(cyclic)
    assert static_size(cyclic) > 10 ** 12
