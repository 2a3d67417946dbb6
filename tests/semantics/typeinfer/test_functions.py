"""HIR spec §1.1 Function / §1.2 GridRegionExpr typing: function rules, shape dispatch and
envelope coverage, call elaboration with its per-session memo, signature stride
materialization, loop-phi typing, and module verification.

Bodies are built from test-only ops registered here (an identity and an accumulator), so these
tests never depend on the op families' rules.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pytest

from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ir import (
    Call,
    Constant,
    DimVarRangePat,
    Function,
    GridRegionExpr,
    Module,
    Op,
    Tuple,
    TupleGetItem,
    Var,
)
from tilefoundry.semantics.typeinfer.core import (
    Session,
    TypeInferError,
    infer_expr,
    register_typeinfer,
)
from tilefoundry.semantics.typeinfer.functions import (
    check_strides_materialized,
    dim_env,
    elaborate,
    infer_call_to_function,
    infer_module,
    materialize_type,
    resolve_grid_domain,
    resolved_target,
    resolved_variant,
    select_variant,
    verify_module,
)
from tilefoundry.semantics.types import (
    Broadcast,
    CallableType,
    DimVar,
    IRError,
    Layout,
    Mesh,
    Partial,
    ShardLayout,
    Split,
    StorageKind,
    TensorType,
    Topology,
    TopologyLevel,
    TupleType,
)

F32, I32 = DType.F32, DType.I32


# =============================================================================================
# test-only ops
# =============================================================================================
@dataclass(frozen=True)
class Ident(Op):
    """Identity: the result type is the operand's, layout and Partial state included."""

    INPUTS: ClassVar[tuple[str, ...]] = ("x",)


@dataclass(frozen=True)
class Acc(Op):
    """acc (+) x: the result has acc's type; x must have acc's shape and dtype."""

    INPUTS: ClassVar[tuple[str, ...]] = ("acc", "x")


@dataclass(frozen=True)
class MakeSharded(Op):
    """Gives x the attribute's ShardLayout (stands in for Reshard)."""

    layout: ShardLayout
    INPUTS: ClassVar[tuple[str, ...]] = ("x",)


@register_typeinfer(Ident)
def _ident(ctx, ts):
    return ts[0]


@register_typeinfer(Acc)
def _acc(ctx, ts):
    a, x = ts
    if a.shape != x.shape or a.dtype is not x.dtype:
        ctx.error("acc and x differ", operand=1, rule="test Acc")
    return a


@register_typeinfer(MakeSharded)
def _make_sharded(ctx, ts):
    x = ts[0]
    return TensorType(x.shape, x.dtype, ctx.op.layout, x.storage)


# =============================================================================================
# helpers
# =============================================================================================
MESH = Mesh("device", ("x", "y"), (2, 2))
TOPO = Topology((TopologyLevel("device", 4), TopologyLevel("cta", 8)))


def t(shape, dtype=F32, layout=None, storage=StorageKind.GMEM):
    return TensorType(tuple(shape), dtype, layout, storage)


def partial_y(shape=(8, 4)):
    """Broadcast on mesh axis 0 (x), Partial(sum) on mesh axis 1 (y)."""
    return ShardLayout(MESH, (Broadcast(), Partial("sum")), Layout.natural(shape))


def split_x(shape=(8, 4)):
    return ShardLayout(MESH, (Split(0), Broadcast()), Layout.natural(shape))


def ident(e):
    return Call(Ident(), (e,))


def normal(name="f", shape=(8, 4), ret=None, body=None):
    x = Var("x", t(shape))
    return Function(name, (x,), body(x) if body else ident(x), ret)


M = DimVar("M", 1, 1024)


def prototype(ranges, *, name="p", labels=None, dim=M, ret_shape=None):
    """A dispatch prototype over x: Tensor[(M, 4)] with one variant per [lo, hi) range."""
    x = Var("x", t((dim, 4)))
    rt = t(ret_shape or (dim, 4))
    base = Function(name, (x,), None, rt)
    for k, (lo, hi) in enumerate(ranges):
        label = labels[k] if labels else None
        base.add_variant(Function(name, (x,), ident(x), rt,
                                  specializations=(DimVarRangePat(dim.name, lo, hi),),
                                  label=label))
    return base


def rule_of(excinfo) -> str:
    return excinfo.value.rule or ""


# =============================================================================================
# Function typing rules
# =============================================================================================
def test_normal_function_value_type_is_the_signature():
    """'Function.type is the IR-level CallableType (types §7) projected from params +
    return_type.'"""
    f = normal(ret=t((8, 4)))
    infer_module(Module((f,)))
    assert f.checked_type == CallableType((t((8, 4)),), t((8, 4)))
    assert f.body.checked_type == t((8, 4))


def test_body_is_a_single_expr_reject():
    """'Function.body is a single Expr; Stmts MUST NOT appear.'"""
    x = Var("x", t((4,)))
    with pytest.raises(IRError, match="single Expr"):
        Function("f", (x,), [ident(x), ident(x)], None)
    f = Function("f", (x,), ident(x), None)
    object.__setattr__(f, "body", [ident(x)])  # smuggled past the constructor
    with pytest.raises(TypeInferError) as ei:
        infer_expr(f)
    assert "Stmts MUST NOT appear" in rule_of(ei)
    assert ei.value.op == "Function f"


