"""HIR spec clauses the audit (tests/spec/clauses_hir.py) found without a test of their own.
Each test quotes its clause."""

from __future__ import annotations

import dataclasses
import inspect

from tilefoundry.semantics import ir
from tilefoundry.semantics.dsl import parse_module
from tilefoundry.semantics.ir import DimVarRangePat, Expr, Function, GridRegionExpr, Module

HEAD = "from tilefoundry.semantics.dsl import *\n"


def _expr_classes() -> list[type]:
    return [c for _, c in inspect.getmembers(ir, inspect.isclass)
            if issubclass(c, Expr) and c.__module__ == ir.__name__]


def test_hir_has_no_region_or_block_abstraction():
    """"There are no Region / Block abstractions in HIR. The single structured exception that
    carries loop-phi-shaped SSA is GridRegionExpr" — no Region / Block / Stmt class, and the
    only Exprs holding a nested body are the Function container and GridRegionExpr."""
    names = {c.__name__ for c in _expr_classes()}
    assert not names & {"Region", "Block", "Stmt", "SeqStmt"}
    with_body = {c.__name__ for c in _expr_classes()
                 if dataclasses.is_dataclass(c) and "body" in {f.name for f in dataclasses.fields(c)}}
    assert with_body == {"Function", "GridRegionExpr"}


def test_a_function_declares_no_execution_context():
    """"a Function MUST NOT declare or override execution context. The Module that owns it
    declares the Target and the ordered Topology hierarchy its body runs against" — Function has
    no target / topology / mesh field; Module has target and topology."""
    fn = {f.name for f in dataclasses.fields(Function)}
    assert not fn & {"target", "topology", "mesh", "meshes"}
    assert {"target", "topology"} <= {f.name for f in dataclasses.fields(Module)}


def test_the_canonical_signature_format():
    """'The canonical signature is ";".join(f"{p.dim_var}${p.lo}_{p.hi}" for p in
    specializations)'."""
    pats = (DimVarRangePat("M", 1, 64),)
    assert pats[0].canonical == "M$1_64"
    src = HEAD + """
M = DimVar("M", 1, 128)

@func
def f(x: Tensor[(M,), f32]) -> Tensor[(M,), f32]:
    pass

@f.specialize(DimVarRangePat("M", 1, 64))
def f_short(x: Tensor[(M,), f32]) -> Tensor[(M,), f32]:
    return x + 1.0

@f.specialize(DimVarRangePat("M", 64, 128))
def f_long(x: Tensor[(M,), f32]) -> Tensor[(M,), f32]:
    return x * 2.0
"""
    base = parse_module(src)["f"]
    assert [v.canonical_signature for v in base.variants] == ["M$1_64", "M$64_128"]


def test_both_loop_surfaces_lower_to_one_node_with_a_static_trip_count():
    """"Both DSL loop surfaces — for i in tile(...) and for i in range(...) — lower to this one
    node; they share the domain (start, extent, step)" and "When start / extent / step are
    static int, the trip count is recoverable from the node alone"."""
    src = HEAD + """
@func
def t(x: Tensor[(4,), f32]):
    acc = x
    for i in tile(6, step=2):
        acc = acc + x
    return acc

@func
def r(x: Tensor[(4,), f32]):
    acc = x
    for i in range(1, 7, 2):
        acc = acc + x
    return acc
"""
    m = parse_module(src)
    gt, gr = m["t"].body, m["r"].body
    assert isinstance(gt, GridRegionExpr) and isinstance(gr, GridRegionExpr)
    assert (gt.start, gt.extent, gt.step) == (0, 6, 2)
    assert (gr.start, gr.extent, gr.step) == (1, 7, 2)
    assert len(range(gt.start, gt.extent, gt.step)) == 3 == len(range(gr.start, gr.extent, gr.step))
