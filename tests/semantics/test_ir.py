"""HIR nodes (ir.py): structural equality and hashing that ignore non-canonical metadata,
linear-time comparison of deep shared DAGs, the authoring freeze, and IRError for malformed
IR."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.ir import (
    Call,
    Constant,
    DimVarRangePat,
    Function,
    GridRegionExpr,
    Module,
    Target,
    Tuple,
    TupleGetItem,
    Var,
)
from tilefoundry.semantics.ops import Binary, BinaryKind, Unary, UnaryKind
from tilefoundry.semantics.types import DimVar, IRError, TensorType, Topology

T = TensorType((4,), DType.F32)
M = DimVar("M", 1, 1024)
TM = TensorType((M,), DType.F32)


def neg(e):
    return Call(Unary(UnaryKind.NEG), (e,))


def add(a, b):
    return Call(Binary(BinaryKind.ADD), (a, b))


def dispatch(labels=("small", "large")):
    x = Var("x", TM)
    base = Function("f", (x,), None, TM)
    for (lo, hi), label in zip([(1, 64), (64, 1024)], labels, strict=True):
        base.add_variant(Function("f", (x,), neg(x), TM,
                                  specializations=(DimVarRangePat("M", lo, hi),), label=label))
    return base


# =============================================================================================
# structural equality and hashing
# =============================================================================================
def test_equality_is_structural():
    """Nodes are frozen dataclasses with structural equality and hashing."""
    x1, x2 = Var("x", T), Var("x", T)
    a, b = add(neg(x1), x1), add(neg(x2), x2)
    assert a == b and hash(a) == hash(b) and a is not b
    assert add(neg(x1), x1) != add(x1, neg(x1))
    assert neg(x1) != Call(Unary(UnaryKind.ABS), (x1,))
    assert Var("x", T) != Var("y", T)
    assert Var("x", T) != Var("x", TM)


def test_constants_compare_by_bits():
    """Constants compare by dtype, shape and bits (so -0.0 differs from +0.0)."""
    c = Constant(np.array([1.0, 2.0], np.float32))
    assert c == Constant(np.array([1.0, 2.0], np.float32))
    assert c != Constant(np.array([1.0, 2.0], np.float16))
    assert Constant(np.array([0.0], np.float32)) != Constant(np.array([-0.0], np.float32))
    assert c.value.flags.writeable is False


def test_variant_labels_are_not_canonical():
    """'The label is non-canonical metadata: it MUST NOT participate in structural equality,
    hashing, or the canonical signature'."""
    a, b = dispatch(("small", "large")), dispatch(("tiny", "huge"))
    Module((a,)), Module((b,))
    assert a.variants[0].label != b.variants[0].label
    assert a.variants[0] == b.variants[0] and hash(a.variants[0]) == hash(b.variants[0])
    assert a == b and hash(a) == hash(b)
    assert a.variants[0].canonical_signature == "M$1_64"
    assert "small" not in a.variants[0].canonical_signature


def test_variants_are_canonical():
    """'variants is a canonical IR field — it participates in structural equality, hashing'."""
    a = dispatch()
    x = a.params[0]
    b = Function("f", (x,), None, TM)
    b.add_variant(Function("f", (x,), neg(x), TM, specializations=(DimVarRangePat("M", 1, 1024),)))
    Module((a,)), Module((b,))
    assert a != b


def test_inferred_type_stamps_are_not_canonical():
    """The type stamped by inference takes no part in equality or hashing."""
    x1, x2 = Var("x", T), Var("x", T)
    a, b = neg(x1), neg(x2)
    h = hash(b)
    a.stamp(T)
    x1.stamp(T)
    assert a.has_type and not b.has_type
    assert a == b and hash(a) == h


def test_unstamped_node_reports_irerror():
    """Reading a type before inference is an IRError naming the fix, not AttributeError."""
    with pytest.raises(IRError, match="run type inference"):
        _ = neg(Var("x", T)).checked_type


def test_modules_compare_structurally():
    """Modules compare by functions, target and topology."""
    x = Var("x", T)
    m1 = Module((Function("f", (x,), neg(x), T),))
    m2 = Module((Function("f", (Var("x", T),), neg(Var("x", T)), T),))
    assert m1 == m2 and hash(m1) == hash(m2)
    assert m1 != Module((Function("f", (x,), neg(x), T),), target=Target("other"))


# =============================================================================================
# deep and shared DAGs
# =============================================================================================
DEPTH = 3000


def chain(depth: int, leaf):
    e = leaf
    for _ in range(depth):
        e = neg(e)
    return e