def test_params_must_be_vars_reject():
    """'Function.params entries MUST be Vars.'"""
    c = Constant(np.zeros(4, np.float32))
    with pytest.raises(IRError, match="MUST be Vars"):
        Function("f", (c,), c, None)
    x = Var("x", t((4,)))
    f = Function("f", (x,), ident(x), None)
    object.__setattr__(f, "params", (c,))
    with pytest.raises(TypeInferError) as ei:
        infer_expr(f)
    assert "MUST be Vars" in rule_of(ei)


def test_param_needs_annotation_reject():
    """'params: each Var carries a type annotation.'"""
    x = Var("x")
    with pytest.raises(TypeInferError, match="no type annotation"):
        infer_module(Module((Function("f", (x,), ident(x), None),)))


def test_same_name_dimvars_must_agree_reject():
    """'Within a Function signature, every occurrence of a same-name DimVar across params and
    return_type MUST agree on its (lo, hi) bounds; a disagreement is a verify error.'"""
    x = Var("x", t((DimVar("M", 1, 64), 4)))
    f = Function("f", (x,), ident(x), t((DimVar("M", 1, 128), 4)))
    with pytest.raises(TypeInferError) as ei:
        infer_module(Module((f,)))
    assert "[1, 64)" in str(ei.value) and "[1, 128)" in str(ei.value)
    assert "agree" in rule_of(ei)


def test_same_name_dimvars_agreeing_accept():
    """Same-name DimVars with equal bounds across params and return_type type fine."""
    m = DimVar("M", 1, 64)
    x, y = Var("x", t((m, 4))), Var("y", t((m, 4)))
    f = Function("f", (x, y), Call(Acc(), (x, y)), t((m, 4)))
    infer_module(Module((f,)))
    assert f.body.checked_type == t((m, 4))


def test_return_type_mismatch_reject():
    """The inferred body type must equal the declared return_type (Call typing: the type is
    the re-derived body type, never a stale return_type)."""
    f = normal(ret=t((8, 4), I32))
    with pytest.raises(TypeInferError, match="does not match the declared return_type"):
        infer_module(Module((f,)))


def test_partial_return_type_is_allowed_and_preserved():
    """'The return type MAY carry a Partial(reduction) in a TensorType, or in any tensor field
    of a nested TupleType. Function construction, type inference, and call elaboration MUST
    allow that state.'"""
    ty = t((8, 4), layout=partial_y())
    x = Var("x", ty)
    rt = TupleType((ty, TupleType((ty,))))
    f = Function("f", (x,), Tuple((ident(x), Tuple((x,)))), rt)
    infer_module(Module((f,), topology=TOPO))
    assert f.checked_type.result == rt
    assert f.body.checked_type.fields[1].fields[0].layout.attrs[1] == Partial("sum")


def test_function_boundary_must_not_complete_a_partial_reject():
    """'A Function boundary MUST preserve the ShardLayout mesh and per-axis reduction; it MUST
    NOT complete the value': a Partial body against a complete declared layout is rejected."""
    x = Var("x", t((8, 4), layout=partial_y()))
    complete = ShardLayout(MESH, (Broadcast(), Broadcast()), Layout.natural((8, 4)))
    f = Function("f", (x,), ident(x), t((8, 4), layout=complete))
    with pytest.raises(TypeInferError, match="return_type"):
        infer_module(Module((f,), topology=TOPO))


# =============================================================================================
# shape dispatch and specializations
# =============================================================================================
def test_dispatch_prototype_partition_accept_and_body_never_inferred():
    """'The variants' ranges MUST partition the envelope ... Adjacent half-open ranges meet at
    the shared boundary value as [.., c) then [c, ..)' and 'the prototype is never
    typeinferred'."""
    p = prototype([(1, 64), (64, 1024)], labels=["small", "large"])
    infer_module(Module((p,)))
    assert p.body is None
    assert all(v.body.has_type for v in p.variants)
    assert p.checked_type == CallableType((t((M, 4)),), t((M, 4)))


def test_envelope_gap_reject_reports_uncovered_values():
    """'jointly complete (their union is exactly the half-open [lo, hi))': a gap is reported
    with the uncovered values and their count."""
    p = prototype([(1, 64), (128, 1024)])
    with pytest.raises(TypeInferError) as ei:
        infer_module(Module((p,)))
    msg = str(ei.value)
    assert "uncovered: [64, 128) (64 values)" in msg
    assert "Envelope coverage" in rule_of(ei)


def test_envelope_tail_gap_reject():
    """The union must reach hi: [1, 64) + [64, 512) leaves [512, 1024) uncovered."""
    p = prototype([(1, 64), (64, 512)])
    with pytest.raises(TypeInferError, match=r"uncovered: \[512, 1024\) \(512 values\)"):
        infer_module(Module((p,)))


def test_envelope_overlap_reject_reports_doubly_covered_values():
    """'pairwise disjoint': an overlap is reported with its values, count and variants."""
    p = prototype([(1, 100), (64, 1024)], labels=["a", "b"])
    with pytest.raises(TypeInferError) as ei:
        infer_module(Module((p,)))
    msg = str(ei.value)
    assert "doubly covered: [64, 100) (36 values) by 2 variants" in msg
    assert "label a" in msg and "label b" in msg


def test_gap_and_overlap_reported_together():
    """Every coverage problem is reported at once (a gap of 1 value and an overlap)."""
    p = prototype([(1, 10), (11, 20), (15, 1024)])
    with pytest.raises(TypeInferError) as ei:
        infer_module(Module((p,)))
    assert "[10, 11) (1 value)" in str(ei.value)
    assert "[15, 20) (5 values)" in str(ei.value)


