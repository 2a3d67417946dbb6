"""Reducers declared by the program itself (issue 37 item 2; docs/decisions.md D448–D450).

A module states its own reducer as a static value the ``CustomReduce`` op carries in its
``reducer`` attribute, spelled in the DSL / textual IR as ``Reducer(...)``::

    Reducer("sum_absmax",
            state=(("sum", f32), ("amax", f32)),
            lift=("x", ("max", "x", ("sub", 0.0, "x"))),
            merge=(("add", "a.sum", "b.sum"), ("max", "a.amax", "b.amax")),
            identity=(-0.0, 0.0),
            laws=(("associative", "real", ("sum",)), ("associative", "exact", ("amax",)),
                  ("commutative", "exact"), ("identity", "exact")))

Expressions are the same data as the built-ins' (``reducers.py``): a name (``x`` in ``lift``;
``a.<component>`` / ``b.<component>`` and earlier ``lets`` names in ``merge``), a float / int
constant, or ``(op, operand, ...)`` with ``op`` one of the elementwise kinds ``add sub mul div
max min`` (two operands) or ``ifzero`` (three: ``ifzero(c, t, f)`` is ``t`` where ``c == 0``).
Each operation is one IEEE f32 operation. A law is ``(name, over)`` or ``(name, over,
components)``: name ``associative`` / ``commutative`` / ``identity``, ``over`` ``exact`` (claimed
bit-exact for the f32 merge) or ``real`` (claimed over the reals only).

``declare_reducer`` type-checks a declaration (``ReducerDeclarationError`` names the reducer, the
offending field and the fix); ``reducer_laws.check_laws`` then checks the claimed laws.
"""

from __future__ import annotations

import keyword
import math
from dataclasses import dataclass
from typing import Any

from tilefoundry.errors import InvalidArgumentError
from tilefoundry.semantics.formats import DType
from tilefoundry.semantics.reducers import REDUCERS, Law, Reducer

__all__ = ["DeclaredReducer", "ReducerDeclarationError", "declare_reducer", "reducer_source"]

LAW_NAMES = ("associative", "commutative", "identity")
LAW_OVER = ("exact", "real")
BINARY = ("add", "sub", "mul", "div", "max", "min")
#: the most operations one declared expression may hold (a bound on checking / lowering cost)
MAX_EXPR_NODES = 256
#: the state dtypes a declared reducer may carry (the evaluator's state array is f32)
STATE_DTYPES = (DType.F32,)


class ReducerDeclarationError(InvalidArgumentError):
    """A program's reducer declaration is malformed (names the reducer, the field, the fix)."""


@dataclass(frozen=True)
class DeclaredReducer(Reducer):
    """A ``Reducer`` stated by the program (``declared`` marks it; ``dtypes`` one per state
    component). Equal declarations are equal values (a frozen dataclass of tuples)."""

    dtypes: tuple = ()
    declared: bool = True

    def __str__(self) -> str:
        return f"declared {self.name}"


def _fail(name: object, field: str, msg: str, fix: str) -> ReducerDeclarationError:
    return ReducerDeclarationError(f"reducer {name!r}: {field}: {msg}; {fix}")


def _ident(v: object) -> bool:
    return isinstance(v, str) and v.isidentifier() and not keyword.iskeyword(v)


def _check_expr(rname: str, field: str, e: Any, names: frozenset[str], count: list[int]) -> Any:
    """The expression, normalized (lists → tuples, ints → floats); raises on anything else."""
    count[0] += 1
    if count[0] > MAX_EXPR_NODES:
        raise _fail(rname, field, f"more than {MAX_EXPR_NODES} operations",
                    "split the state or simplify the expression")
    if isinstance(e, bool):
        raise _fail(rname, field, f"{e!r} is a bool", "write a float constant")
    if isinstance(e, str):
        if e not in names:
            raise _fail(rname, field, f"{e!r} is not bound here",
                        f"use one of {tuple(sorted(names))} or a float constant")
        return e
    if isinstance(e, int | float):
        return float(e)
    if isinstance(e, tuple | list) and e and isinstance(e[0], str):
        head, args = e[0], tuple(e[1:])
        want = 3 if head == "ifzero" else 2 if head in BINARY else None
        if want is None:
            raise _fail(rname, field, f"operation {head!r} is not an elementwise kind",
                        f"use one of {(*BINARY, 'ifzero')}")
        if len(args) != want:
            raise _fail(rname, field, f"{head} takes {want} operands, got {len(args)}",
                        f"write ({head!r}, {', '.join(['operand'] * want)})")
        return (head, *(_check_expr(rname, field, a, names, count) for a in args))
    raise _fail(rname, field, f"{e!r} is not an expression",
                "write a name string, a float constant or (op, operand, ...)")


