"""One op x concern completeness test (issue 36 item 3, D421): for every op class of
``ALL_OPS`` and every concern keyed by op class, a registry entry exists (or, where the concern
admits it, a stated reason why not). Adding an op class without one of its entries fails here
with the op and the concern named.

The per-concern tests that check more than presence stay where they are (the lowering
registry's double-registration check, the mesh rule table's refusal, the builders' volume
test); the presence checks those files made are subsumed here."""

from __future__ import annotations

from collections.abc import Callable

import pytest

import tilefoundry.compiler.lower as lower
import tilefoundry.oracle.enclosure_eval
import tilefoundry.oracle.programs
import tilefoundry.semantics.evaluator.families
import tilefoundry.semantics.typeinfer  # noqa: F401  (registers every family's type rule)
from tilefoundry.oracle.enclosure import ENCLOSURES
from tilefoundry.oracle.generator.base import BUILDERS
from tilefoundry.oracle.relax import SCOPE
from tilefoundry.semantics.evaluator.mesh_rules import mesh_rules
from tilefoundry.semantics.evaluator.registry import EVALUATORS
from tilefoundry.semantics.ops import (
    ALL_OPS,
    BINARY_PROPERTIES,
    UNARY_PROPERTIES,
    Binary,
    BinaryKind,
    Unary,
    UnaryKind,
)
from tilefoundry.semantics.ops.nn import ACTIVATIONS
from tilefoundry.semantics.typeinfer import RULES
from tilefoundry.semantics.typeinfer.commutation import TABLE
from tilefoundry.smt.obligations.commutation_models import NN_PROPERTIES, _model

#: nn-family classes of one input "x" that are NOT elementwise activations (so carry no
#: per-element order facts), with the reason
_NOT_ACTIVATIONS = {"SoftMax": "normalizes across an axis: each output reads the whole row"}


def _type_rule(c: type) -> str | None:
    return None if c in RULES else "no type rule (semantics/typeinfer/, register_rule)"


def _evaluator(c: type) -> str | None:
    return None if c in EVALUATORS else "no evaluator (semantics/evaluator/, register_eval)"


def _enclosure(c: type) -> str | None:
    return None if c in ENCLOSURES else "no enclosure rule (oracle/enclosures/)"


def _lowering(c: type) -> str | None:
    if c in lower.LOWERINGS:
        return None
    reason = lower.NOT_LOWERED.get(c)
    if isinstance(reason, str) and reason.strip():
        return None
    return "neither a lowering rule (compiler/lower_*.py) nor a NOT_LOWERED reason"


def _builder(c: type) -> str | None:
    return None if c in BUILDERS else "no generator builder (oracle/generator/)"


def _relax_scope(c: type) -> str | None:
    """Which declared relaxations can apply to the op (an op without an entry would silently
    admit none: ``relax.applicable`` reads a missing class as the empty set)."""
    return None if c in SCOPE else "no relaxation scope (oracle/relax.py SCOPE)"


def _mesh_rule(c: type) -> str | None:
    return None if c in mesh_rules() else "no mesh rule (semantics/evaluator/mesh_rules.py)"


def _op_facts(c: type) -> str | None:
    """Elementwise ops state their order / algebra facts as data: every Unary / Binary kind has
    a property set; every nn activation of one input declares ``FACTS`` in its own class body
    (not inherited: an inherited ``None`` would silently mean "no facts")."""
    if c is Unary:
        missing = [k.value for k in UnaryKind if k not in UNARY_PROPERTIES]
        if missing:
            return f"UnaryKind without UNARY_PROPERTIES: {missing}"
        # each kind has exactly one dtype class: float_only, numeric, or logical_not (bool)
        unclassed = [k.value for k, p in UNARY_PROPERTIES.items()
                     if len(p & {"float_only", "numeric"}) + (k is UnaryKind.LOGICAL_NOT) != 1]
        return f"UnaryKind without exactly one dtype fact: {unclassed}" if unclassed else None
    if c is Binary:
        missing = [k.value for k in BinaryKind if k not in BINARY_PROPERTIES]
        return f"BinaryKind without BINARY_PROPERTIES: {missing}" if missing else None
    if getattr(c, "FAMILY", None) == "nn" and c.INPUTS == ("x",) and \
            c.__name__ not in _NOT_ACTIVATIONS:
        if c not in ACTIVATIONS:
            return "a one-input nn op that is not listed in ops/nn.py ACTIVATIONS"
        facts = vars(c).get("FACTS")
        if not isinstance(facts, frozenset):
            return "an activation without its own FACTS frozenset (ops/nn.py)"
    return None


def _smt_model(c: type) -> str | None:
    """Every op class the Partial commutation table has rows for has an SMT model of each row
    (smt/obligations/commutation_models.py); the nn activations' property sets are the class
    facts."""
    rows = [r for r in TABLE if r.op == c.__name__]
    missing = sorted({r.kind for r in rows if _model(r) is None})
    if missing:
        return f"commutation rows without an SMT model (kinds {missing})"
    if c in ACTIVATIONS and NN_PROPERTIES.get(c.__name__) != c.FACTS:
        return "NN_PROPERTIES does not carry the class FACTS"
    return None


CONCERNS: dict[str, Callable[[type], str | None]] = {
    "type_rule": _type_rule,
    "evaluator": _evaluator,
    "enclosure": _enclosure,
    "lowering": _lowering,
    "generator": _builder,
    "mesh_rule": _mesh_rule,
    "relax_scope": _relax_scope,
    "op_facts": _op_facts,
    "smt_model": _smt_model,
}


@pytest.mark.parametrize("concern", sorted(CONCERNS))
@pytest.mark.parametrize("op_cls", ALL_OPS, ids=lambda c: c.__name__)
def test_every_op_has_an_entry_for_every_concern(op_cls: type, concern: str):
    problem = CONCERNS[concern](op_cls)
    assert problem is None, f"{op_cls.__name__} / {concern}: {problem}"


@pytest.mark.parametrize("registry,name", [
    (RULES, "type rules"), (EVALUATORS, "evaluators"), (ENCLOSURES, "enclosure rules"),
    (BUILDERS, "generator builders"), (lower.LOWERINGS, "lowerings"),
    (mesh_rules(), "mesh rules"), (SCOPE, "relaxation scopes"),
])
def test_registries_hold_only_catalog_ops(registry: dict, name: str):
    """The other direction: a registry key outside ALL_OPS is a class the catalog forgot.
    Classes that other tests register for themselves (defined outside the package) are not
    the catalog's."""
    stray = sorted(c.__name__ for c in registry
                   if c not in ALL_OPS and c.__module__.startswith("tilefoundry."))
    assert not stray, f"{name} registered for classes outside ALL_OPS: {stray}"


def test_activation_facts_are_read_not_restated():
    """The commutation table's rows for each activation follow its FACTS: monotone ones commute
    with exactly max and min, the others with nothing (a change of FACTS moves the rows)."""
    for c in ACTIVATIONS:
        allowed = {r.reduction for r in TABLE if r.op == c.__name__ and r.allow}
        assert allowed == ({"max", "min"} if "monotone" in c.FACTS else set()), c.__name__


def test_the_concern_checks_can_fail():
    """Each concern check reports a class that has no entries at all."""

    class _Stray:
        INPUTS = ("x",)
        FAMILY = "nn"

    for concern, check in CONCERNS.items():
        if concern == "smt_model":  # applies only to ops with commutation rows
            continue
        assert check(_Stray) is not None, concern