def test_distinct_canonical_signatures_reject():
    """'Two variants of one base MUST have distinct canonical signatures.'"""
    p = prototype([(1, 1024), (1, 1024)], labels=["one", "two"])
    with pytest.raises(TypeInferError) as ei:
        infer_module(Module((p,)))
    assert "M$1_1024" in str(ei.value) and "distinct canonical" in rule_of(ei)


def _variant_of(base, **over):
    x = base.params[0]
    kw = dict(name=base.name, params=(x,), body=ident(x), return_type=base.return_type,
              specializations=(DimVarRangePat("M", 1, 1024),))
    kw.update(over)
    return Function(**kw)


def test_variant_must_share_name_reject():
    """'Every variant of a base MUST share the base's name, params, and return_type' (name)."""
    base = prototype([])
    base.add_variant(_variant_of(base, name="other"))
    with pytest.raises(TypeInferError, match="share the base's name"):
        infer_module(Module((base,)))


def test_variant_must_share_params_reject():
    """'Every variant of a base MUST share the base's name, params, and return_type' (params)."""
    base = prototype([])
    y = Var("y", t((M, 4)))
    base.add_variant(_variant_of(base, params=(y,), body=ident(y)))
    with pytest.raises(TypeInferError, match="share the base's params"):
        infer_module(Module((base,)))


def test_variant_must_share_return_type_reject():
    """'Every variant of a base MUST share the base's name, params, and return_type'
    (return_type)."""
    base = prototype([])
    base.add_variant(_variant_of(base, return_type=t((M, 4), I32)))
    with pytest.raises(TypeInferError, match="share the base's return_type"):
        infer_module(Module((base,)))


def test_variant_exactly_one_pattern_reject():
    """'A variant carries exactly one DimVarRangePat in specializations.'"""
    base = prototype([])
    pats = (DimVarRangePat("M", 1, 64), DimVarRangePat("M", 64, 1024))
    base.add_variant(_variant_of(base, specializations=pats))
    with pytest.raises(TypeInferError, match="exactly one DimVarRangePat"):
        infer_module(Module((base,)))


def test_variant_nesting_reject():
    """'Nesting is exactly one level: a variant MUST NOT itself carry variants.'"""
    base = prototype([])
    inner = _variant_of(base)
    base.add_variant(_variant_of(base, variants=(inner,)))
    with pytest.raises(TypeInferError, match="MUST NOT itself carry variants"):
        infer_module(Module((base,)))


def test_pattern_must_anchor_to_an_input_parameter_reject():
    """'A DimVarRangePat specialization MUST anchor to a DimVar reachable from an input
    parameter'."""
    n = DimVar("N", 1, 16)
    x = Var("x", t((M, 4)))
    base = Function("p", (x,), None, t((n, 4)))
    base.add_variant(Function("p", (x,), ident(x), t((n, 4)),
                              specializations=(DimVarRangePat("N", 1, 16),)))
    with pytest.raises(TypeInferError) as ei:
        infer_module(Module((base,)))
    assert "only in the return_type" in str(ei.value)
    assert "reachable from an input parameter" in rule_of(ei)


def test_pattern_must_lie_within_the_envelope_reject():
    """'... and lie within that DimVar's envelope'."""
    p = prototype([(0, 64), (64, 1024)])  # M's envelope is [1, 1024)
    with pytest.raises(TypeInferError, match="not within M's envelope"):
        infer_module(Module((p,)))


def test_prototype_without_variants_reject():
    """'a function with no body and no variants is uncallable and invalid'."""
    x = Var("x", t((4,)))
    with pytest.raises(TypeInferError, match="uncallable"):
        infer_module(Module((Function("p", (x,), None, t((4,))),)))


def test_body_with_variants_reject():
    """'a real body combined with variants is invalid'."""
    x = Var("x", t((M, 4)))
    v = Function("p", (x,), ident(x), t((M, 4)), specializations=(DimVarRangePat("M", 1, 1024),))
    f = Function("p", (x,), ident(x), t((M, 4)), variants=(v,))
    with pytest.raises(TypeInferError, match="real body combined with variants"):
        infer_module(Module((f,)))


def test_top_level_variant_reject():
    """'A top-level Module.functions entry MUST NOT be a variant: a top-level Function with
    specializations != () is a verifier error.'"""
    p = prototype([(1, 1024)])
    with pytest.raises(IRError, match="is a variant"):
        Module((p.variants[0],))
    m = Module((normal(),))
    object.__setattr__(m, "functions", (p.variants[0],))  # smuggled past the constructor
    with pytest.raises(TypeInferError, match="MUST NOT be a variant"):
        verify_module(m)


def test_dispatch_call_resolves_the_variant_and_types_to_declared_return():
    """'A dispatch-prototype callee ... is not elaborated: the call's result is the declared
    return_type' and 'the variant whose DimVarRangePat matches the call's concrete argument
    shapes is selected'."""
    p = prototype([(1, 64), (64, 1024)], labels=["small", "large"], ret_shape=(M, 4))
    a = Var("a", t((100, 4)))
    call = Call(p, (a,))
    g = Function("g", (a,), call, None)
    s = Session()
    infer_module(Module((p, g)), s)
    assert call.checked_type == p.return_type
    assert resolved_target(call, s) is p
    assert resolved_variant(call, s).label == "large"


