"""kir.verify: every rule rejects a malformed kernel / program, naming the kernel and the
offending instruction as to_text prints it."""

from __future__ import annotations

import numpy as np
import pytest

from tilefoundry.compiler import kir
from tilefoundry.compiler.errors import KernelIRError
from tilefoundry.compiler.kir import (
    BinOp,
    Broadcast,
    Buffer,
    Cast,
    Const,
    Coord,
    Dot,
    EdgeMask,
    HostLoop,
    Kernel,
    Load,
    Math,
    Program,
    Reduce,
    Round,
    Store,
    TileLoop,
    Widen,
)


def buf(name, dtype="f32", shape=(8,), kind="temp", **kw):
    return Buffer(name, dtype, shape, kir.c_strides(shape), kind, **kw)


X = buf("x", kind="input")
Y = buf("y")
XB = buf("xb", "bf16", kind="input")
YB = buf("yb", "bf16")


def program(*steps, buffers=(X, Y, XB, YB), outputs="y", inputs=("x", "xb")):
    return Program("p", tuple(buffers), inputs, outputs, tuple(steps))


def k(*body, domain=(8,), block=(8,), loop_axes=()):
    return Kernel("k", domain, block, tuple(body), loop_axes)


COPY = (Load("%0", "x", (1,)), Store("y", (1,), "%0"))


def rejects(prog, *fragments):
    with pytest.raises(KernelIRError) as e:
        kir.verify(prog)
    for f in fragments:
        assert f in str(e.value), str(e.value)
    return str(e.value)


def test_a_valid_program_verifies_and_prints():
    body = (Load("%0", "xb", (1,)), Widen("%1", "%0", "f32"), Const("%2", 2.0, "f32"),
            BinOp("%3", "mul", "%1", "%2"), Round("%4", "%3", "bf16"), Store("yb", (1,), "%4"))
    p = program(k(*body), outputs="yb")
    kir.verify(p)
    text = kir.to_text(p)
    assert "%3 = mul %1, %2 : f32[8]" in text and "store yb[d0] <- %4" in text
    kir.verify(k(*COPY), [X, Y])  # one kernel against a buffer list


def test_ssa_use_before_definition_and_redefinition():
    rejects(program(k(Store("y", (1,), "%9"))), "kernel k", "store y[d0] <- %9",
            "not defined before")
    rejects(program(k(Load("%0", "x", (1,)), Load("%0", "x", (1,)), Store("y", (1,), "%0"))),
            "%0 = load x[d0]", "defined twice")


def test_float_arithmetic_only_in_f32_or_f64():
    body = (Load("%0", "xb", (1,)), BinOp("%1", "add", "%0", "%0"), Store("yb", (1,), "%1"))
    rejects(program(k(*body), outputs="yb"), "%1 = add %0, %0", "widen, op, round")
    body = (Load("%0", "xb", (1,)), kir.UnOp("%1", "neg", "%0"), Store("yb", (1,), "%1"))
    rejects(program(k(*body), outputs="yb"), "%1 = neg %0", "f32 / f64")


def test_ragged_access_needs_a_mask():
    x10, y10 = buf("x", shape=(10,), kind="input"), buf("y", shape=(10,))
    bad = k(Load("%0", "x", (1,)), Store("y", (1,), "%0"), domain=(10,), block=(8,))
    rejects(program(bad, buffers=(x10, y10), inputs=("x",)), "%0 = load x[d0]",
            "unmasked access on ragged axis d0")
    ok = k(EdgeMask("%m", (0,)), Load("%0", "x", (1,), mask="%m"),
           Store("y", (1,), "%0", mask="%m"), domain=(10,), block=(8,))
    kir.verify(program(ok, buffers=(x10, y10), inputs=("x",)))


def test_stores_to_read_only_buffers_and_dtype_mismatch():
    rejects(program(k(Load("%0", "x", (1,)), Store("x", (1,), "%0"))), "store x[d0] <- %0",
            "read-only")
    rejects(program(k(Load("%0", "x", (1,)), Store("yb", (1,), "%0")), outputs="yb"),
            "holds bf16")


def test_a_store_may_not_collapse_a_varying_value():
    y1 = buf("y", shape=(1,))
    rejects(program(k(Load("%0", "x", (1,)), Store("y", (0,), "%0")),
                    buffers=(X, y1, XB, YB)), "store y[0] <- %0", "lanes would race")


def test_static_offsets_stay_inside_the_buffer():
    rejects(program(k(Load("%0", "x", (2,)), Store("y", (1,), "%0"))), "load x[2*d0]",
            "leave buffer x")


def test_reductions_need_the_whole_axis_and_a_spanned_operand():
    x2, y2 = buf("x", shape=(4, 64), kind="input"), buf("y", shape=(4, 1))
    split = Kernel("k", (4, 64), (4, 32), (
        Load("%0", "x", (64, 1)), Reduce("%1", "%0", (1,), "sum", "fold_left"),
        Store("y", (1, 0), "%1")))
    rejects(program(split, buffers=(x2, y2), inputs=("x",)), "reduce.sum %0 over d1",
            "split across program instances")
    bcast = Kernel("k", (4, 64), (4, 64), (
        Load("%0", "x", (64, 0)), Reduce("%1", "%0", (1,), "sum", "fold_left"),
        Store("y", (1, 0), "%1")))
    rejects(program(bcast, buffers=(x2, y2), inputs=("x",)), "operand is broadcast")
    rejects(program(k(Load("%0", "x", (1,)), Reduce("%1", "%0", (0,), "sum_hi", "fold_left"),
                      Store("y", (0,), "%1"))), "compensated")
    rejects(program(k(Load("%0", "xb", (1,)), Reduce("%1", "%0", (0,), "sum", "fold_left"),
                      Store("yb", (0,), "%1")), outputs="yb"), "widen first")


