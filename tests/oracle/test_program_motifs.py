"""The under-drawn program shapes of issue 33 (``oracle/program_motifs.py``): found where they
are and nowhere else, drawn often by the capability-directed generator (what ``conformance
fuzz`` uses), evaluated as the oracle expects (sharded ones equal their erasure), and reaching
the planted bugs each one exists for.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from tests.conformance import planted_backends as pb
from tests.oracle.test_programs import _has_sum_partial, assert_same, gathered
from tilefoundry.conformance.backend import Capabilities, ReferenceBackend
from tilefoundry.conformance.catalog import build_catalog
from tilefoundry.oracle.compare import FAIL, PASS, UNJUDGED, check
from tilefoundry.oracle.program_motifs import MOTIFS, motifs_in
from tilefoundry.oracle.programs import generate_program
from tilefoundry.semantics.dsl import Tensor, bf16, f32, func, module
from tilefoundry.semantics.dsl import exp as dsl_exp
from tilefoundry.semantics.evaluator.core import evaluate
from tilefoundry.semantics.evaluator.erasure import erase_sharding
from tilefoundry.semantics.evaluator.mesh import Sharded, unshard
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ir import Call, Function, Module, Var
from tilefoundry.semantics.ops import Binary, BinaryKind, Reshape, Reshard, Select
from tilefoundry.semantics.types import Broadcast, Layout, Mesh, ShardLayout, Split, TensorType

REF = ReferenceBackend().capabilities()


# ---------------------------------------------------------------------------------------------
# detection
# ---------------------------------------------------------------------------------------------
def test_narrow_chain_only_in_a_narrow_chain():
    @func
    def chain(x: Tensor[(4,), bf16], y: Tensor[(4,), bf16]):
        return dsl_exp(x * y) + y

    @func
    def wide(x: Tensor[(4,), f32], y: Tensor[(4,), f32]):
        return dsl_exp(x * y) + y

    @func
    def one(x: Tensor[(4,), bf16], y: Tensor[(4,), bf16]):
        return x * y

    assert motifs_in(module(chain)) == {"narrow_chain"}
    assert motifs_in(module(wide)) == set() and motifs_in(module(one)) == set()


def _select(dt: DType, cond_from_compare: bool) -> Module:
    a, b = Var("a", TensorType((4,), dt)), Var("b", TensorType((4,), dt))
    c = Var("c", TensorType((4,), DType.BOOL))
    cond = Call(Binary(BinaryKind.LT), (a, b)) if cond_from_compare else c
    params = (a, b) if cond_from_compare else (a, b, c)
    return Module((Function("f", params, Call(Select(), (cond, a, b)), None),))


def test_float_select_needs_a_float_comparison():
    assert motifs_in(_select(DType.F32, True)) == {"float_select"}
    assert motifs_in(_select(DType.I32, True)) == set()
    assert motifs_in(_select(DType.F32, False)) == set()


def test_partial_nonlinear_needs_a_nonlinear_consumer_and_mixed_pieces():
    cat = build_catalog(0)
    m, e, ins = cat["sharded/partial-completion-feeds/exp/f32"].build()
    assert motifs_in(m, e, ins) == {"partial_nonlinear"}
    m2, e2, ins2 = cat["sharded/partial-completion-feeds/mul/f32"].build()
    assert "partial_nonlinear" not in motifs_in(m2, e2, ins2)  # mul by a value: linear
    # the same split-K program with non-negative operands: every piece >= 0, none mixed
    pos = [np.abs(x) for x in ins]
    assert motifs_in(m, e, pos) == set() and motifs_in(m) == {"partial_nonlinear"}


def _reshape(split_pos: int) -> Module:
    mesh = Mesh("device", ("x",), (2,))
    from tilefoundry.semantics.types import Topology, TopologyLevel

    x = Var("x", TensorType((2, 6), DType.F32, ShardLayout(mesh, (Split(split_pos),),
                                                           Layout((2, 6)))))
    r = Call(Reshape((12,)), (x,))
    out = Call(Reshard(layout=ShardLayout(mesh, (Broadcast(),), Layout((12,)))), (r,))
    return Module((Function("f", (x,), out, None),),
                  topology=Topology((TopologyLevel("device", 2),)))


def test_sharded_reshape_inner_needs_the_split_inside_the_merge():
    assert motifs_in(_reshape(1)) == {"sharded_reshape_inner"}
    assert motifs_in(_reshape(0)) == set()  # the split is the merged axis's outer position
    ins = [np.arange(12, dtype=np.float32).reshape(2, 6)]
    assert gathered(evaluate(_reshape(1), "f", ins)).tolist() == list(range(12))


# ---------------------------------------------------------------------------------------------
# drawing
# ---------------------------------------------------------------------------------------------
def _per_thousand(n: int, **kw) -> dict[str, float]:
    c: Counter = Counter()
    for s in range(n):
        p = generate_program(s, **kw)
        c.update(motifs_in(p.module, p.entry, list(p.inputs)))
    return {k: 1000 * c[k] / n for k in MOTIFS}


def test_capability_directed_draws_reach_each_shape_often():
    """Before (issue 33, 1,000 programs for the reference): 22 / 0 / 0 / 0 per 1,000."""
    got = _per_thousand(300, caps=REF)
    assert got["narrow_chain"] >= 300 and got["float_select"] >= 150, got
    assert got["partial_nonlinear"] >= 40 and got["sharded_reshape_inner"] >= 40, got
    # without the motif steps the same draws reach them rarely (what the fuzz drew before)
    off = _per_thousand(300, caps=REF, motifs=0.0)
    assert off["float_select"] <= 10 and off["sharded_reshape_inner"] <= 10, off


def test_without_capabilities_the_programs_are_unchanged():
    """The catalog's programs (no capabilities): no motif step, so no extra draw."""
    for s in range(40):
        a = generate_program(s)
        b = generate_program(s, motifs=0.0)
        assert a.stats == b.stats and a.module == b.module
        assert not any(k.startswith("motif:") for k in a.stats)