def test_dispatch_call_with_symbolic_shape_leaves_selection_to_the_evaluator():
    """'A ShapeDim ... is resolved by the evaluator at call time': a DimVar argument dim
    selects nothing statically."""
    p = prototype([(1, 64), (64, 1024)])
    a = Var("a", t((DimVar("M", 1, 1024), 4)))
    call = Call(p, (a,))
    s = Session()
    infer_module(Module((p, Function("g", (a,), call, None))), s)
    assert resolved_variant(call, s) is None


def test_dispatch_call_outside_envelope_reject():
    """'A shape outside the envelope matches no variant and is an error; there is no base body
    to fall back to'."""
    p = prototype([(1, 64), (64, 1024)])
    a = Var("a", t((1024, 4)))
    with pytest.raises(TypeInferError, match=r"outside M's envelope \[1, 1024\)"):
        infer_module(Module((p, Function("g", (a,), Call(p, (a,)), None))))


def test_select_variant_for_the_evaluator():
    """'Every in-envelope shape therefore selects exactly one variant' — at both boundaries."""
    p = prototype([(1, 64), (64, 1024)], labels=["small", "large"])
    Module((p,))
    assert select_variant(p, [(1, 4)]).label == "small"
    assert select_variant(p, [(63, 4)]).label == "small"
    assert select_variant(p, [(64, 4)]).label == "large"
    assert select_variant(p, [(1023, 4)]).label == "large"
    for bad in (0, 1024):
        with pytest.raises(TypeInferError, match="matches no variant"):
            select_variant(p, [(bad, 4)])
    with pytest.raises(TypeInferError, match="Arity"):
        select_variant(p, [])
    with pytest.raises(TypeInferError, match="dispatch prototype"):
        select_variant(normal(), [(8, 4)])


# =============================================================================================
# call elaboration
# =============================================================================================
def test_wildcard_binds_sharded_argument_and_carries_partial_to_return():
    """'When a layout-unconstrained parameter binds to a sharded argument, elaboration MUST
    carry each Partial(reduction) at its original mesh-axis index through the body and into the
    concrete return type'."""
    f = normal(ret=t((8, 4)))  # layout None: a template wildcard, also in the return
    a = Var("a", t((8, 4), layout=partial_y()))
    call = Call(f, (a,))
    s = Session()
    infer_module(Module((f, Function("g", (a,), call, None)), topology=TOPO), s)
    assert call.checked_type == t((8, 4), layout=partial_y())
    assert call.checked_type.layout.attrs == (Broadcast(), Partial("sum"))
    inst = resolved_target(call, s)
    assert inst is not f and inst.name == "f"
    assert inst.return_type == call.checked_type  # the concrete return type
    assert inst.params[0].type == a.type and inst.params[0] is not f.params[0]
    assert f.body.checked_type == t((8, 4))  # the callee's own stamps are untouched


def test_partial_carried_through_a_tuple_return():
    """'... into the concrete return type, including tuple fields.'"""
    x = Var("x", t((8, 4)))
    f = Function("f", (x,), Tuple((ident(x), Tuple((x, ident(ident(x)))))), None)
    a = Var("a", t((8, 4), layout=partial_y()))
    call = Call(f, (a,))
    infer_module(Module((f, Function("g", (a,), call, None)), topology=TOPO))
    ty = call.checked_type
    assert isinstance(ty, TupleType)
    leaves = [ty.fields[0], ty.fields[1].fields[0], ty.fields[1].fields[1]]
    assert all(leaf.layout.partials == {1: "sum"} for leaf in leaves)


def test_partial_carried_through_a_grid_region_return():
    """'a caller-supplied layout (sharding) flowing into a layout-unconstrained parameter
    propagates through the whole body, including through a Tuple or GridRegionExpr return.'"""
    x = Var("x", t((8, 4)))
    i, acc = Var("i"), Var("acc")
    step = Call(Acc(), (acc, ident(x)))
    loop = GridRegionExpr(i, (acc,), (x,), step, (step,), 3)
    f = Function("f", (x,), loop, None)
    a = Var("a", t((8, 4), layout=partial_y()))
    call = Call(f, (a,))
    infer_module(Module((f, Function("g", (a,), call, None)), topology=TOPO))
    assert call.checked_type.layout.partials == {1: "sum"}


def test_elaboration_preserves_dag_sharing():
    """'SSA shape ... sharing of intermediate results is expressed by Python object identity':
    the reconstructed body shares where the original did."""
    x = Var("x", t((8, 4)))
    c = ident(x)
    f = Function("f", (x,), Tuple((c, c)), None)
    a = Var("a", t((8, 4), layout=partial_y()))
    s = Session()
    inst = elaborate(f, (a.type,), s)
    assert inst is not f
    assert inst.body.fields[0] is inst.body.fields[1]
    assert inst.body.fields[0] is not c


def test_equal_argument_types_return_the_same_instance():
    """'elaborating with argument types that already equal the callee's current parameter types
    returns the same Function instance (dedup) rather than a clone'."""
    f = normal()
    assert elaborate(f, (t((8, 4)),)) is f