def diamond(depth: int, leaf):
    """Each level uses the previous one twice: 2**depth paths, depth + 1 distinct nodes."""
    e = leaf
    for _ in range(depth):
        e = add(e, e)
    return e


def test_deep_chain_hashes_and_compares_without_recursion_error():
    """'HIR is pure SSA-as-DAG': a chain of depth 3000 hashes and compares iteratively."""
    a, b = chain(DEPTH, Var("x", T)), chain(DEPTH, Var("x", T))
    assert hash(a) == hash(b)
    assert a == b
    assert a != chain(DEPTH, Var("y", T))


def test_shared_dag_compares_in_linear_time():
    """'sharing of intermediate results is expressed by Python object identity': comparison is
    memoized on node pairs, so a depth-3000 diamond (2**3000 paths) compares quickly."""
    a, b = diamond(DEPTH, Var("x", T)), diamond(DEPTH, Var("x", T))
    assert hash(a) == hash(b)
    assert a == b
    assert a != diamond(DEPTH, Var("z", T))
    xa, xb = Var("x", T), Var("x", T)
    f = Function("f", (xa,), diamond(DEPTH, xa), None)
    assert f == Function("f", (xb,), diamond(DEPTH, xb), None)
    assert len(repr(f)) < 2000  # a bounded repr, not one line per path


def test_repr_is_bounded_for_deep_dags():
    """repr of a depth-3000 chain neither recurses past the limit nor grows with depth."""
    r = repr(chain(DEPTH, Var("x", T)))
    assert r.startswith("Call(op=Unary(kind=<UnaryKind.NEG") and "(...)" in r


# =============================================================================================
# authoring freeze
# =============================================================================================
def test_sealed_prototype_rejects_variants():
    """'A sealed base rejects further variants.' — entering a Module seals."""
    base = dispatch()
    assert not base.sealed
    Module((base,))
    assert base.sealed
    x = base.params[0]
    with pytest.raises(IRError, match="sealed"):
        base.add_variant(Function("f", (x,), neg(x), TM,
                                  specializations=(DimVarRangePat("M", 1, 2),)))


def test_accumulating_prototype_must_not_be_hashed():
    """'Because variants participates in hashing, a base MUST NOT be hashed while still
    accumulating variants.'"""
    base = dispatch()
    with pytest.raises(IRError, match="MUST NOT be hashed"):
        hash(base)
    with pytest.raises(IRError, match="MUST NOT be hashed"):
        hash(Call(base, (Var("a", TM),)))  # not through a parent node either
    Module((base,))
    assert isinstance(hash(base), int)


def test_add_variant_preconditions():
    """Only a dispatch prototype (body None) takes variants, and only variants (one
    DimVarRangePat)."""
    x = Var("x", TM)
    normal = Function("g", (x,), neg(x), TM)
    with pytest.raises(IRError, match="only a dispatch prototype"):
        normal.add_variant(Function("g", (x,), neg(x), TM,
                                    specializations=(DimVarRangePat("M", 1, 2),)))
    base = Function("g", (x,), None, TM)
    with pytest.raises(IRError, match="exactly one DimVarRangePat"):
        base.add_variant(normal)


def test_module_rejects_a_top_level_variant_and_duplicate_names():
    """'A top-level Module.functions entry MUST NOT be a variant'; names are a symbol table."""
    base = dispatch()
    with pytest.raises(IRError, match="is a variant"):
        Module((base.variants[0],))
    assert not base.sealed
    x = Var("x", T)
    with pytest.raises(IRError, match="unique"):
        Module((Function("f", (x,), x, T), Function("f", (x,), x, T)))


def test_function_kinds():
    """'A Function is exactly one of three shapes': normal, dispatch prototype, variant."""
    base = dispatch()
    assert base.kind == "prototype" and base.variants[0].kind == "variant"
    x = Var("x", T)
    assert Function("g", (x,), x, T).kind == "normal"


# =============================================================================================
# malformed IR raises IRError
# =============================================================================================
X = Var("x", T)
PAT = DimVarRangePat("M", 1, 64)

