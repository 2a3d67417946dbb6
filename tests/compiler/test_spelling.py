"""The shared scalar-spelling tables cover the kernel IR's sets (issue 36 item 5, D423).

Adding a ``math`` function to ``kir_math.MATH_OPS`` without spelling it for every renderer
fails here, not at render time with a NotSupportedError on some conformance case.
"""

from __future__ import annotations

import pytest

from tilefoundry.compiler import (
    kir,
    render_c,
    render_c_lanes,
    render_c_reduce,
    render_triton,
    spelling,
)


@pytest.mark.parametrize("fn", kir.MATH_FNS)
def test_every_math_fn_has_a_spelling_per_target(fn: str) -> None:
    assert fn in spelling.C_MATH64, f"math {fn!r}: no C spelling in spelling.C_MATH64"
    assert fn in spelling.TRITON_MATH, f"math {fn!r}: no Triton spelling in spelling.TRITON_MATH"


def test_spelling_tables_name_only_kernel_ir_functions() -> None:
    known = set(kir.MATH_FNS)
    assert set(spelling.C_MATH64) <= known
    assert set(spelling.TRITON_MATH) <= known
    assert spelling.TRITON_NARROW_F32_MATH <= set(spelling.TRITON_MATH)


def test_renderers_read_the_shared_tables() -> None:
    # the renderers use these objects, not copies that could drift
    assert render_c._ARITH is spelling.ARITH and render_triton._ARITH is spelling.ARITH
    assert render_c_lanes._ARITH is spelling.ARITH
    assert render_c_lanes._CMP is spelling.CMP and render_triton._CMP is spelling.CMP
    assert render_c_lanes._LOGIC is spelling.LOGIC and render_triton._LOGIC is spelling.LOGIC
    assert render_c_reduce._LOGIC is spelling.LOGIC
    assert render_c_lanes._MATH64 is spelling.C_MATH64
    assert render_triton._MATH is spelling.TRITON_MATH


@pytest.mark.parametrize("module", ["render_triton", "render_cuda", "render_cuda_rows",
                                    "render_cuda_mma"])
def test_no_renderer_imports_a_private_name_of_render_c(module) -> None:
    """The C storage types, sizes and literals are spelling.CTYPE / UTYPE / CSIZE / c_literal;
    the other renderers read them there, never render_c's privates (issue 36 item 5)."""
    import ast
    import importlib
    import inspect

    mod = importlib.import_module(f"tilefoundry.compiler.{module}")
    tree = ast.parse(inspect.getsource(mod))
    private = [a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
               and n.module == "tilefoundry.compiler.render_c"
               for a in n.names if a.name.startswith("_")]
    assert private == []


def test_every_kernel_ir_dtype_has_a_c_type_of_its_size() -> None:
    import numpy as np

    from tilefoundry.compiler import kir

    assert set(spelling.CTYPE) == set(kir.DTYPES)
    for dt, ct in spelling.CTYPE.items():
        assert spelling.CSIZE[ct] == np.dtype(kir.numpy_dtype(dt)).itemsize, dt
    for dt, ut in spelling.UTYPE.items():
        assert spelling.CSIZE[ut] == spelling.CSIZE[spelling.CTYPE[dt]], dt
    assert spelling.c_literal(-0.0, "f32") == "tf_f32_from_bits(0x80000000u)"
    assert spelling.c_literal(-(1 << 63), "i64") == "INT64_MIN"