def test_memo_identity_within_a_session_not_across_sessions():
    """'two call sites of the same callee with identical argument types MUST resolve to the
    identical Function instance, not merely an equal one' and 'The memo is session-local
    state ... it carries nothing across sessions.'"""
    f = normal()
    a = Var("a", t((8, 4), layout=partial_y()))
    c1, c2 = Call(f, (a,)), Call(f, (ident(a),))
    s = Session()
    infer_module(Module((f, Function("g", (a,), Tuple((c1, c2)), None)), topology=TOPO), s)
    i1, i2 = resolved_target(c1, s), resolved_target(c2, s)
    assert i1 is i2 and i1 is not f
    c3 = Call(f, (a,))
    s2 = Session()
    infer_module(Module((f, Function("g", (a,), c3, None)), topology=TOPO), s2)
    i3 = resolved_target(c3, s2)
    assert i3 is not i1 and i3 == i1


def test_resolved_target_in_a_later_session_elaborates_afresh():
    """The memo carries nothing across sessions: a call typed earlier resolves again."""
    f = normal()
    a = Var("a", t((8, 4), layout=partial_y()))
    call = Call(f, (a,))
    s1 = Session()
    infer_module(Module((f, Function("g", (a,), call, None)), topology=TOPO), s1)
    s2 = Session()
    assert resolved_target(call, s2) is not resolved_target(call, s1)
    assert resolved_target(call, s2) is resolved_target(call, s2)


def test_arity_reject():
    """'Arity MUST match — exactly one argument per parameter.'"""
    f = normal()
    with pytest.raises(TypeInferError, match="1 parameter") as ei:
        elaborate(f, (t((8, 4)), t((8, 4))))
    assert ei.value.op == "Call @f"


def test_wildcard_needs_matching_shape_and_dtype_reject():
    """'it binds to the argument's full type ... once the argument's logical shape and dtype
    match.'"""
    f = normal()
    with pytest.raises(TypeInferError, match="dtype i32"):
        elaborate(f, (t((8, 4), I32),))
    with pytest.raises(TypeInferError, match="axis 1 is 5"):
        elaborate(f, (t((8, 5)),))


def test_shardlayout_param_is_an_exact_contract():
    """'A parameter that carries a ShardLayout is an explicit contract: the argument type MUST
    match it exactly.'"""
    x = Var("x", t((8, 4), layout=split_x()))
    f = Function("f", (x,), ident(x), None)
    assert elaborate(f, (t((8, 4), layout=split_x()),)) is f
    for bad in (t((8, 4), layout=partial_y()), t((8, 4)),
                t((8, 4), layout=split_x(), storage=StorageKind.SMEM)):
        with pytest.raises(TypeInferError) as ei:
            elaborate(f, (bad,))
        assert "explicit contract" in rule_of(ei)


def test_other_params_need_exact_type_equality():
    """'Any other parameter requires exact type equality.' (a plain Layout, a tuple)"""
    x = Var("x", t((8, 4), layout=Layout.natural((8, 4))))
    f = Function("f", (x,), ident(x), None)
    assert elaborate(f, (t((8, 4), layout=Layout.natural((8, 4))),)) is f
    with pytest.raises(TypeInferError, match="exact type equality"):
        elaborate(f, (t((8, 4), layout=Layout((8, 4), (1, 8))),))
    tt = TupleType((t((4,)),))
    y = Var("y", tt)
    g = Function("g", (y,), TupleGetItem(y, 0), None)
    assert elaborate(g, (tt,)) is g
    with pytest.raises(TypeInferError, match="exact type equality"):
        elaborate(g, (TupleType((t((4,), I32),)),))


def test_dimvar_envelope_matching():
    """'DimVar shapes keep envelope matching — elaboration does not monomorphize a dynamic
    shape into a concrete one': an int inside [lo, hi) or a DimVar with an envelope inside
    binds (the parameter keeps its DimVar); anything outside is rejected."""
    m = DimVar("M", 1, 64)
    x = Var("x", t((m, 4)))
    f = Function("f", (x,), ident(x), None)
    assert elaborate(f, (t((10, 4)),)) is f  # no monomorphization: same instance
    assert elaborate(f, (t((DimVar("N", 2, 32), 4)),)) is f
    inst = elaborate(f, (t((10, 4), layout=Layout.natural((10, 4))),))
    assert inst.params[0].type.shape == (m, 4)
    with pytest.raises(TypeInferError, match=r"outside M's envelope \[1, 64\)"):
        elaborate(f, (t((64, 4)),))
    with pytest.raises(TypeInferError, match="not inside M's"):
        elaborate(f, (t((DimVar("N", 1, 128), 4)),))


def test_one_dimvar_one_value_per_call_reject():
    """A same-name DimVar names one extent: binding it to 5 and to 7 in one call is
    rejected."""
    m = DimVar("M", 1, 64)
    x, y = Var("x", t((m,))), Var("y", t((m,)))
    f = Function("f", (x, y), Call(Acc(), (x, y)), None)
    assert elaborate(f, (t((5,)), t((5,)))) is f
    with pytest.raises(TypeInferError, match="bound to 5 by an earlier argument and to 7"):
        elaborate(f, (t((5,)), t((7,))))


def test_call_to_prototype_without_variants_reject():
    """'a function with no body and no variants is uncallable'."""
    x = Var("x", t((4,)))
    p = Function("p", (x,), None, t((4,)))
    a = Var("a", t((4,)))
    with pytest.raises(TypeInferError, match="uncallable"):
        infer_call_to_function(Call(p, (a,)), (a.type,), Session())