def declare_reducer(name: str, state: Any, lift: Any, merge: Any, identity: Any = None,
                    laws: Any = (), lets: Any = ()) -> DeclaredReducer:
    """Type-check a program's reducer declaration and return it as a value (module docstring).
    The DSL's ``Reducer(...)`` constructor."""
    if not _ident(name):
        raise ReducerDeclarationError(f"reducer name {name!r} is not an identifier; name the "
                                      f"reducer like a Python variable, e.g. 'my_reducer'")
    if name in REDUCERS:
        raise _fail(name, "name", "is a built-in reducer's name",
                    f"choose another name (built-ins: {tuple(REDUCERS)}) or name the built-in "
                    f"with reducer={name!r}")
    if not isinstance(state, tuple | list) or not state:
        raise _fail(name, "state", f"{state!r} is not a non-empty tuple of (component, dtype)",
                    "write state=(('sum', f32), ...)")
    comps, dts = [], []
    for c in state:
        if not (isinstance(c, tuple | list) and len(c) == 2 and _ident(c[0])):
            raise _fail(name, "state", f"{c!r} is not (identifier, dtype)",
                        "write ('component', f32)")
        if c[1] not in STATE_DTYPES:
            raise _fail(name, "state", f"component {c[0]!r} has dtype {c[1]!r}",
                        "declared reducer states are f32 (the only state dtype the reference "
                        "evaluates); use f32")
        if c[0] in comps:
            raise _fail(name, "state", f"component {c[0]!r} repeats", "name components uniquely")
        comps.append(c[0])
        dts.append(c[1])
    S = len(comps)
    for field, v in (("lift", lift), ("merge", merge)):
        if not isinstance(v, tuple | list) or len(v) != S:
            raise _fail(name, field, f"needs one expression per state component ({S}: "
                        f"{tuple(comps)}), got {v!r}", f"give {field} as a tuple of {S} expressions")
    count = [0]
    lift_n = tuple(_check_expr(name, f"lift[{comps[i]}]", e, frozenset({"x"}), count)
                   for i, e in enumerate(lift))
    bound = {f"{s}.{c}" for s in "ab" for c in comps}
    lets_n = []
    if not isinstance(lets, tuple | list):
        raise _fail(name, "lets", f"{lets!r} is not a tuple of (name, expression)",
                    "write lets=(('n', ('add', 'a.count', 'b.count')),)")
    for b in lets:
        if not (isinstance(b, tuple | list) and len(b) == 2 and _ident(b[0])):
            raise _fail(name, "lets", f"{b!r} is not (identifier, expression)",
                        "write ('n', expression)")
        if b[0] in bound or b[0] == "x":
            raise _fail(name, "lets", f"{b[0]!r} is already bound", "choose a fresh name")
        lets_n.append((b[0], _check_expr(name, f"lets[{b[0]}]", b[1], frozenset(bound), count)))
        bound.add(b[0])
    merge_n = tuple(_check_expr(name, f"merge[{comps[i]}]", e, frozenset(bound), count)
                    for i, e in enumerate(merge))
    ident_n = None
    if identity is not None:
        if (not isinstance(identity, tuple | list) or len(identity) != S or
                not all(isinstance(v, int | float) and not isinstance(v, bool) for v in identity)):
            raise _fail(name, "identity", f"{identity!r} is not {S} float constants",
                        f"give one float per component {tuple(comps)} or identity=None")
        ident_n = tuple(float(v) for v in identity)
    laws_n = []
    if not isinstance(laws, tuple | list):
        raise _fail(name, "laws", f"{laws!r} is not a tuple of laws",
                    "write laws=(('associative', 'real'), ...)")
    for lw in laws:
        if not (isinstance(lw, tuple | list) and len(lw) in (2, 3)):
            raise _fail(name, "laws", f"{lw!r} is not (law, over) or (law, over, components)",
                        "write ('associative', 'real')")
        ln, over = lw[0], lw[1]
        cs = tuple(lw[2]) if len(lw) == 3 else ()
        if ln not in LAW_NAMES:
            raise _fail(name, "laws", f"law {ln!r} is unknown", f"use one of {LAW_NAMES}")
        if over not in LAW_OVER:
            raise _fail(name, "laws", f"{ln} over {over!r}", f"use one of {LAW_OVER}")
        bad = [c for c in cs if c not in comps]
        if bad:
            raise _fail(name, "laws", f"{ln} names components {bad} not in the state",
                        f"name components of {tuple(comps)}")
        if ln == "identity" and ident_n is None:
            raise _fail(name, "laws", "claims an identity law but declares no identity",
                        "give identity=(...) or drop the identity law")
        laws_n.append(Law(ln, over, cs))
    assoc = {c for c in comps for lw in laws_n if lw.name == "associative" and
             (not lw.components or c in lw.components)}
    return DeclaredReducer(
        name=name, state=tuple(comps), lift=lift_n, lets=tuple(lets_n), merge=merge_n,
        identity=ident_n, merge_contract=assoc == set(comps), laws=tuple(laws_n),
        doc=f"declared by the program: {name}", dtypes=tuple(dts))


def _expr_text(e: Any, static) -> str:
    if isinstance(e, tuple):
        return "(" + ", ".join(_expr_text(a, static) for a in e) + ")"
    if isinstance(e, float) and not math.isfinite(e):
        return static(e)
    return static(e)


def reducer_source(r: DeclaredReducer, static) -> str:
    """The DSL text ``Reducer(...)`` that parses back to ``r`` (``static`` spells one static
    value: floats, strings, dtypes)."""
    state = "(" + ", ".join(f"({static(c)}, {static(d)})" for c, d in
                            zip(r.state, r.dtypes, strict=True)) + ",)"

    def tup(items: list[str]) -> str:
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"

    lift = tup([_expr_text(e, static) for e in r.lift])
    merge = tup([_expr_text(e, static) for e in r.merge])
    parts = [static(r.name), f"state={state}", f"lift={lift}", f"merge={merge}"]
    if r.lets:
        parts.append("lets=" + tup([f"({static(n)}, {_expr_text(e, static)})"
                                    for n, e in r.lets]))
    if r.identity is not None:
        parts.append("identity=" + tup([static(v) for v in r.identity]))
    if r.laws:
        parts.append("laws=" + tup([
            "(" + ", ".join([static(lw.name), static(lw.over)] +
                            ([tup([static(c) for c in lw.components])] if lw.components
                             else [])) + ")" for lw in r.laws]))
    return f"Reducer({', '.join(parts)})"