def test_loop_axes():
    x2, y2 = buf("x", shape=(4, 64), kind="input"), buf("y", shape=(4, 1))

    def looped(*body, loop_axes=(1,)):
        return Kernel("k", (4, 64), (4, 16), tuple(body), loop_axes)

    acc = Const("%a0", -0.0, "f32"), Broadcast("%a", "%a0", (0,))
    inner = (Load("%2", "x", (64, 1)), Reduce("%3", "%2", (1,), "sum", "fold_left", None, "%c"))
    good = looped(*acc, TileLoop(("%o",), 1, ("%c",), ("%a",), inner, ("%3",)),
                  Store("y", (1, 0), "%o"))
    kir.verify(program(good, buffers=(x2, y2), inputs=("x",)))
    rejects(program(looped(Coord("%0", 1), Store("y", (1, 0), "%0")), buffers=(
        x2, buf("y", "i64", (4, 1))), inputs=("x",)), "%0 = coord d1", "outside a tile_loop")
    rejects(program(looped(*acc, TileLoop(("%o",), 1, ("%c",), ("%a",), inner, ("%3",)),
                           Store("y", (1, 0), "%o"), loop_axes=()),
                    buffers=(x2, y2), inputs=("x",)), "not in the kernel's loop_axes")
    bad_yield = TileLoop(("%o",), 1, ("%c",), ("%a",), (Load("%2", "x", (64, 1)),), ("%2",))
    rejects(program(looped(*acc, bad_yield, Store("y", (1, 0), "%o")), buffers=(x2, y2),
                    inputs=("x",)), "does not match carry")


def test_conversion_directions_and_modes():
    rejects(program(k(Load("%0", "x", (1,)), Widen("%1", "%0", "f32"), Store("y", (1,), "%1"))),
            "%1 = widen %0 -> f32", "narrower float")
    rejects(program(k(Load("%0", "x", (1,)), Round("%1", "%0", "f64"), Store("y", (1,), "%1"))),
            "round f32 -> f64")
    rejects(program(k(Load("%0", "x", (1,)), Cast("%1", "%0", "bf16", "nonfinite", "up"),
                      Store("yb", (1,), "%1")), outputs="yb"), "only taken by f8e8m0")
    rejects(program(k(Load("%0", "x", (1,)), Cast("%1", "%0", "i32", "saturate"),
                      Store("y", (1,), "%1"))), "takes no overflow")


def test_constants_math_and_indices():
    rejects(program(k(Const("%0", 1.0, "bf16"), Store("yb", (1,), "%0")), outputs="yb"),
            "constants live in f32 / f64")
    rejects(program(k(Const("%0", 0.1, "f32"), Store("y", (1,), "%0"))), "not exactly an f32")
    yi = buf("yi", "i32")
    rejects(program(k(Const("%0", 1, "i32"), Math("%1", "exp", "%0"), Store("yi", (1,), "%1")),
                    buffers=(X, Y, XB, YB, yi)), "math.exp %0", "float operand")
    idx = (Const("%i", 1, "i32"), Load("%0", "x", (0,), index=(("%i", 1),)),
           Store("y", (1,), "%0"))
    rejects(program(k(*idx)), "indices are i64")


def test_dot_and_broadcast_and_blocks():
    x2 = buf("x", shape=(4, 8), kind="input")
    y2 = buf("y", shape=(4, 1))
    dot = Kernel("k", (4, 8), (4, 8), (Load("%0", "x", (8, 1)), Cast("%1", "%0", "i32"),
                                       Dot("%2", "%1", "%1", 1), Store("y", (1, 0), "%2")))
    rejects(program(dot, buffers=(x2, y2), inputs=("x",)), "dot %1, %1 over d1", "f32 (or i64)")
    rejects(program(k(Load("%0", "x", (1,)), Broadcast("%1", "%0", (3,)),
                      Store("y", (1,), "%1"))), "not axes of the domain")
    rejects(program(k(*COPY, block=(6,))), "not a power of two")


def test_program_level_rules():
    t = buf("t")
    rejects(program(k(Load("%0", "t", (1,)), Store("y", (1,), "%0")),
                    buffers=(X, Y, XB, YB, t)), "reads buffer t before any step writes it")
    rejects(program(k(*COPY), buffers=(X, Y, XB, YB, buf("v", kind="alias", base="nope"))),
            "alias of unknown buffer")
    rejects(program(k(*COPY), buffers=(X, Y, X)), "declared twice")
    rejects(program(buffers=(X, Y, XB, YB)), "output y is never written")
    iv = Buffer("i", "i32", (), (), "temp")
    c = buf("c")
    body = (Kernel("kb", (8,), (8,), COPY, ()),)
    ok = HostLoop("L", "i", 0, 3, 1, ("c",), ("x",), body, ("y",))
    kir.verify(program(ok, buffers=(X, Y, XB, YB, iv, c), outputs="c"))
    rejects(program(HostLoop("L", "y", 0, 3, 1, ("c",), ("x",), body, ("y",)),
                    buffers=(X, Y, XB, YB, iv, c), outputs="c"), "rank-0 integer")
    rejects(program(HostLoop("L", "i", 0, 3, 1, ("c",), ("x",), body, ("yb",)),
                    buffers=(X, Y, XB, YB, iv, c), outputs="c"), "does not match carry")
    bad_const = Buffer("q", "f32", (2,), (1,), "const", data=np.zeros(3, np.float32))
    rejects(program(k(*COPY), buffers=(X, Y, XB, YB, bad_const)), "const data")