def test_elaboration_failure_is_reported_at_the_op():
    """'When the body cannot express a propagated sharding ..., typeinfer fails at that op, not
    at the boundary': an op rejecting the bound type names the op."""
    x, y = Var("x", t((8, 4))), Var("y", t((8, 4)))
    f = Function("f", (x, y), Call(Acc(), (x, y)), None)
    with pytest.raises(TypeInferError) as ei:
        elaborate(f, (t((8, 4)), t((8, 4), I32)))
    assert "dtype" in str(ei.value)  # the wildcard rejects a dtype mismatch at binding
    z = Var("z", t((8, 4)))
    g = Function("g", (z,), Call(Acc(), (Constant(np.zeros((8,), np.float32)), z)), None)
    with pytest.raises(TypeInferError) as ei:
        elaborate(g, (t((8, 4), layout=partial_y()),))
    assert ei.value.op == "Acc"


# =============================================================================================
# signature Layout.strides materialization
# =============================================================================================
def test_signature_strides_materialized_before_the_body():
    """'function-signature binding MUST materialize it to shared-engine C-order over the
    canonical global shape before the resulting TensorType enters the body. Verbose
    Layout(strides=tuple) annotations are preserved verbatim.'"""
    sugar = ShardLayout(MESH, (Split(1), Broadcast()), Layout((8, (2, 2))))
    verbose = Layout((8, 4), (1, 8))
    x = Var("x", t((8, 4), layout=sugar))
    y = Var("y", t((8, 4), layout=verbose))
    z = Var("z", t((8, 4), layout=Layout((8, 4))))
    f = Function("f", (x, y, z), Tuple((ident(x), y, z)), None)
    m = Module((f,), topology=TOPO)
    with pytest.raises(TypeInferError, match="strides=None"):
        verify_module(m)  # before inference the sugar is still there
    out = infer_module(m)
    g = out["f"]
    assert out is not m and g is not f
    assert g.params[0].type.layout.layout.strides == (4, (2, 1))
    assert g.params[0].type.layout.layout.flat_strides == sugar.shared_engine_strides()
    assert g.params[1].type.layout == verbose
    assert g.params[2].type.layout == Layout.natural((8, 4))
    assert g.body.fields[0].checked_type == g.params[0].type
    check_strides_materialized(out)


def test_callers_are_retargeted_to_the_materialized_callee():
    """'After signature binding, no Tensor[...] annotation reachable from the function carries
    strides=None.' — also through calls."""
    x = Var("x", t((8, 4), layout=Layout((8, 4))))
    f = Function("f", (x,), ident(x), None)
    a = Var("a", t((8, 4), layout=Layout.natural((8, 4))))
    g = Function("g", (a,), Call(f, (a,)), None)
    out = infer_module(Module((f, g)))
    assert out["g"].body.op is out["f"]
    assert out["g"].body.checked_type == t((8, 4), layout=Layout.natural((8, 4)))


def test_materialize_type_keeps_materialized_types():
    """Materialization changes only strides=None; other types come back as the same object."""
    ty = t((8, 4), layout=Layout.natural((8, 4)))
    assert materialize_type(ty) is ty
    tup = TupleType((t((2,), layout=Layout((2,))),))
    assert materialize_type(tup).fields[0].layout.strides == (1,)


def test_unmaterialized_shardlayout_in_a_stamp_reject():
    """'after HIR typeinfer runs, every ShardLayout reachable from a value's type has concrete
    layout.strides (never None)'."""
    sugar = ShardLayout(MESH, (Split(0), Broadcast()), Layout((8, 4)))
    x = Var("x", t((8, 4)))
    f = Function("f", (x,), Call(MakeSharded(sugar), (x,)), None)
    with pytest.raises(TypeInferError, match="strides=None"):
        infer_module(Module((f,), topology=TOPO))


# =============================================================================================
# GridRegionExpr
# =============================================================================================
K = DimVar("K", 1, 4096)


def test_single_carry_accumulator():
    """The spec's minimal example: 'acc = zeros(...); for i in tile(K, step=BLOCK): acc = acc +
    load_tile(x, i)' — 'GridRegionExpr.type is TensorType (single carry)'."""
    x = Var("x", t((K, 16)))
    i, acc = Var("i"), Var("acc")
    zeros = Constant(np.zeros(16, np.float32))
    step = Call(Acc(), (acc, ident(Constant(np.ones(16, np.float32)))))
    loop = GridRegionExpr(i, (acc,), (zeros,), step, (step,), K, 32)
    f = Function("f", (x,), loop, t((16,)))
    infer_module(Module((f,)))
    assert loop.checked_type == t((16,))
    assert acc.checked_type == t((16,))
    assert i.checked_type == t((), I32)


def test_multi_carry_with_tuple_get_item_after_the_loop():
    """'after the loop, the post-region binding refers to ... a tuple_get_item of it
    (multi-carry, when len(yield_values) > 1)' and the type is a TupleType."""
    x = Var("x", t((8,)))
    i, a, b = Var("i"), Var("a"), Var("b")
    init_b = Constant(np.zeros((2, 2), np.int32))
    ya, yb = Call(Acc(), (a, x)), ident(b)
    loop = GridRegionExpr(i, (a, b), (x, init_b), Tuple((ya, yb)), (ya, yb), 10, 2, 1)
    out = TupleGetItem(loop, 1)
    f = Function("f", (x,), Tuple((TupleGetItem(loop, 0), out)), None)
    infer_module(Module((f,)))
    assert loop.checked_type == TupleType((t((8,)), t((2, 2), I32)))
    assert out.checked_type == t((2, 2), I32)