MALFORMED = {
    "Var name not identifier": lambda: Var("1x", T),
    "Var type not a type": lambda: Var("x", 3),
    "Constant not ndarray": lambda: Constant([1.0]),
    "Constant float64": lambda: Constant(np.array([1.0])),
    "Constant strings": lambda: Constant(np.array(["a"])),
    "Call op not Op": lambda: Call("neg", (X,)),
    "Call args not tuple": lambda: Call(Unary(UnaryKind.NEG), [X]),
    "Call arg not Expr": lambda: Call(Unary(UnaryKind.NEG), (1,)),
    "Call arity": lambda: Call(Unary(UnaryKind.NEG), (X, X)),
    "Unary kind": lambda: Unary("neg"),
    "Tuple fields": lambda: Tuple([X]),
    "TupleGetItem value": lambda: TupleGetItem(3, 0),
    "TupleGetItem index": lambda: TupleGetItem(X, -1),
    "TupleGetItem bool": lambda: TupleGetItem(X, True),
    "DimVarRangePat empty": lambda: DimVarRangePat("M", 4, 4),
    "DimVarRangePat name": lambda: DimVarRangePat("1M", 0, 4),
    "DimVarRangePat bool": lambda: DimVarRangePat("M", True, 4),
    "Function name": lambda: Function("1f", (X,), X, T),
    "Function params not tuple": lambda: Function("f", [X], X, T),
    "Function param not Var": lambda: Function("f", (Constant(np.zeros(1, np.float32)),), X, T),
    "Function body not Expr": lambda: Function("f", (X,), "x", T),
    "Function return_type": lambda: Function("f", (X,), X, "T"),
    "Function specializations None": lambda: Function("f", (X,), X, T, specializations=None),
    "Function specializations list": lambda: Function("f", (X,), X, T, specializations=[PAT]),
    "Function specialization type": lambda: Function("f", (X,), X, T, specializations=(1,)),
    "Function variants None": lambda: Function("f", (X,), None, T, variants=None),
    "Function variant type": lambda: Function("f", (X,), None, T, variants=(X,)),
    "Function label": lambda: Function("f", (X,), X, T, label=3),
    "Grid induction var": lambda: GridRegionExpr(X.type, (), (), X, (), 4),
    "Grid carried not Var": lambda: GridRegionExpr(X, (neg(X),), (X,), X, (X,), 4),
    "Grid init list": lambda: GridRegionExpr(X, (), [], X, (), 4),
    "Grid body": lambda: GridRegionExpr(X, (), (), None, (), 4),
    "Grid extent": lambda: GridRegionExpr(X, (), (), X, (), 4.0),
    "Grid step": lambda: GridRegionExpr(X, (), (), X, (), 4, "1"),
    "Module functions list": lambda: Module([]),
    "Module entry": lambda: Module((X,)),
    "Module target": lambda: Module((), target="reference"),
    "Module topology": lambda: Module((), topology=()),
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_ir_raises_irerror(name):
    """Malformed IR raises IRError naming the field — never AssertionError / KeyError /
    AttributeError / TypeError."""
    with pytest.raises(IRError):
        MALFORMED[name]()


GARBAGE = st.sampled_from([None, 0, -1, True, 1.5, "x", "1x", [], (), {}, (1,), [X], (None,),
                           object(), np.zeros(2), X, T, Unary(UnaryKind.NEG)])
CTORS = {
    Var: dict(name="x", type=T),
    Call: dict(op=Unary(UnaryKind.NEG), args=(X,)),
    Tuple: dict(fields=(X,)),
    TupleGetItem: dict(tuple_value=X, index=0),
    DimVarRangePat: dict(dim_var="M", lo=1, hi=4),
    Function: dict(name="f", params=(X,), body=X, return_type=T),
    GridRegionExpr: dict(induction_var=Var("i"), carried_args=(), init_args=(), body=X,
                         yield_values=(), extent=4),
    Module: dict(functions=()),
}


@given(st.sampled_from(sorted(CTORS, key=lambda c: c.__name__)), st.data())
def test_any_wrong_field_raises_only_irerror(ctor, data):
    """Whatever value lands in one field, construction succeeds or raises IRError."""
    kw = dict(CTORS[ctor])
    field = data.draw(st.sampled_from(sorted(kw) + (["label"] if ctor is Function else [])))
    kw[field] = data.draw(GARBAGE)
    try:
        ctor(**kw)
    except IRError:
        pass


def test_topology_default_is_empty():
    """A Module declares its Topology; the default has no level."""
    assert Module(()).topology == Topology(())


def test_function_value_type_is_the_callable_projection():
    """HIR spec §1.1: 'Function.type is the IR-level CallableType (types §7) projected from
    params + return_type.'"""
    from tilefoundry.semantics.formats import DType as _D
    from tilefoundry.semantics.ir import Function as _F
    from tilefoundry.semantics.ir import Var as _V
    from tilefoundry.semantics.types import CallableType as _C
    from tilefoundry.semantics.types import TensorType as _T

    t = _T((4,), _D.F32)
    x = _V("x", t)
    f = _F("f", (x,), x, t)
    assert f.type == _C((t,), t)
    assert _F("g", (x,), x, _T((4,), _D.BF16)).type != f.type