def test_motif_programs_are_judged_and_sharded_ones_equal_their_erasure():
    seen: Counter = Counter()
    verdicts: Counter = Counter()
    for s in range(160):
        p = generate_program(s, caps=REF)
        seen.update(k for k in p.stats if k.startswith("motif:"))
        ins = list(p.inputs)
        with np.errstate(all="ignore"):
            out = evaluate(p.module, p.entry, ins)
        if p.mesh is not None:
            plain = [unshard(x) if isinstance(x, Sharded) else x for x in ins]
            with np.errstate(all="ignore"):
                e = evaluate(erase_sharding(p.module), p.entry, plain)
            assert_same(gathered(out), e, zero_sign=not _has_sum_partial(p))
            continue
        verdicts[check(p.module, p.entry, ins, out).status] += 1
    assert set(verdicts) <= {PASS, UNJUDGED} and verdicts[PASS] > 80, verdicts
    assert all(seen[f"motif:{m}"] > 0 for m in MOTIFS), seen


@pytest.mark.parametrize(("bug", "caps"), [
    ("bf16_chain_in_f32", pb.CHAIN_CAPS),
    ("compare_as_not_complement", Capabilities.everything()),
])
def test_the_fuzz_reaches_the_planted_bugs(bug, caps):
    """Issue 33: a 3-minute fuzz showed the f32 chain in 0 of 100 programs, and no program
    had a float comparison in a Select's condition (a select inverted on NaN survived)."""
    be = getattr(pb, bug)()
    fails = 0
    for s in range(100):
        p = generate_program(s, caps=caps, sharded=False)
        ins = list(p.inputs)
        with np.errstate(all="ignore"):
            out = be.run(be.compile(p.module, p.entry), [np.array(x) for x in ins])
        with np.errstate(all="ignore"):
            fails += check(p.module, p.entry, ins, out).status == FAIL
    assert fails >= 3, fails
    # the same draws without the motif steps: (almost) blind
    quiet = 0
    for s in range(100):
        p = generate_program(s, caps=caps, sharded=False, motifs=0.0)
        ins = list(p.inputs)
        with np.errstate(all="ignore"):
            out = be.run(be.compile(p.module, p.entry), [np.array(x) for x in ins])
        with np.errstate(all="ignore"):
            quiet += check(p.module, p.entry, ins, out).status == FAIL
    print(f"{bug}: {fails} FAIL with the motif steps, {quiet} without")
    assert quiet < fails, (quiet, fails)