def test_no_carry_loop_is_the_empty_tuple():
    """'all three are empty for a no-carry loop' — its value is the empty TupleType (decision)."""
    x = Var("x", t((8,)))
    loop = GridRegionExpr(Var("i"), (), (), ident(x), (), 4)
    f = Function("f", (x,), loop, None)
    infer_module(Module((f,)))
    assert loop.checked_type == TupleType(())


def test_carry_chain_lengths_reject():
    """'len(init_args) == len(carried_args) == len(yield_values)'."""
    x = Var("x", t((8,)))
    acc = Var("acc")
    loop = GridRegionExpr(Var("i"), (acc,), (x,), acc, (), 4)
    with pytest.raises(TypeInferError, match=r"lengths \(1, 1, 0\)"):
        infer_module(Module((Function("f", (x,), loop, None),)))


def test_yield_type_must_equal_the_carry_type_reject():
    """Each yield is the next iteration's phi, so its type equals the carry's (init's)."""
    x = Var("x", t((8,)))
    acc = Var("acc")
    y = Constant(np.zeros(8, np.int32))
    loop = GridRegionExpr(Var("i"), (acc,), (x,), y, (y,), 4)
    with pytest.raises(TypeInferError, match="yield 0 has type"):
        infer_module(Module((Function("f", (x,), loop, None),)))


def test_phi_annotation_must_match_init_reject():
    """'the first-iteration value of each carried_args phi is its init_args entry'."""
    x = Var("x", t((8,)))
    acc = Var("acc", t((8,), I32))
    loop = GridRegionExpr(Var("i"), (acc,), (x,), acc, (acc,), 4)
    with pytest.raises(TypeInferError, match="annotated"):
        infer_module(Module((Function("f", (x,), loop, None),)))


def test_induction_var_annotation():
    """The induction var is a rank-0 i32 tensor unless annotated (then a rank-0 integer)."""
    x = Var("x", t((8,)))
    i = Var("i", t((), DType.I64))
    loop = GridRegionExpr(i, (), (), ident(x), (), 4)
    infer_module(Module((Function("f", (x,), loop, None),)))
    assert i.checked_type == t((), DType.I64)
    bad = GridRegionExpr(Var("j", t((), F32)), (), (), ident(x), (), 4)
    with pytest.raises(TypeInferError, match="rank-0 integer"):
        infer_module(Module((Function("g", (x,), bad, None),)))


