"""Completeness of the op facts kept as tables (issue 36 items 2 and 3, D437-D439): the kernel
IR's ``math`` functions (``compiler/kir_math.py``), their ULP budgets (``semantics/ulp.py``),
the interpreter's semantics of each, the kernel-IR instruction set
(``compiler/kir_instructions.py``) and the docs' lowering table. Each test fails, naming the
entry, when an op or instruction is added without its entry."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest

import tilefoundry.compiler.lower as lower
import tilefoundry.semantics.evaluator.families  # noqa: F401  (registers every evaluator)
from tilefoundry.compiler import kir
from tilefoundry.compiler.interp import KernelRun
from tilefoundry.compiler.kir_instructions import INSTRUCTIONS
from tilefoundry.compiler.kir_math import MATH_ACTIVATIONS, MATH_FNS, MATH_OPS, NOT_MATH
from tilefoundry.semantics.evaluator.math import TRANSCENDENTAL
from tilefoundry.semantics.evaluator.registry import EVALUATORS, EvalCtx
from tilefoundry.semantics.ops import ALL_OPS, Unary
from tilefoundry.semantics.ops.nn import ACTIVATIONS
from tilefoundry.semantics.ulp import OPS as ULP_OPS
from tilefoundry.semantics.ulp import budget

ROOT = Path(__file__).resolve().parents[2]
_X = np.array([-3.5, -1.0, -0.0, 0.25, 0.5, 2.0, 7.0], np.float32)


@pytest.mark.parametrize("cls", ACTIVATIONS, ids=lambda c: c.__name__)
def test_every_activation_is_a_math_fn_or_states_why_not(cls: type):
    assert (cls in MATH_ACTIVATIONS) != (cls in NOT_MATH), (
        f"{cls.__name__}: add it to compiler/kir_math.py MATH_OPS (the kernel-IR math function "
        f"computing it) or NOT_MATH with the reason")


def test_every_transcendental_unary_kind_is_a_math_fn():
    have = {op.kind for op in MATH_OPS.values() if isinstance(op, Unary)}
    missing = sorted(k.value for k in TRANSCENDENTAL if k not in have)
    assert not missing, f"Unary kinds with a ULP contract but no kernel-IR math fn: {missing}"


@pytest.mark.parametrize("name", MATH_FNS)
def test_every_math_fn_has_a_ulp_budget_the_reference_notes(name: str):
    """The name is the ULP key: the table has it, and the reference evaluator of the op notes
    exactly that budget (so a kernel computing ``math`` is held to the reference's contract)."""
    assert name in ULP_OPS, f"math fn {name!r} has no ULP budget in semantics/ulp.py"
    op = MATH_OPS[name]
    noted: list = []

    ctx = EvalCtx(op, None, None)
    ctx.note = lambda c: noted.append(c)  # type: ignore[method-assign]
    EVALUATORS[type(op)](ctx, (_X,))
    ulps = [c.ulp for c in noted if getattr(c, "kind", None) == "ulp"]
    assert ulps == [budget(name, "f32")], f"{name}: the reference noted {ulps}"


@pytest.mark.parametrize("name", MATH_FNS)
@pytest.mark.parametrize("dt", ["f32", "f16"])
def test_the_interpreter_computes_every_math_fn_as_the_reference(name: str, dt: str):
    op = MATH_OPS[name]
    x = _X.astype(kir.numpy_dtype(dt))
    want = np.asarray(EVALUATORS[type(op)](EvalCtx(op, None, None), (x,)))
    interp = KernelRun.__new__(KernelRun)
    interp.values = {"%x": x}
    got = interp.i_Math(kir.Math(out="%y", fn=name, x="%x"))
    assert got.dtype == want.dtype
    assert np.array_equal(got.view(np.uint8), want.view(np.uint8)), name


def test_the_instruction_set_is_every_instr_class_of_the_kernel_ir():
    defined = [c.__name__ for c in vars(kir).values()
               if isinstance(c, type) and issubclass(c, kir.Instr) and c is not kir.Instr]
    assert sorted(defined) == sorted(INSTRUCTIONS), (
        f"compiler/kir_instructions.py INSTRUCTIONS {sorted(INSTRUCTIONS)} vs the Instr "
        f"classes of compiler/kir.py {sorted(defined)}")


@pytest.mark.parametrize("name", INSTRUCTIONS)
def test_every_instruction_has_verifier_and_interpreter_semantics(name: str):
    from tilefoundry.compiler.kir_verify import _Checker

    assert isinstance(getattr(kir, name, None), type), f"kir.{name} is not defined"
    handler = "tile_loop" if name == "TileLoop" else f"i_{name}"  # the loop runs its body
    assert callable(getattr(KernelRun, handler, None)), \
        f"the interpreter (compiler/interp.py) has no {handler}"
    assert callable(getattr(_Checker, f"i_{name}", None)), \
        f"the verifier (compiler/kir_verify.py) has no i_{name}"


def _lowering_table_names() -> set[str]:
    lines = (ROOT / "docs" / "compiler.md").read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| HIR op | kernel IR |"))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append(line.split("|")[1])
    return set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", " ".join(rows)))


@pytest.mark.parametrize("cls", ALL_OPS, ids=lambda c: c.__name__)
def test_the_docs_lowering_table_names_every_op(cls: type):
    """docs/compiler.md's lowering table has a row naming every op class (a lowered one by its
    kernel IR, a NOT_LOWERED one in the 'not lowered here' row)."""
    assert cls.__name__ in _lowering_table_names(), (
        f"docs/compiler.md lowering table has no row naming {cls.__name__} "
        f"({'lowered' if cls in lower.LOWERINGS else 'not lowered'})")


def test_the_docs_math_row_lists_every_math_activation():
    lines = (ROOT / "docs" / "compiler.md").read_text(encoding="utf-8").splitlines()
    row = next(line for line in lines if "| `math` on the operand dtype |" in line)
    missing = [c.__name__ for c in MATH_ACTIVATIONS if c.__name__ not in row]
    assert not missing, f"docs/compiler.md math row misses {missing}"


# ---------------------------------------------------------------------------------------------
# combine laws (semantics/combine_laws.py, D439)
# ---------------------------------------------------------------------------------------------
def _obligations() -> dict:
    import tilefoundry.smt.obligations  # noqa: F401  (registers every obligation)
    from tilefoundry.smt.framework import REGISTRY

    return REGISTRY


def test_every_reduction_and_scan_combine_has_its_laws():
    from tilefoundry.semantics.combine_laws import COMBINE_LAWS, REDUCE_COMBINES
    from tilefoundry.semantics.ops.tile_reduce import SEEDED_KINDS
    from tilefoundry.semantics.ops.tile_scan import SCAN_COMBINES
    from tilefoundry.semantics.reductions import SCAN_OPS
    from tilefoundry.semantics.types import REDUCTIONS

    for name, kinds in (("Partial reductions", REDUCTIONS), ("seeded kinds", SEEDED_KINDS)):
        missing = [k for k in kinds if REDUCE_COMBINES.get(k) not in COMBINE_LAWS]
        assert not missing, f"{name} without combine laws: {missing}"
    for name, combs in (("Scan combines", SCAN_COMBINES), ("reductions.SCAN_OPS", SCAN_OPS)):
        missing = [c for c in combs if c not in COMBINE_LAWS]
        assert not missing, f"{name} without combine laws: {missing}"


@pytest.mark.parametrize("comb", ["add", "max", "min", "mul"])
def test_the_law_obligations_follow_the_table(comb: str):
    """Each law the table states is proved by an obligation, and each float associativity it
    denies is refuted by one: associative on floats -> ``laws.<kind>_f32`` proved; not
    associative on floats (a float combine) -> ``laws.f32_<comb>_assoc`` a counterexample;
    associative on integers -> an 8-bit SMT model in ``smt/obligations/scan.py`` (whose
    ``scan.prefix_law`` proves every regrouping of the prefixes equal)."""
    from tilefoundry.semantics.combine_laws import COMBINE_LAWS, REDUCE_COMBINES
    from tilefoundry.smt.obligations.scan import COMBINES as SCAN_MODELS

    reg = _obligations()
    laws = COMBINE_LAWS[comb]
    kind = next((r for r, c in REDUCE_COMBINES.items() if c == comb), None)
    if "float" in laws.associative:
        assert kind is not None and reg[f"laws.{kind}_f32"].expect == "proved", comb
    elif not laws.int_only:
        assert reg[f"laws.f32_{comb}_assoc"].expect == "counterexample", comb
    if "int" in laws.associative:
        assert comb in SCAN_MODELS, f"{comb}: no Scan SMT model (smt/obligations/scan.py)"
        assert reg["scan.prefix_law"].expect == "proved"


def test_the_law_table_is_the_combines():
    """The parametrization above is every combine of the table (a new one is checked too)."""
    from tilefoundry.semantics.combine_laws import COMBINE_LAWS

    assert sorted(COMBINE_LAWS) == ["add", "max", "min", "mul"], (
        "a combine was added: extend test_the_law_obligations_follow_the_table's list")


def test_monotone_activations_commute_with_exactly_the_order_reductions():
    from tilefoundry.semantics.combine_laws import order_reductions
    from tilefoundry.semantics.typeinfer.commutation import TABLE

    assert set(order_reductions()) == {"max", "min"}  # the lattice reductions, proved in laws.*
    for c in ACTIVATIONS:
        if "monotone" in (c.FACTS or ()):
            allowed = {r.reduction for r in TABLE if r.op == c.__name__ and r.allow}
            assert allowed == set(order_reductions()), c.__name__


def test_the_docs_math_instruction_row_lists_exactly_the_math_fns():
    lines = (ROOT / "docs" / "compiler.md").read_text(encoding="utf-8").splitlines()
    row = next(line for line in lines if line.startswith("| `math.fn %x"))
    listed = row.split("|")[2].split(" on a float dtype")[0]
    names = [n.strip() for n in listed.split(",")]
    assert names == list(MATH_FNS), f"docs/compiler.md math row lists {names}, the table {MATH_FNS}"


# ---------------------------------------------------------------------------------------------
# generator bounds (oracle/generator/bounds.py, D441)
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("cls", ALL_OPS, ids=lambda c: c.__name__)
def test_every_op_has_a_generator_bound_rule_or_states_why_not(cls: type):
    from tilefoundry.oracle.generator.bounds import BOUND_RULES, NO_BOUND

    assert (cls in BOUND_RULES) != (cls in NO_BOUND), (
        f"{cls.__name__}: register a bound rule in oracle/generator/bounds.py or add it to "
        f"NO_BOUND with the reason (not both)")
    if cls in NO_BOUND:
        assert NO_BOUND[cls].strip(), cls.__name__


def test_the_bound_rules_compute_bounds():
    """A few rules on hand-made operands: |a + b| <= 3 + 4, |max| <= max, a sum of 5 <= 5·3,
    comparisons are 0/1, a float activation is untracked, and over the exact limit is None."""
    from tilefoundry.oracle.generator.bounds import bounds
    from tilefoundry.semantics.formats import DType
    from tilefoundry.semantics.ops import Binary, BinaryKind, Reduce, ReduceKind
    from tilefoundry.semantics.ops.nn import Sigmoid
    from tilefoundry.semantics.types import TensorType

    class V:
        def __init__(self, bound, shape=(5,)):
            self.bound, self.is_tensor = bound, True
            self.type = TensorType(shape, DType.F32)

    t = TensorType((5,), DType.F32)
    assert bounds(Binary(BinaryKind.ADD), [V(3), V(4)], t) == [7]
    assert bounds(Binary(BinaryKind.MAX), [V(3), V(4)], t) == [4]
    assert bounds(Binary(BinaryKind.LT), [V(3), V(4)], TensorType((5,), DType.BOOL)) == [1]
    assert bounds(Reduce(axes=(0,), kind=ReduceKind.SUM), [V(3)], TensorType((), DType.F32)) == [15]
    assert bounds(Sigmoid(), [V(3)], t) == [None]
    assert bounds(Binary(BinaryKind.MUL), [V(2.0 ** 12), V(2.0 ** 12)], t) == [2.0 ** 24]
    assert bounds(Binary(BinaryKind.MUL), [V(2.0 ** 12), V(2.0 ** 12 + 1)], t) == [None]  # > 2^24


# ---------------------------------------------------------------------------------------------
# admitted sets: the orders each reduction / scan op admits (D442)
# ---------------------------------------------------------------------------------------------
def _with_policy(cls: type, policy: str):
    from tilefoundry.semantics.ops import ReduceKind

    if cls.__name__ == "Reduce":
        return cls(axes=(0,), kind=ReduceKind.SUM, policy=policy)
    if "axes" in {f.name for f in dataclasses.fields(cls)}:
        return cls(axes=(0,), policy=policy)
    return cls(policy=policy)


_POLICY_OPS = [c for c in ALL_OPS if "policy" in {f.name for f in dataclasses.fields(c)}]


def test_the_policy_ops_are_the_reductions_and_scans():
    assert {c.__name__ for c in _POLICY_OPS} == {
        "Reduce", "SeededReduce", "MaskedReduce", "CustomReduce", "Scan", "MaskedScan",
        "SegmentedScan"}, "a new op with a policy: give it POLICIES (its admitted orders)"


@pytest.mark.parametrize("cls", _POLICY_OPS, ids=lambda c: c.__name__)
def test_every_policy_op_states_its_admitted_orders_and_its_type_check_reads_them(cls: type):
    """``POLICIES`` (a class fact) is a non-empty subset of the reduction policies; the op is
    built with each of them and refused (IRError) with each other policy."""
    from tilefoundry.semantics.reductions import POLICIES
    from tilefoundry.semantics.types import IRError

    admitted = getattr(cls, "POLICIES", None)
    assert isinstance(admitted, tuple) and admitted and set(admitted) <= set(POLICIES), \
        f"{cls.__name__}.POLICIES: {admitted!r}"
    for p in POLICIES:
        if p in admitted:
            assert _with_policy(cls, p).policy == p
        else:
            with pytest.raises(IRError, match="policy"):
                _with_policy(cls, p)


def test_the_scan_policy_lists_agree():
    from tilefoundry.semantics.ops.tile_scan import Scan
    from tilefoundry.semantics.reductions import SCAN_POLICIES

    assert set(Scan.POLICIES) == set(SCAN_POLICIES)
