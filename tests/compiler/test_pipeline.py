"""The pipeline's named passes, the kernel-interp backend's honesty, the lowering registry and
the ``tilefoundry compile`` command."""

from __future__ import annotations

import io

import numpy as np
import pytest
from compiler_helpers import module_of, var

from tilefoundry.compiler import kir
from tilefoundry.compiler.backends import KernelInterpBackend
from tilefoundry.compiler.errors import LoweringError, NotSupportedError
from tilefoundry.compiler.examples import EXAMPLES
from tilefoundry.compiler.lower import LOWERINGS, NOT_LOWERED, check_registry
from tilefoundry.compiler.pipeline import PASS_NAMES, TARGETS, State, compile, run_passes
from tilefoundry.conformance.backend import BUILTIN, load_backend
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ir import Call, Function
from tilefoundry.semantics.ops import ALL_OPS, TopK

SHAPES = [(4, 64), (64,)]


def test_passes_run_and_print_one_at_a_time():
    state = State(EXAMPLES, "rmsnorm", SHAPES, TARGETS["interp"])
    printed: dict[str, str] = {}
    for name in PASS_NAMES:
        run_passes(state, [name], print_after=[name], printed=printed)
    assert set(printed) == set(PASS_NAMES)
    assert "def rmsnorm" in printed["typeinfer"]
    assert "RMSNorm" in printed["elaborate"] and "Tensor[(4, 64), bf16" in printed["elaborate"]
    assert printed["lower"].count("\n  kernel ") == 2
    assert printed["fuse"].count("\n  kernel ") == 1
    assert "no source" in printed["render"] and "1 kernel(s)" in printed["build"]
    assert isinstance(state.hir, Function) and state.executable is not None


def test_print_after_streams_and_rejects_unknown_passes():
    out = io.StringIO()
    c = compile(EXAMPLES, "rmsnorm", SHAPES, print_after={"fuse", "canonicalize"}, stream=out)
    text = out.getvalue()
    assert text.index("after canonicalize") < text.index("after fuse")
    assert c.printed["fuse"] in text
    with pytest.raises(LoweringError, match="unknown pass"):
        compile(EXAMPLES, "rmsnorm", SHAPES, print_after={"vectorize"})
    with pytest.raises(LoweringError, match="unknown target"):
        compile(EXAMPLES, "rmsnorm", SHAPES, target="fpga")


def test_elaboration_resolves_dispatch_calls_and_dimvars():
    from tilefoundry.semantics.dsl import parse_module

    src = '''
N = DimVar("N", 1, 64)

@func
def double(x: Tensor[(N,), f32]) -> Tensor[(N,), f32]:
    return x + x

@func
def pick(x: Tensor[(N,), f32]) -> Tensor[(N,), f32]:
    pass

@pick.specialize(DimVarRangePat("N", 1, 8))
def pick_small(x: Tensor[(N,), f32]) -> Tensor[(N,), f32]:
    return double(x)

@pick.specialize(DimVarRangePat("N", 8, 64))
def pick_big(x: Tensor[(N,), f32]) -> Tensor[(N,), f32]:
    return -x

@func
def main(x: Tensor[(N,), f32]) -> Tensor[(N,), f32]:
    return pick(x) * 2.0
'''
    m = parse_module(src, {})
    for n, want in ((4, lambda v: (v + v) * 2), (20, lambda v: -v * 2)):
        x = np.arange(n, dtype=np.float32)
        c = compile(m, "main", [(n,)], print_after={"elaborate"})
        assert "call" not in c.printed["elaborate"]
        assert np.array_equal(c([x]), want(x))


def test_unsupported_ops_are_named_and_left_out_of_the_capabilities(monkeypatch):
    p = var("x", (3, 4), DType.F32)
    m = module_of([p], Call(TopK(2), (p,)))
    monkeypatch.delitem(LOWERINGS, TopK)  # an op without a rule
    with pytest.raises(NotSupportedError, match="TopK: not supported"):
        compile(m, "f", [(3, 4)])
    assert "TopK" not in KernelInterpBackend().capabilities().ops
    monkeypatch.undo()
    caps = KernelInterpBackend().capabilities()
    # Local and the sharded programs go through the per-device lowering (lower_mesh)
    assert "Local" in caps.ops and {"TopK", "RMSNorm", "Conv2D"} <= caps.ops
    assert caps.mesh
    assert caps.ops == frozenset(o.__name__ for o in LOWERINGS) | {"Local"}
    assert DType.F4E2M1 not in caps.dtypes and DType.F8E8M0 in caps.dtypes
    assert check_registry() == []  # every op has a rule or a reason
    assert set(LOWERINGS) | set(NOT_LOWERED) == set(ALL_OPS)
    assert not set(LOWERINGS) & set(NOT_LOWERED)


def test_the_backend_is_registered_and_caches_per_shape():
    assert BUILTIN["kernel-interp"] == "tilefoundry.compiler.backends:KernelInterpBackend"
    be = load_backend("kernel-interp")
    assert be.name == "kernel-interp"
    prog = be.compile(EXAMPLES, "axpby_chain")
    for n in (5, 7, 5):
        x = np.arange(n, dtype=np.float32)
        assert be.run(prog, [x, x]).shape == (n,)
    assert len(prog.cache) == 2


def test_bad_inputs_are_errors_not_fallbacks():
    with pytest.raises(LoweringError, match="takes 2 inputs"):
        compile(EXAMPLES, "rmsnorm", [(4, 64)])
    c = compile(EXAMPLES, "rmsnorm", SHAPES)
    with pytest.raises(Exception, match="expected bf16"):
        c([np.zeros((4, 64), np.float32), np.zeros(64, np.float32)])


def test_kernel_ir_is_verified_between_passes():
    c = compile(EXAMPLES, "softmax_parts", [(3, 10)], fuse=False)
    kir.verify(c.program)
    assert len(c.kernels) == 5


def test_cli_compile_prints_the_fused_kernel(capsys):
    from tilefoundry.cli import main

    rc = main(["compile", "tilefoundry.compiler.examples:EXAMPLES", "rmsnorm", "--shape", "4x64",
               "--shape", "64", "--print-after", "fuse"])
    out = capsys.readouterr().out
    assert rc == 0 and "// ----- after fuse -----" in out and out.count("  kernel ") == 1
    rc = main(["compile", "tilefoundry.compiler.examples:EXAMPLES", "rmsnorm", "--shape", "4"])
    assert rc == 2 and "error" in capsys.readouterr().err


def test_a_second_lowering_of_an_op_is_refused():
    """One place per fact: a second ``register`` for an op class would silently replace the
    first (issue 36); it is a LoweringError naming the op and the rule it already has."""
    from tilefoundry.compiler import lower
    from tilefoundry.compiler.errors import LoweringError
    from tilefoundry.semantics.ops import Transpose

    before = LOWERINGS[Transpose]
    with pytest.raises(LoweringError, match="Transpose already lowers through"):
        lower.register(Transpose)(lambda *a: None)
    assert LOWERINGS[Transpose] is before