def test_shapedim_bound_by_enclosing_function_params():
    """'Every DimVar referenced by a ShapeDim start / extent / step MUST be bound by the
    enclosing Function's parameter shapes.'"""
    x = Var("x", t((K, 4)))
    loop = GridRegionExpr(Var("i"), (), (), ident(x), (), K // 4, K % 3 + 1, K - K)
    infer_module(Module((Function("f", (x,), loop, None),)))
    assert loop.checked_type == TupleType(())


def test_unbound_dimvar_reject():
    """'An unbound DimVar MUST raise.'"""
    x = Var("x", t((K, 4)))
    n = DimVar("N", 1, 8)
    loop = GridRegionExpr(Var("i"), (), (), ident(x), (), n)
    with pytest.raises(TypeInferError) as ei:
        infer_module(Module((Function("f", (x,), loop, None),)))
    assert "DimVar N" in str(ei.value) and "MUST be bound" in rule_of(ei)
    loop2 = GridRegionExpr(Var("i"), (), (), ident(x), (), K)
    with pytest.raises(TypeInferError, match="outside one"):
        infer_expr(loop2)  # no enclosing Function at all


def test_dimvar_with_other_envelope_than_the_param_reject():
    """Same-name DimVars agree on (lo, hi): a loop bound's K must be the parameter's K."""
    x = Var("x", t((K, 4)))
    loop = GridRegionExpr(Var("i"), (), (), ident(x), (), DimVar("K", 1, 8))
    with pytest.raises(TypeInferError, match="envelope"):
        infer_module(Module((Function("f", (x,), loop, None),)))


@pytest.mark.parametrize("start,extent,step,what", [
    (0, -1, 1, "extent = -1"),
    (-2, 4, 1, "start = -2"),
    (0, 4, 0, "step = 0"),
    (0, 4, -1, "step = -1"),
])
def test_static_domain_values_reject(start, extent, step, what):
    """'The resolved start and extent MUST be non-negative integers and the resolved step MUST
    be a positive integer; otherwise resolution MUST raise.'"""
    x = Var("x", t((8,)))
    loop = GridRegionExpr(Var("i"), (), (), ident(x), (), extent, step, start)
    with pytest.raises(TypeInferError, match=what):
        infer_module(Module((Function("f", (x,), loop, None),)))


def test_symbolic_step_that_folds_to_zero_reject():
    """A symbolic step that simplifies to a static 0 is a static non-positive step."""
    x = Var("x", t((K, 4)))
    loop = GridRegionExpr(Var("i"), (), (), ident(x), (), K, K - K)
    with pytest.raises(TypeInferError, match="step"):
        infer_module(Module((Function("f", (x,), loop, None),)))


def test_loop_var_reused_with_another_type_reject():
    """A phi Var binds one loop: reusing it with a different carry type is rejected."""
    x, y = Var("x", t((8,))), Var("y", t((4,)))
    acc = Var("acc")
    l1 = GridRegionExpr(Var("i"), (acc,), (x,), acc, (acc,), 2)
    l2 = GridRegionExpr(Var("j"), (acc,), (y,), acc, (acc,), 2)
    with pytest.raises(TypeInferError, match="already typed"):
        infer_module(Module((Function("f", (x, y), Tuple((l1, l2)), None),)))


# =============================================================================================
# module verification
# =============================================================================================
def test_unknown_mesh_topology_name_reject():
    """'The name MUST resolve to one of that Module's effective Topology levels' — 'it MUST NOT
    create a level'."""
    mesh = Mesh("cluster", ("x",), (4,))
    sl = ShardLayout(mesh, (Split(0),), Layout.natural((8, 4)))
    x = Var("x", t((8, 4), layout=sl))
    with pytest.raises(TypeInferError) as ei:
        infer_module(Module((Function("f", (x,), ident(x), None),), topology=TOPO))
    assert "'cluster'" in str(ei.value) and "MUST NOT create a level" in rule_of(ei)


def test_mesh_changing_a_level_extent_reject():
    """'A Mesh MAY map fewer levels than the domain declares, but it MUST NOT create a level or
    change one's extent.'"""
    mesh = Mesh("cta", ("x", "y"), (2, 2))  # the cta level has extent 8
    sl = ShardLayout(mesh, (Split(0), Broadcast()), Layout.natural((8, 4)))
    x = Var("x", t((8, 4), layout=sl))
    with pytest.raises(TypeInferError, match="extent 8") as ei:
        infer_module(Module((Function("f", (x,), ident(x), None),), topology=TOPO))
    assert "change a Topology level's extent" in rule_of(ei)


def test_mesh_mapping_fewer_levels_accept():
    """'A Mesh MAY map fewer levels than the domain declares'."""
    x = Var("x", t((8, 4), layout=split_x()))
    infer_module(Module((Function("f", (x,), ident(x), None),), topology=TOPO))


def test_mesh_in_an_op_attribute_is_checked():
    """ShardLayout.mesh in an op attribute (a Reshard target) must name a module level too."""
    bad = ShardLayout(Mesh("gpu", ("x",), (4,)), (Split(0),), Layout.natural((8, 4)))
    x = Var("x", t((8, 4)))
    f = Function("f", (x,), Call(MakeSharded(bad), (x,)), None)
    with pytest.raises(TypeInferError, match="'gpu'"):
        infer_module(Module((f,), topology=TOPO))


def test_infer_module_returns_the_same_module_without_sugar():
    """infer_module returns the input module when no signature needs materialization."""
    m = Module((normal(),))
    assert infer_module(m) is m


def test_deep_body_elaborates_and_verifies_without_recursion():
    """HIR is SSA-as-DAG of any depth: a 3000-deep body elaborates (rebuilt iteratively, sharing
    preserved), infers and verifies."""
    x = Var("x", t((8, 4)))
    e = x
    for _ in range(3000):
        e = ident(e)
    f = Function("f", (x,), Tuple((e, e)), None)
    a = Var("a", t((8, 4), layout=partial_y()))
    call = Call(f, (a,))
    s = Session()
    infer_module(Module((f, Function("g", (a,), call, None)), topology=TOPO), s)
    inst = resolved_target(call, s)
    assert inst.body.fields[0] is inst.body.fields[1]
    assert call.checked_type.fields[1].layout.partials == {1: "sum"}


def test_infer_function_directly_materializes_the_signature():
    """'function-signature binding MUST materialize it ... before the resulting TensorType
    enters the body' — also when a Function is inferred on its own, outside a module."""
    x = Var("x", t((8, 4), layout=Layout((8, 4))))
    f = Function("f", (x,), ident(x), None)
    ty = infer_expr(f)
    assert ty.params[0].layout == Layout.natural((8, 4))
    assert ty.result.layout == Layout.natural((8, 4))


def test_grid_domain_resolution_at_call_time():
    """'A ShapeDim start / extent / step is resolved by the evaluator at call time against
    concrete argument shapes' — 'Resolution substitutes each such DimVar with the corresponding
    argument-shape size and folds the dim Expr to a value n.'"""
    x = Var("x", t((K, 4)))
    loop = GridRegionExpr(Var("i"), (), (), ident(x), (), K // 4, 2, K % 3)
    env = dim_env((x,), [(100, 4)])
    assert env == {"K": 100}
    assert resolve_grid_domain(loop, env) == range(1, 25, 2)


def test_grid_domain_resolution_rejects():
    """'The resolved start and extent MUST be non-negative integers and the resolved step MUST
    be a positive integer; otherwise resolution MUST raise. An unbound DimVar MUST raise.'"""
    x = Var("x", t((K, 4)))
    neg_extent = GridRegionExpr(Var("i"), (), (), ident(x), (), K - 10)
    with pytest.raises(TypeInferError, match="resolves to -5"):
        resolve_grid_domain(neg_extent, {"K": 5})
    zero_step = GridRegionExpr(Var("i"), (), (), ident(x), (), 8, K - 5)
    with pytest.raises(TypeInferError, match="step"):
        resolve_grid_domain(zero_step, {"K": 5})
    unbound = GridRegionExpr(Var("i"), (), (), ident(x), (), DimVar("N", 1, 8))
    with pytest.raises(TypeInferError, match="DimVar N is unbound"):
        resolve_grid_domain(unbound, {"K": 5})
    with pytest.raises(TypeInferError, match="envelope"):
        dim_env((x,), [(0, 4)])
    y = Var("y", t((K,)))
    with pytest.raises(TypeInferError, match="one value per call"):
        dim_env((x, y), [(3, 4), (4,)])
