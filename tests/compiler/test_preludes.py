"""The C-family and Triton preludes are real source files (issue 36 item 5, D481): the C headers
compile on their own with the toolchain the SIMD backend uses, the Triton prelude imports as a
module whose helpers are Triton JIT functions, and each renderer puts exactly that text first."""

from __future__ import annotations

import subprocess
from importlib.resources import files

import pytest

from tilefoundry.compiler import render_c, render_triton


def _cc() -> str:
    import shutil

    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.skip("no C compiler on this machine")
    return cc


def test_the_c_preludes_compile_on_their_own(tmp_path):
    """The SIMD spelling's head then the shared prelude, after the generated constants, as
    render_c composes them: a C file the compiler accepts with every warning an error (unused
    static functions aside)."""
    src = tmp_path / "prelude.c"
    src.write_text("#define _GNU_SOURCE 1\n" + render_c.prelude_constants() + render_c._PRELUDE
                   + render_c.SHARED_PRELUDE)
    inc = str(files("tilefoundry.compiler.c_runtime"))  # tf_numerics.h, as the builds include it
    r = subprocess.run([_cc(), "-std=gnu11", "-fsyntax-only", "-Wall", "-Werror",
                        "-Wno-unused-function", "-I", inc, str(src)], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr[-2000:]


def test_the_c_preludes_are_the_package_files():
    pkg = files("tilefoundry.compiler.c_runtime")
    assert render_c._PRELUDE == pkg.joinpath("tf_prelude_c.h").read_text()
    assert render_c.SHARED_PRELUDE == pkg.joinpath("tf_prelude_shared.h").read_text()


def test_the_triton_prelude_is_an_importable_module_of_jit_helpers():
    pytest.importorskip("triton")
    import triton

    from tilefoundry.compiler import triton_prelude as tp

    for name in ("_tf_add", "_tf_mul", "_tf_two_sum", "_tf_pickmax", "_tf_pickmin"):
        # a JITFunction, or the interpreter's wrapper when TRITON_INTERPRET was set first
        assert isinstance(getattr(tp, name), triton.runtime.jit.KernelInterface), name
        assert callable(getattr(getattr(tp, name), "fn", None)), name
    text = files("tilefoundry.compiler").joinpath("triton_prelude.py").read_text()
    assert render_triton.PRELUDE.startswith(text)
